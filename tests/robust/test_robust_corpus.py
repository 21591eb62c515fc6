"""Testbeds built from a user's corpus: hand-made chunks, then the demo corpus run with offline/extractive."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.support.typed import as_list, dig

from ragrade.errors import DataError
from ragrade.llm.options import LLMOptions
from ragrade.retrieval.base import Hit
from ragrade.robust.corpus import QA, CorpusBuildOptions, build_corpus_testbeds, load_qa_file, write_corpus_testbeds
from ragrade.robust.data import load_rgb


class OverlapRetriever:
    """A tiny lexical retriever (word overlap), enough to rank a handful of chunks deterministically."""

    name = "overlap"

    def __init__(self, chunks: Sequence[tuple[str, str]]) -> None:
        self.chunks = list(chunks)

    @staticmethod
    def _words(text: str) -> set[str]:
        return set(re.findall(r"\w+", text.lower()))

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        out = []
        for q in queries:
            qw = self._words(q)
            scored = sorted(
                ((len(qw & self._words(t)), -i, cid, t) for i, (cid, t) in enumerate(self.chunks)), reverse=True
            )[:k]
            out.append([Hit(cid, cid, float(s), r + 1, t) for r, (s, _, cid, t) in enumerate(scored)])
        return out

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


CHUNKS = [
    ("c1", "The Harbor Games of 2031 were held in Port Alder on the north coast."),
    ("c2", "Port Alder spent 12 million crowns on the Harbor Games."),
    ("c3", "The Harbor Games feature rowing, sailing and swimming."),
    ("c4", "Lindmouth hosted the Harbor Games in 2027."),
    ("c5", "The Lumen Bridge opened in March after four years of work."),
    ("c6", "The Lumen Bridge carries two tram lines across the river."),
    ("c7", "Engineers tested the Lumen Bridge with loaded trucks."),
    ("c8", "The Veltron summit drew 70 delegates; 170 journalists covered it."),
]


def _qas() -> list[QA]:
    return [
        QA("q1", "Which town hosted the 2031 Harbor Games?", ("Port Alder",), ("Lindmouth", "Grey Cove")),
        QA("q2", "In which month did the Lumen Bridge open?", ("March",), ("March", "June")),
        QA("q3", "How many delegates did the Veltron summit draw?", ("70",), ()),  # no distractor
        QA("q4", "Who painted the town hall?", ("Ines Moll",), ("Otto Varga",)),  # answer nowhere
    ]


def test_build_pools_counterfactual_and_integration(tmp_path: Path) -> None:
    built = build_corpus_testbeds(_qas(), OverlapRetriever(CHUNKS), CorpusBuildOptions(k=8, seed=1))
    base = {it.id: it for it in built.base}
    assert set(base) == {"q1", "q2", "q3"}
    q1 = base["q1"]
    assert set(q1.positive) == {CHUNKS[0][1], CHUNKS[1][1]}
    assert all("Port Alder" not in t for t in q1.negative)
    assert q1.negative[0] in (CHUNKS[2][1], CHUNKS[3][1])  # hard negatives first (rank order)
    assert q1.meta["positive_chunks"] and q1.meta["negative_chunks"]
    # "70" is found in c8 as a number, not in "170"; c8 is a positive
    assert base["q3"].positive == (CHUNKS[7][1],)
    cf = {it.id: it for it in built.counterfactual}
    assert set(cf) == {"q1", "q2"}
    assert cf["q1"].fakeanswer == (("Lindmouth",),)
    assert all("Lindmouth" in t and "Port Alder" not in t for t in cf["q1"].positive_wrong)
    assert all("Lindmouth" not in t for t in cf["q1"].negative)
    assert cf["q2"].fakeanswer == (("June",),)  # the distractor equal to the answer is skipped
    reasons = {(dig(d, "id"), dig(d, "testbed")): str(dig(d, "reason")) for d in as_list(built.report["dropped"])}
    assert "no retrieved chunk" in reasons[("q4", "all")]
    assert "distractor" in reasons[("q3", "counterfactual")]
    assert len(built.integration) == 1
    inte = built.integration[0]
    assert inte.query.startswith("Answer both questions. (1)")
    assert len(inte.answer) == 2 and len(inte.positive_groups) == 2
    for t in inte.negative:
        assert not any(a in t for part in inte.answer for a in part)
    paths = write_corpus_testbeds(built, tmp_path, {"qa": "inline"})
    assert load_rgb(paths["base"]).kind == "base"
    assert load_rgb(paths["integration"]).kind == "integration"
    assert load_rgb(paths["counterfactual"]).kind == "counterfactual"
    report = json.loads(Path(paths["report"]).read_text())
    assert report["questions"] == 4 and report["base"] == 3 and len(report["dropped"]) == 2


def test_qa_file_loading(tmp_path: Path) -> None:
    p = tmp_path / "qa.jsonl"
    p.write_text('{"question": "Q?", "answer": ["A", "a1"], "distractors": "B"}\n{"query": "R?", "answer": 7}\n')
    qas = load_qa_file(p)
    assert qas[0].answers == ("A", "a1") and qas[0].distractors == ("B",) and qas[1].answers == ("7",)
    p.write_text('{"question": "Q?"}\n')
    with pytest.raises(DataError, match=r"qa.jsonl:1: missing 'answer'"):
        load_qa_file(p)


def _demo_qa(chunks: Sequence[Any], n: int) -> list[dict[str, Any]]:
    """Cloze questions from demo chunks with the offline key-term extractor (fast, deterministic)."""
    from ragrade.exam.offline import extract_terms

    picked: list[tuple[Any, Any]] = []
    by_kind: dict[str, list[str]] = {}
    for c in chunks:
        terms = [t for t in extract_terms(c.text) if t.kind in ("code", "name") and len(t.text) >= 4]
        for t in terms:
            by_kind.setdefault(t.kind, []).append(t.text)
        once = [t for t in terms if c.text.count(t.text) == 1 and t.sentence[1] - t.sentence[0] >= 40]
        if once and len(picked) < n:
            picked.append((c, once[0]))
    out = []
    for c, t in picked:
        s0, s1 = t.sentence
        sentence = (c.text[s0 : t.start] + "____" + c.text[t.end : s1]).strip()
        others = [x for x in dict.fromkeys(by_kind[t.kind]) if x != t.text][:3]
        out.append(
            {
                "id": c.id,
                "question": f"Which term fills the blank? {sentence}",
                "answer": t.text,
                "distractors": others,
                "context": c.text,
            }
        )
    return out


@pytest.fixture(scope="module")
def demo_testbeds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Demo corpus -> chunks -> cloze QA file -> bm25 index -> robustness testbeds (via the CLI)."""
    from ragrade.cli.main import main
    from ragrade.corpus.chunk import chunk_documents, create_chunker
    from ragrade.corpus.demo import build_demo_corpus
    from ragrade.retrieval.index import IndexConfig, build_index

    root = tmp_path_factory.mktemp("demo")
    docs = build_demo_corpus(limit=40)
    chunks = chunk_documents(docs, create_chunker("recursive", size=120, overlap=0))
    qa = _demo_qa(chunks, 6)
    assert len(qa) >= 5
    (root / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qa), encoding="utf-8")
    build_index(chunks, root / "index", IndexConfig(dense=False))
    rc = main(
        [
            "robust",
            "build",
            "--qa",
            str(root / "qa.jsonl"),
            "--index",
            str(root / "index"),
            "--out",
            str(root / "testbeds"),
            "--k",
            "20",
        ]
    )
    assert rc == 0
    return root / "testbeds"


