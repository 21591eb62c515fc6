"""Run every verb (but ``demo``, a whole job) on a small offline corpus with ``ragrade.api`` wrapped: each run
calls exactly the one API function the verb is listed with (tests/cli/test_cli_over_api.py checks the same
statically), and prints what that function returned."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from ragrade import api
from ragrade.api.types import AdaptivePlan
from ragrade.cli.main import main
from ragrade.run.spec import build_sweep_config

Cap = pytest.CaptureFixture[str]

DOC = (
    "# The {t} service\n\n"
    "The {t} subsystem stores record {i} in the {t} registry and rotates it every {j} days. "
    "Operators set {t}_limit = {k} to bound the queue of the {t} workers. "
    "The {t} registry keeps {j} copies of every record on {k} disks.\n"
)
TOPICS = ("keys", "backup", "cluster", "tokens", "storage", "logging")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``ragrade.api`` function wrapped: the names called, in order."""
    names: list[str] = []
    for name in api.__all__:
        real = getattr(api, name)
        if not callable(real) or isinstance(real, type):
            continue

        def wrapper(*args: object, _real: Callable[..., object] = real, _name: str = name, **kw: object) -> object:
            names.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(api, name, functools.wraps(real)(wrapper))
    return names


def _write_exam(chunks_path: Path, out: Path) -> None:
    """Six hand-made questions over the first chunks (no generator: fast, and the same for every run)."""
    lines = chunks_path.read_text(encoding="utf-8").splitlines()[1:]
    chunks = [json.loads(line) for line in lines]
    records: list[dict[str, object]] = [{"ragrade": {"kind": "exam", "version": 1}}]
    for n, chunk in enumerate(chunks[:6]):
        topic = TOPICS[n % len(TOPICS)]
        records.append(
            {
                "id": f"q{n}",
                "question": f"Which service stores record ____ ({chunk['text'][:40]})?",
                "choices": [topic, *[t for t in TOPICS if t != topic][:3]],
                "answer": 0,
                "doc_id": chunk["doc_id"],
                "chunk_id": chunk["id"],
            }
        )
    out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def test_every_verb_calls_its_api_function_once(tmp_path: Path, calls: list[str], capsys: Cap) -> None:
    def step(argv: Sequence[object], expected: str, code: int = 0) -> str:
        """Run ``ragrade ARGV``: its exit code, and the one API function it called; returns its stdout."""
        calls.clear()
        got = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        assert (got, calls) == (code, [expected]), (argv, err)
        return out

    src = tmp_path / "docs"
    src.mkdir()
    for n, t in enumerate(TOPICS):
        (src / f"{t}.md").write_text(DOC.format(t=t, i=n * 7, j=n + 2, k=n * 3 + 1), encoding="utf-8")
    docs, chunks, idx = tmp_path / "docs.jsonl", tmp_path / "chunks.jsonl", tmp_path / "idx"
    exam, run = tmp_path / "exam.jsonl", tmp_path / "run"
    assert json.loads(step(["corpus", src, "--out", docs, "--json"], "load_corpus"))["documents"] == 6
    step(["chunk", docs, "--size", "40", "--overlap", "0", "--out", chunks], "chunk")
    assert "indexed" in step(["index", chunks, "--out", idx, "--no-dense"], "build_index")
    hits = json.loads(step(["search", idx, "backup registry", "-r", "bm25", "-k", "2", "--json"], "search_index"))
    assert len(hits["hits"]) == 2 and hits["retriever"] == "bm25"
    step(["ask", idx, "Which record does the backup service store?", "-r", "bm25"], "open_assistant")
    _write_exam(chunks, exam)
    assert "letter" in step(["exam", "stats", exam], "exam_stats").lower()
    step(["retrieval-eval", idx, exam, "-r", "bm25", "--n-boot", "20", "--json"], "evaluate_retrieval")
    grid = ["--index", f"r={idx}", "--llm", "offline/student", "--retrievers", "closed,bm25", "--k", "2"]
    step(["exam", "take", exam, *grid, "--out", run], "take_exam")
    plan_argv = ["--dry-run", "exam", "take", exam, *grid, "--adaptive", "--out", tmp_path / "ad"]
    assert step(plan_argv, "plan_adaptive").startswith("adaptive plan: 2 pipelines x 6 questions (full grid 12 ")
    plan = json.loads(step([*plan_argv, "--json"], "plan_adaptive"))["adaptive_plan"]
    assert list(plan) == [f.name for f in dataclasses.fields(AdaptivePlan)][:-1]  # its fields in order, no notes
    typed = api.plan_adaptive(exam, build_sweep_config({"grid": {"retrievers": ["closed", "bm25"], "k": [2]},
                                                        "indexes": {"r": str(idx)}}))  # fmt: skip
    assert isinstance(typed, AdaptivePlan) and typed.as_dict() == plan and typed.full_grid_requests == 12
    assert "McNemar" in step(["compare", run, "--all", "--n-boot", "50"], "compare_pipelines")
    step(["irt", "fit", run, "--model", "1pl", "--se", "none"], "fit_irt")
    step(["irt", "improve", run, "--model", "1pl", "--steps", "1", "--drop", "0.2"], "improve_exam")
    assert (run / "irt_improve" / "exam.improved.jsonl").is_file()
    assert "report:" in step(["report", run], "render_report")

    qa, qa_run = tmp_path / "qa.jsonl", tmp_path / "qa_run"
    step(["qa", "generate", idx, "--llm", "offline", "--n", "4", "--out", qa], "generate_qa")
    qa_grid = ["--index", f"r={idx}", "--llm", "offline/extractive", "--retrievers", "bm25", "--k", "2"]
    step(["qa", "answer", qa, *qa_grid, "--out", qa_run], "answer_qa")
    step(["judge", qa_run, "--metrics", "exact,claims", "--llm", "offline/judge"], "judge_answers")
    page = tmp_path / "label.html"
    step(["label", qa_run / "judge", "--n", "2", "--metrics", "claims", "--out", page], "write_label_page")
    labels = tmp_path / "labels.jsonl"
    scored = [json.loads(line) for line in (qa_run / "judge" / "scores.jsonl").read_text().splitlines()]
    ids = sorted({str(r["id"]) for r in scored if r.get("metric") == "claims"})
    labels.write_text("".join(json.dumps({"id": i, "metric": "claims", "label": 1}) + "\n" for i in ids))
    step(["judge", "calibrate", qa_run / "judge", "--human", labels, "--min-labels", "2"], "calibrate_judge")

    beds, robust = tmp_path / "beds", tmp_path / "robust"
    built = json.loads(step(["robust", "build", "--exam", exam, "--index", idx, "--out", beds], "build_testbeds"))
    assert built["files"]["base"].endswith("base.jsonl")
    robust_run = ["robust", "run", beds / "base.jsonl", "--testbed", "noise", "--llm", "offline/extractive"]
    step([*robust_run, "--noise-ratios", "0,0.5", "--docs", "2", "--out", robust], "run_testbed")
    step(["robust", "table", robust], "robust_table")

    cache = tmp_path / "cache"
    assert json.loads(step(["cache", "info", "--cache-dir", cache, "--json"], "cache_info"))["exists"] is False
    assert "nothing to clear" in step(["cache", "clear", "--cache-dir", cache], "clear_cache")
    probe = json.loads(step(["llm", "probe", "--llm", "offline/extractive", "--need", "generate"], "probe_llm"))
    assert probe["need"] == ["generate"] and set(probe) >= {"generate", "loglikelihood", "capabilities"}

    job = tmp_path / "job.toml"
    job.write_text(f'out = "{tmp_path / "job"}"\n[corpus]\npaths = ["{src}"]\n', encoding="utf-8")
    assert "config is valid" in step(["run", "--check", job], "plan_job")


