"""``--dry-run`` and the other run settings reach every executor's workers (a local Ray instance).

A dry run is a setting of the run (the ``dry_run`` LLM option), shipped with the work: a Ray worker
builds the counting LLM and sends nothing, and its counts come back to the command, equal to what the
local executor counts. The cache folder and the timeout reach the workers the same way. The verbs
without an executor (``robust run``, ``judge``) are checked on their local path. One Ray instance
(2 CPUs) and one counting server serve the whole module.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer, always

from ragrade.cli.main import main

pytestmark = [pytest.mark.slow, pytest.mark.ray]

Cap = pytest.CaptureFixture[str]
TOPICS = ("keys", "backup", "cluster", "tokens", "storage", "logging")
DOC = (
    "# The {t} service\n\nThe {t} subsystem stores record {i} in the {t} registry and rotates it every {j} "
    "days. Operators set {t}_limit = {k} to bound the queue of the {t} workers.\n"
)
ROBUST_DATA = Path(__file__).resolve().parents[1] / "robust" / "data" / "en_base.jsonl"
N_QUESTIONS = 4


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[Any]:
    """One local Ray instance (2 CPUs) for the module, started the way the executor starts one."""
    ray = pytest.importorskip("ray")
    from ragrade.run.executors import RayExecutor

    RayExecutor(workers=2)._init()
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A six-document corpus, its BM25 index, a four-question exam, a QA file and offline answers to it."""
    root = tmp_path_factory.mktemp("dry")
    docs = root / "docs"
    docs.mkdir()
    for n, t in enumerate(TOPICS):
        (docs / f"{t}.md").write_text(DOC.format(t=t, i=n * 7, j=n + 2, k=n * 3 + 1), encoding="utf-8")
    w = {"root": root, "docs": docs, "idx": root / "idx", "exam": root / "exam.jsonl", "qa": root / "qa.jsonl"}
    assert main(["corpus", str(docs), "--out", str(root / "docs.jsonl")]) == 0
    assert main(["index", str(root / "docs.jsonl"), "--out", str(w["idx"]), "--size", "60", "--no-dense"]) == 0
    chunks = [json.loads(x) for x in (w["idx"] / "chunks.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    exam: list[dict[str, Any]] = [{"ragrade": {"kind": "exam", "version": 1}}]
    qa: list[dict[str, Any]] = [{"ragrade": {"kind": "qa", "version": 1}}]
    for n, chunk in enumerate(chunks[:N_QUESTIONS]):
        topic = TOPICS[n % len(TOPICS)]
        exam.append(
            {
                "id": f"q{n}",
                "question": f"Which service stores record {n * 7}?",
                "choices": [topic, *[t for t in TOPICS if t != topic][:3]],
                "answer": 0,
                "doc_id": chunk["doc_id"],
                "chunk_id": chunk["id"],
            }
        )
        qa.append(
            {
                "id": f"a{n}",
                "question": f"What does the {topic} subsystem store?",
                "reference": topic,
                "reference_context": chunk["text"],
                "chunk_id": chunk["id"],
                "doc_id": chunk["doc_id"],
            }
        )
    w["exam"].write_text("".join(json.dumps(r) + "\n" for r in exam), encoding="utf-8")
    w["qa"].write_text("".join(json.dumps(r) + "\n" for r in qa), encoding="utf-8")
    w["answers"] = root / "answers"
    assert (
        main(
            [
                "qa",
                "answer",
                str(w["qa"]),
                "--index",
                f"r={w['idx']}",
                "--llm",
                "offline/extractive",
                "--retrievers",
                "bm25",
                "--out",
                str(w["answers"]),
            ]
        )
        == 0
    )
    return w


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragrade.run.pipeline import clear_resources

    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    clear_resources()


def _dry(args: list[object], capsys: Cap) -> list[dict[str, Any]]:
    """Run ``ragrade --dry-run ARGS``; the counts it printed (exit 0 and a dry-run report asserted)."""
    code = main(["--dry-run", *map(str, args)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "dry run: nothing was sent" in err, err
    counts: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])["dry_run"]
    return counts


def _llm(server: OpenAIServer) -> list[str]:
    return ["--llm", "openai/test-model", "--llm-base-url", server.base_url]


def _grid(verb: list[str], data: Path, w: dict[str, Path], server: OpenAIServer, out: Path) -> list[object]:
    return [
        *verb,
        data,
        "--index",
        f"r={w['idx']}",
        *_llm(server),
        "--retrievers",
        "closed,bm25",
        "--icl",
        "0",
        "--k",
        "2",
        "--out",
        out,
    ]


@pytest.mark.parametrize(
    ("verb", "data", "kind"),
    [(["exam", "take"], "exam", "loglikelihood_requests"), (["qa", "answer"], "qa", "generate_requests")],
)
def test_grid_verbs_send_nothing_under_ray_and_count_what_local_counts(
    verb: list[str],
    data: str,
    kind: str,
    world: dict[str, Path],
    server: OpenAIServer,
    ray_instance: Any,
    tmp_path: Path,
    capsys: Cap,
) -> None:
    server.reset_counters()
    args = _grid(verb, world[data], world, server, tmp_path / "run")
    on_ray = _dry([*args, "--executor", "ray"], capsys)  # the module's instance: two actors
    local = _dry(args, capsys)
    assert server.requests_total == 0  # neither executor's workers sent anything
    assert not (tmp_path / "run").exists()
    assert [c["llm"] for c in on_ray] == ["openai/test-model"]
    assert on_ray == local  # the same counts, token estimates included, whichever executor ran the work
    assert on_ray[0][kind] == on_ray[0]["requests"] == 2 * N_QUESTIONS  # two pipelines x four questions


def test_ragrade_run_with_the_ray_executor_sends_nothing(
    world: dict[str, Path], server: OpenAIServer, ray_instance: Any, tmp_path: Path, capsys: Cap
) -> None:
    def job(executor: str) -> Path:
        path = tmp_path / f"job-{executor}.toml"
        path.write_text(
            f'out = "{tmp_path / "out"}"\n[corpus]\npaths = ["{world["docs"]}"]\n[[chunkers]]\nsize = 60\n'
            f'[llm]\nbase_url = "{server.base_url}"\n[exam]\npath = "{world["exam"]}"\n'
            f'[sweep]\nllms = ["openai/test-model"]\nretrievers = ["closed", "bm25"]\nk = [2]\n'
            f'executor = "{executor}"\n[irt]\nenabled = false\n[robust]\nenabled = false\n'
            "[report]\nenabled = false\n",
            encoding="utf-8",
        )
        return path

    server.reset_counters()
    on_ray = _dry(["run", job("ray")], capsys)
    local = _dry(["run", job("local")], capsys)
    assert server.requests_total == 0 and not (tmp_path / "out").exists()
    assert on_ray == local and on_ray[0]["loglikelihood_requests"] == 2 * N_QUESTIONS


def test_robust_run_and_judge_send_nothing_and_count_what_a_real_run_sends(
    world: dict[str, Path], server: OpenAIServer, tmp_path: Path, capsys: Cap
) -> None:
    """No executor option: the dry run is in their settings (``RobustRunConfig`` / ``JudgeRunConfig.dry_run``)."""
    robust = ["robust", "run", ROBUST_DATA, "--testbed", "noise", *_llm(server), "--noise-ratios", "0,0.2"]
    judge = ["judge", world["answers"], "--metrics", "correctness", *_llm(server)]
    server.reset_counters()
    robust_counts = _dry([*robust, "--out", tmp_path / "robust"], capsys)
    judge_counts = _dry([*judge, "--out", tmp_path / "judge"], capsys)
    assert server.requests_total == 0 and not (tmp_path / "robust").exists() and not (tmp_path / "judge").exists()
    assert robust_counts[0]["generate_requests"] == 8  # four questions at two noise ratios
    assert judge_counts[0]["generate_requests"] == N_QUESTIONS  # one correctness verdict per answer
    for args, counts in ((robust, robust_counts), (judge, judge_counts)):
        server.reset_counters()
        main([*map(str, args), "--out", str(tmp_path / "real" / str(args[0])), "--no-cache"])
        capsys.readouterr()
        assert server.requests_total == counts[0]["requests"], args[0]  # what the real run sent


def test_the_cache_folder_of_the_run_reaches_ray_workers(
    world: dict[str, Path],
    server: OpenAIServer,
    ray_instance: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Cap,
) -> None:
    """Ray was started with another ``$RAGRADE_CACHE_DIR``: the actors of this run still write under this one."""
    cache = tmp_path / "run-cache"
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(cache))
    server.reset_counters()

    def take(out: str) -> int:
        args = _grid(["exam", "take"], world["exam"], world, server, tmp_path / out)
        return main([*map(str, args), "--executor", "ray", "--ray-workers", "1"])

    assert take("run") == 0, capsys.readouterr().err
    sent = server.requests_total
    assert sent >= 2 * N_QUESTIONS
    with sqlite3.connect(next(cache.glob("*.sqlite*"))) as db:
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] >= 2 * N_QUESTIONS
    assert take("again") == 0, capsys.readouterr().err
    assert server.requests_total == sent, server.requests_by_path  # the second run's workers read that cache