@pytest.mark.slow
def test_demo_corpus_testbeds_run_with_the_extractive_reader(demo_testbeds: Path, tmp_path: Path) -> None:
    from ragrade.robust.run import RobustRunConfig, run_robust

    report = json.loads((demo_testbeds / "build_report.json").read_text())
    assert report["base"] >= 3, report
    base = load_rgb(demo_testbeds / "base.jsonl")
    for it in base.items:  # positives contain the answer, noise does not
        from ragrade.robust.match import contains

        assert all(any(contains(t, a) for a in it.answer[0]) for t in it.positive)
        assert not any(contains(t, a) for t in it.negative for a in it.answer[0])
    from ragrade.llm import create_llm

    reader = create_llm("offline/extractive", cache=False)  # one reader (one model load) for all runs
    runs = {}
    for testbed, name, ratios in (
        ("noise", "base", [0.0, 0.8]),
        ("negative", "base", None),
        ("counterfactual", "counterfactual", None),
    ):
        if not (demo_testbeds / f"{name}.jsonl").exists():
            continue
        cfg = RobustRunConfig(
            data=demo_testbeds / f"{name}.jsonl",
            testbed=testbed,
            llm=["offline/extractive"],
            out=tmp_path / testbed,
            noise_ratios=ratios,
            docs=3,
            llm_options=LLMOptions(cache=False),
        )
        [run], _ = run_robust(cfg, llms=[reader])
        runs[testbed] = run.metrics
        assert run.metrics["failed"] == 0 and run.metrics["is_baseline"] is True
    noise = runs["noise"]
    assert noise["n"] == 2 * len(base.items) - noise["skipped"]
    acc0 = noise["by_noise_ratio"][0]["accuracy"]["value"]
    assert acc0 is not None and acc0 > 0.3  # with only positives the reader mostly finds the sentence
    neg = runs["negative"]
    assert neg["rejection_rate"]["n"] == neg["n"] and neg["n"] > 0
    # the reader only refuses or quotes a sentence: every response is one or the other, nothing fails
    for r in (tmp_path / "negative" / "results.jsonl").read_text().splitlines()[1:]:
        rec = json.loads(r)
        assert rec["response"]
