"""A noise testbed built from a user's corpus realises its noise ratios, so accuracy can move (issue 36.9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.robust.test_robust_corpus import OverlapRetriever

from ragrade.robust.corpus import QA, CorpusBuildOptions, build_corpus_testbeds, write_corpus_testbeds
from ragrade.robust.data import load_rgb
from ragrade.robust.run import RobustRunConfig, run_robust

SITES = [
    ("Lumen Bridge", "Vessa river", "Ada Korr"),
    ("Harbor Tower", "Alder bay", "Bruno Melk"),
    ("Glass Market", "Old square", "Cara Voss"),
    ("North Lighthouse", "Grey cape", "Dag Olin"),
    ("Stone Theatre", "Mill street", "Eva Rinn"),
    ("River Library", "Tan quay", "Finn Ashe"),
]
FEATURES = ["two tram lines", "a copper roof", "four lifts", "wide stairs"]


def _built(tmp_path: Path) -> Path:
    """A small corpus: per site one passage naming its engineer in few of the question's words, and four hard
    negatives that repeat the question's words without the answer (what a retriever ranks first)."""
    chunks, qas = [], []
    for i, (site, place, engineer) in enumerate(SITES):
        chunks.append((f"p{i}", f"{engineer}, a young engineer, designed the {site.split()[-1].lower()}."))
        for j, feature in enumerate(FEATURES):
            chunks.append((f"n{i}.{j}", f"The {site} by the {place} was designed in {1900 + 10 * j} with {feature}."))
        qas.append(QA(f"q{i}", f"Which engineer designed the {site} by the {place}?", (engineer,), ()))
    built = build_corpus_testbeds(qas, OverlapRetriever(chunks), CorpusBuildOptions(k=30))
    source = {"exam": None, "qa": "qa.jsonl", "index": "index", "retriever": "overlap"}
    return Path(write_corpus_testbeds(built, tmp_path / "testbeds", source)["base"])


def _by_ratio(metrics: dict[str, Any], key: str) -> list[float]:
    return [round(g[key]["value"] if key == "accuracy" else g[key], 2) for g in metrics["by_noise_ratio"]]


def test_built_noise_testbed_reaches_its_ratios_and_accuracy_moves(tmp_path: Path) -> None:
    data = _built(tmp_path)
    assert load_rgb(data).built_from_corpus and all(len(it.positive) == 1 for it in load_rgb(data).items)
    warnings: list[str] = []
    cfg = RobustRunConfig(data=data, testbed="noise", llm=["offline/extractive"], out=tmp_path / "default")
    (run,), _ = run_robust(cfg, warn=warnings.append)
    m = run.metrics
    assert m["shortfall"] == "fewer"  # the default for a testbed built from a corpus
    # one supporting passage: the noise shares it allows are m/(1+m), the nearest to each requested ratio
    assert _by_ratio(m, "noise_ratio_actual_mean") == [0.0, 0.0, 0.5, 0.67, 0.8]
    # the hard negatives outscore the passage for the extractive reader: right without noise, wrong with it
    assert _by_ratio(m, "accuracy") == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert warnings[0].startswith("6 of 6 questions built from your corpus have fewer than 5 supporting passages")
    ratio_lines = [w for w in warnings if "actual noise ratio" in w]
    assert len(ratio_lines) == 1 and "at 0.4: 0.50 on average" in ratio_lines[0]
    assert "the ratios the corpus supports are the actual ones" in ratio_lines[0]


def test_padding_makes_every_ratio_the_same_documents(tmp_path: Path) -> None:
    # what the testbed did before: one passage padded with four noise documents at every ratio, so flat
    data = _built(tmp_path)
    cfg = RobustRunConfig(data=data, testbed="noise", llm=["offline/extractive"], out=tmp_path / "pad", shortfall="pad")
    warnings: list[str] = []
    (run,), _ = run_robust(cfg, warn=warnings.append)
    assert run.metrics["shortfall"] == "pad"
    assert _by_ratio(run.metrics, "noise_ratio_actual_mean") == [0.8] * 5
    assert len(set(_by_ratio(run.metrics, "accuracy"))) == 1
    assert not any("built from your corpus" in w for w in warnings)
    assert any("a document pool is too small; --shortfall fewer" in w for w in warnings)


def test_rgb_files_keep_padding_by_default(tmp_path: Path) -> None:
    data = _built(tmp_path)
    lines = data.read_text(encoding="utf-8").splitlines()
    bare = tmp_path / "rgb.jsonl"
    bare.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")  # no ragrade header: not built here
    assert not load_rgb(bare).built_from_corpus
    cfg = RobustRunConfig(data=bare, testbed="noise", llm=["offline/extractive"], out=tmp_path / "rgb")
    (run,), _ = run_robust(cfg)
    assert run.metrics["shortfall"] == "pad"
    assert run.metrics["by_noise_ratio"][0]["noise_ratio_actual_mean"] == pytest.approx(0.8)


def test_a_testbed_from_an_offline_exam_says_once_that_noise_hardly_matters(tmp_path: Path) -> None:
    from ragrade.exam.files import Question, write_exam
    from ragrade.robust.corpus import OFFLINE_EXAM_NOTE

    exam = tmp_path / "exam.jsonl"
    question = Question(
        id="q0", question="Which ____ designed it?", choices=["a", "b", "c", "d"], answer=0, doc_id="d", chunk_id="c"
    )
    write_exam(exam, [question], meta={"generator": {"name": "offline/cloze"}})
    chunks = [("p", "Ada Korr, a young engineer, designed the bridge."), ("n", "The bridge has two tram lines.")]
    qas = [QA("q0", "Which engineer designed the bridge?", ("Ada Korr",), ())]
    built = build_corpus_testbeds(qas, OverlapRetriever(chunks), CorpusBuildOptions(k=5))
    paths = write_corpus_testbeds(built, tmp_path / "tb", {"exam": str(exam), "index": "i", "retriever": "overlap"})
    assert load_rgb(paths["base"]).meta.get("offline_exam") is True
    warnings: list[str] = []
    cfg = RobustRunConfig(data=Path(paths["base"]), testbed="noise", llm=["offline/extractive"], out=tmp_path / "o")
    run_robust(cfg, warn=warnings.append)
    assert warnings.count(OFFLINE_EXAM_NOTE) == 1
    # a QA file (no offline exam) says nothing of the kind
    plain = write_corpus_testbeds(built, tmp_path / "tb2", {"qa": "qa.jsonl", "index": "i", "retriever": "overlap"})
    warnings.clear()
    cfg = RobustRunConfig(data=Path(plain["base"]), testbed="noise", llm=["offline/extractive"], out=tmp_path / "p")
    run_robust(cfg, warn=warnings.append)
    assert OFFLINE_EXAM_NOTE not in warnings