def test_the_timeout_reaches_ray_workers_and_their_errors_are_redacted(
    world: dict[str, Path], ray_instance: Any, tmp_path: Path, capsys: Cap
) -> None:
    with OpenAIServer(faults=always("hang", hang_s=60)) as hanging:
        url = hanging.base_url.replace("http://", "http://user:s3cret@") + "?api_key=k3y"
        args = [
            *_grid(["exam", "take"], world["exam"], world, hanging, tmp_path / "run"),
            *("--llm-base-url", url, "--executor", "ray", "--ray-workers", "1"),
            *("--timeout", "0.3", "--max-retries", "0", "--no-cache"),
        ]
        t0 = time.perf_counter()
        code = main(list(map(str, args)))
        elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert code in (2, 3), err  # failed requests, not answers
    assert elapsed < 30, elapsed  # each attempt gave up after 0.3 s, not after the default 60 s
    assert "tim" in err.lower(), err
    import pandas as pd

    errors = pd.read_parquet(tmp_path / "run" / "responses.parquet")["error"].dropna()
    assert len(errors) == 2 * N_QUESTIONS  # every request failed in the workers, none dropped
    written = " ".join([err, *errors, *(p.read_text(errors="replace") for p in (tmp_path / "run").glob("*.json*"))])
    # redaction is a pure function, not a setting to ship: nothing the run printed or wrote holds the credentials
    assert "s3cret" not in written and "k3y" not in written


def test_a_dry_run_after_a_real_run_in_the_same_process_sends_nothing(
    world: dict[str, Path], server: OpenAIServer, tmp_path: Path, capsys: Cap
) -> None:
    """The local executor keeps loaded pipelines per settings: a dry run never reuses the real run's LLM."""
    server.reset_counters()
    args = _grid(["exam", "take"], world["exam"], world, server, tmp_path / "real")
    assert main(list(map(str, args))) == 0, capsys.readouterr().err
    sent = server.requests_total
    assert sent >= 2 * N_QUESTIONS
    counts = _dry([*args[:-1], tmp_path / "dry"], capsys)
    assert server.requests_total == sent and counts[0]["requests"] == 2 * N_QUESTIONS