def test_run_warns_in_flags_before_it_mixes_into_another_commands_run(
    tmp_path: Path, calls: list[str], capsys: Cap
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("The Arlen lighthouse has 90 steps. " * 20, encoding="utf-8")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "manifest.json").write_text("{}", encoding="utf-8")  # an `exam take` run was here
    job = tmp_path / "job.toml"
    job.write_text('[corpus]\npaths = ["docs"]\n[sweep]\nretrievers = ["bm25", "hybird"]\n', encoding="utf-8")
    assert main(["run", str(job), "--out", str(taken)]) == 2  # the misspelt retriever fails before any stage
    err = capsys.readouterr().err
    assert calls == ["run_job"]
    assert err.startswith(f"ragrade: warning: {taken} holds another command's run (manifest.json at its top")
    assert "give a new folder with --out to keep them apart" in err  # the setting spelled as the flag


def test_the_api_returns_what_the_verbs_print_beside_the_objects_it_always_gave(tmp_path: Path) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    for n, t in enumerate(TOPICS):
        (src / f"{t}.md").write_text(DOC.format(t=t, i=n * 7, j=n + 2, k=n * 3 + 1), encoding="utf-8")
    docs = api.load_corpus(src, out=tmp_path / "docs.jsonl")
    assert isinstance(docs, list) and len(docs) == docs.summary["documents"] == 6
    assert docs.out == tmp_path / "docs.jsonl" and docs.summary["skipped"] == 0
    chunks = api.chunk(docs, size=40, overlap=0)
    assert isinstance(chunks, list) and len(chunks) == chunks.summary["chunks"] > 6 and chunks.out is None
    index = api.build_index(chunks, tmp_path / "idx", dense=False)
    assert index.stats.chunks == len(index.chunks) == len(chunks) and index.stats.embedder is None
    hits = index.retriever("bm25").retrieve(["backup registry"], 2)[0]  # still the opened index
    assert [h.rank for h in hits] == [1, 2]
    found = api.search_index(index, "backup registry", retriever="bm25", k=2)
    assert [h.chunk_id for h in found.hits] == [h.chunk_id for h in hits] and found.searched == ["backup registry"]
