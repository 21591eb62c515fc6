"""A run folder is what it says: one rule (ragrade.provenance) decides whether a rerun resumes, extends or is
refused, names each difference, writes nothing when it refuses, and derived files know their source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import make_exam
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main
from ragrade.provenance import decide, digest, provenance, source_record, stale_reason

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

ROBUST_DATA = Path(__file__).resolve().parents[1] / "robust" / "data" / "en_base.jsonl"


def _grid(*ks: int) -> dict[str, dict[str, object]]:
    specs = {"closed": {"retriever": "closed", "k": 0, "llm": "openai/m"}}
    specs.update({f"bm25 k={k}": {"retriever": "bm25", "k": k, "llm": "openai/m"} for k in ks})
    return specs


def _prov(ks: tuple[int, ...] = (3,), base_url: str = "http://A/v1", items: int = 4, **recorded: object) -> Any:
    return provenance(
        inputs={"exam": "e" * 64},
        models={"llm openai/m": {"spec": "openai/m", "base_url": base_url}},
        grid=_grid(*ks),
        items=[f"q{i}" for i in range(items)],
        settings={"seed": 0},
        recorded={"throughput": recorded},
    )


def test_the_rule_worked_by_hand() -> None:
    old = _prov()
    assert decide(None, old).action == "new"
    assert decide(old, _prov(concurrency=8, timeout=5)).action == "resume"  # throughput is recorded, not compared
    assert digest(old) == digest(_prov(concurrency=8))
    more = decide(old, _prov(ks=(3, 5)))
    assert more.action == "extend" and more.added_units == ["bm25 k=5"]
    assert more.summary() == "extends the run with 1 new pipeline (bm25 k=5); every finished result is kept"
    assert decide(old, _prov(items=6)).added_items == 2
    changed = decide(old, _prov(ks=(5,)))
    assert changed.action == "refuse"
    assert [str(d) for d in changed.differences] == ["k: 3 -> 5 (pipeline bm25 k=3 would be dropped)"]
    server = decide(old, _prov(base_url="http://B/v1"))
    assert [str(d) for d in server.differences] == ["base_url: http://A/v1 -> http://B/v1"]
    fewer = decide(old, _prov(items=3))
    assert [str(d) for d in fewer.differences] == ["questions: 4 -> 3 (1 asked before would be dropped, e.g. q3)"]
    msg = server.message("r1", "robustness run", 20)
    assert msg.startswith("r1 holds a robustness run with other inputs or settings: base_url: http://A/v1 -> ")
    assert msg.endswith("start over with $overwrite (discards its 20 finished results)")
    assert decide(old, _prov(ks=(3, 5)), extend=False).action == "refuse"  # a runner that cannot extend


def test_a_derived_file_knows_the_responses_it_was_computed_from(tmp_path: Path) -> None:
    responses = tmp_path / "responses.parquet"
    responses.write_bytes(b"one")
    (tmp_path / "manifest.json").write_text(json.dumps({"provenance": _prov()}))
    rec = source_record(responses)
    assert rec["provenance"] == digest(_prov()) and rec["file"] == "responses.parquet"
    assert stale_reason(rec, responses) is None
    responses.write_bytes(b"two")
    assert "other responses than the current responses.parquet" in str(stale_reason(rec, responses))
    assert stale_reason({}, responses) is None  # a file from before sources were recorded is not judged


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def _index(tmp_path: Path, n: int = 12) -> tuple[Path, Path]:
    from ragrade.corpus.types import Chunk
    from ragrade.retrieval.index import IndexConfig, build_index

    exam = tmp_path / "exam.jsonl"
    questions = make_exam(exam, n)
    chunks = [
        Chunk(id=q.chunk_id, doc_id=q.doc_id, text=q.context, start=0, end=len(q.context), strategy="whole")
        for q in questions
    ]
    build_index(chunks, tmp_path / "idx", IndexConfig(dense=False))
    return exam, tmp_path / "idx"


def test_a_changed_grid_is_refused_naming_it_and_an_added_one_extends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exam, idx = _index(tmp_path)
    out = tmp_path / "g1"
    with OpenAIServer(responder=lambda body: "A") as srv:
        args = ["exam", "take", str(exam), "--index", f"whole={idx}", "--llm", "openai/test-model"]
        args += ["--llm-base-url", srv.base_url, "--retrievers", "closed,bm25", "--no-cache", "--out", str(out)]
        assert main([*args, "--k", "3"]) == 0
        assert main(["compare", str(out), "--all"]) == 0
        assert main(["irt", "fit", str(out), "--model", "1pl"]) == 0
        sent, before = srv.requests_total, _snapshot(out)
        capsys.readouterr()
        assert main([*args, "--k", "5"]) == 2
        err = capsys.readouterr().err
        assert "k: 3 -> 5 (pipeline" in err and "would be dropped)" in err and "--overwrite" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert _snapshot(out) == before and srv.requests_total == sent  # nothing written, nothing asked
        assert main([*args, "--k", "3,5", "--json"]) == 0  # a grid that only adds pipelines extends the run
        captured = capsys.readouterr()
        assert json.loads(captured.out)["new_rows"] == 12 and "extends the run with 1 new pipeline" in captured.err
        assert srv.requests_total - sent <= 12 * 5  # only the new pipeline's questions were asked
    import pandas as pd

    rows = pd.read_parquet(out / "responses.parquet")
    assert rows["pipeline"].nunique() == 3 and len(rows) == 36  # every earlier row kept beside the new ones
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "sweep/comparisons.json is out of date" in page and f"ragrade compare {out} --all" in page
    assert "irt/irt.json is out of date" in page
    assert main(["compare", str(out), "--all"]) == 0  # refreshed: shown again
    assert main(["report", str(out), "--out", str(tmp_path / "r2.html")]) == 0
    assert "sweep/comparisons.json is out of date" not in (tmp_path / "r2.html").read_text()


def test_robust_run_against_another_server_is_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r1"
    with OpenAIServer(responder=lambda body: "It is in chapter 7.") as a, OpenAIServer(responder=lambda b: "No") as b:
        args = ["robust", "run", str(ROBUST_DATA), "--testbed", "noise", "--noise-ratios", "0", "--no-cache"]
        args += ["--llm", "openai/test-model", "--out", str(out)]
        assert main([*args, "--llm-base-url", a.base_url]) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["kind"] == "robust-run" and manifest["status"] == "complete"
        assert manifest["provenance"]["models"]["llm openai/test-model"]["base_url"] == a.base_url
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["provenance"]["digest"] == digest(manifest["provenance"])  # the table knows its source
        before = _snapshot(out)
        capsys.readouterr()
        assert main([*args, "--llm-base-url", b.base_url]) == 2
        err = capsys.readouterr().err
        assert f"base_url: {a.base_url} -> {b.base_url}" in err and "--out" in err
        assert b.requests_total == 0 and _snapshot(out) == before
        assert main([*args, "--llm-base-url", a.base_url, "--concurrency", "3", "--timeout", "9"]) == 0  # resumes
        assert "generated=0" in capsys.readouterr().out


def _take(exam: Path, url: str, out: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "ragrade", "exam", "take", str(exam), "--llm", "openai/test-model"]
    cmd += ["--llm-base-url", url, "--retrievers", "closed", "--no-cache", "--concurrency", "2", "--out", str(out)]
    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_a_second_process_on_a_folder_in_use_stops_at_once(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 20)
    out = tmp_path / "busy"
    with OpenAIServer(responder=lambda body: "A", latency_s=2.0) as srv:  # the first run holds the folder 20 s
        first = _take(exam, srv.base_url, out)
        deadline = time.monotonic() + 120
        while not (out / "ragrade.lock").is_file() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (out / "ragrade.lock").is_file()
        second = _take(exam, srv.base_url, out)
        _, err = second.communicate(timeout=120)
        assert first.poll() is None  # it stopped while the first still ran
        assert second.returncode == 2 and f"in use by process {first.pid}" in err and "Traceback" not in err
        assert first.wait(timeout=300) == 0
        needed = srv.requests_total
    with OpenAIServer(responder=lambda body: "A") as fresh:  # one run alone needs as many requests
        alone = _take(exam, fresh.base_url, tmp_path / "alone")
        assert alone.wait(timeout=300) == 0
        assert needed == fresh.requests_total
    assert not (out / "ragrade.lock").exists()  # released at the end


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragrade.runlock import LOCK_FILE, RunFolderBusy, run_lock

    folder = tmp_path / "run"
    folder.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (folder / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename, "command": "x"}))
    notes: list[str] = []
    with run_lock(folder, note=notes.append):
        assert json.loads((folder / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert notes and "which is gone" in notes[0] and not (folder / LOCK_FILE).exists()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (folder / LOCK_FILE).write_text(json.dumps({"pid": alive.pid, "host": os.uname().nodename, "command": "y"}))
        with pytest.raises(RunFolderBusy, match=f"in use by process {alive.pid}"), run_lock(folder):
            pass
    finally:
        alive.kill()
    empty = tmp_path / "new"
    with pytest.raises(RuntimeError), run_lock(empty):
        raise RuntimeError("refused before anything was written")
    assert not empty.exists()  # a refused run leaves no folder behind


def test_qa_answer_feeds_an_in_process_backend_in_batches(tmp_path: Path) -> None:
    from tests.qa.qa_fakes import CountingLLM

    from ragrade.api.exam import answer_qa
    from ragrade.qa.files import QAItem, write_qa
    from ragrade.run.spec import build_sweep_config

    qa = tmp_path / "qa.jsonl"
    items = [
        QAItem(id=f"q{i:02d}", question=f"Colour of {i}?", reference="blue", reference_context=f"{i} is blue.",
               chunk_id=f"c{i}", doc_id="d")
        for i in range(40)
    ]  # fmt: skip
    write_qa(qa, items)
    CountingLLM.calls, CountingLLM.peak = [], 0
    cfg = build_sweep_config(
        {"grid": {"llms": ["py/tests.qa.qa_fakes:make_counting_llm"], "retrievers": ["closed"]},
         "shard_size": 4}
    )  # fmt: skip
    result = answer_qa(qa, tmp_path / "qa-run", config=cfg)
    assert result.n_new_rows == 40
    assert sum(CountingLLM.calls) == 40 and max(CountingLLM.calls) == 4  # lists of a shard's requests
    assert CountingLLM.peak > 8  # more shards in flight than the two a server run keeps: the batching step


def _job(tmp_path: Path) -> Path:
    """A small job config over four short documents, its LLM the test server's model."""
    docs = tmp_path / "cfg" / "docs"
    docs.mkdir(parents=True)
    for i, town in enumerate(("Ardmore", "Belcove", "Corran", "Dunmore")):
        (docs / f"{town.lower()}.txt").write_text(
            f"The lighthouse at {town} was lit in {1850 + 7 * i}. Its keeper logged {40 + i} ships each winter. "
            f"The {town} lamp burns colza oil and turns once every {10 + i} seconds.",
            encoding="utf-8",
        )
    cfg = tmp_path / "cfg" / "job.toml"
    cfg.write_text(
        '[corpus]\npaths = ["docs"]\n[[chunkers]]\nstrategy = "recursive"\nsize = 64\noverlap = 8\n'
        '[exam]\nn = 6\nmin_chunk_chars = 40\n[sweep]\nllms = ["openai/test-model"]\nretrievers = ["closed", "bm25"]\n'
        "[irt]\nenabled = false\n[robust]\nenabled = false\n[judge]\nenabled = false\n",
        encoding="utf-8",
    )
    return cfg


def test_ragrade_run_reuses_every_stage_when_only_throughput_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _job(tmp_path)
    out = tmp_path / "run"
    with OpenAIServer(responder=lambda body: "A") as srv:
        args = ["run", str(cfg), "--out", str(out), "--llm-base-url", srv.base_url, "--no-cache", "--json"]
        assert main(args) == 0
        capsys.readouterr()
        sent = srv.requests_total
        assert sent > 0
        for change in (["--concurrency", "8"], ["--timeout", "12"], ["--max-retries", "1"]):
            assert main([*args, *change, "--no-report"]) == 0, change
            stages = json.loads(capsys.readouterr().out)["stages"]
            assert {k: v["status"] for k, v in stages.items() if k != "report"} == {
                k: "reused" for k in stages if k != "report"
            }, change
        assert srv.requests_total == sent  # 0 requests, the response cache off


def test_qa_answer_refusal_names_the_seed_and_the_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragrade.qa.files import QAItem, write_qa

    qa = tmp_path / "qa.jsonl"
    write_qa(qa, [QAItem(f"q{i}", f"Colour of {i}?", "blue", f"{i} is blue.", f"c{i}", "d") for i in range(4)])
    out = tmp_path / "qa-run"
    with OpenAIServer(responder=lambda body: "blue") as srv:
        args = ["qa", "answer", str(qa), "--llm", "openai/test-model", "--llm-base-url", srv.base_url]
        args += ["--retrievers", "closed", "--no-cache", "--out", str(out)]
        assert main([*args, "--seed", "1"]) == 0
        capsys.readouterr()
        assert main([*args, "--seed", "2"]) == 2
        err = capsys.readouterr().err
        assert "seed: 1 -> 2" in err and "--out" in err and "--overwrite" in err and "Traceback" not in err
        sent = srv.requests_total
        assert main([*args, "--seed", "2", "--overwrite"]) == 0  # the way out it names works
        assert srv.requests_total == sent + 4


def test_a_lock_that_cannot_be_written_is_not_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from ragrade import runlock

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    folder = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(os, "write", full)
        with pytest.raises(OSError, match="No space left"):
            runlock.acquire(folder)
    assert not (folder / runlock.LOCK_FILE).exists()  # the rerun is not blocked by an empty lock
    (folder / runlock.LOCK_FILE).write_text("")  # an empty lock left by a process killed while writing it
    old = time.time() - 10
    os.utime(folder / runlock.LOCK_FILE, (old, old))
    notes: list[str] = []
    assert runlock.acquire(folder, note=notes.append).is_file()
    assert "a process that left it empty, which is gone" in notes[0]


def test_a_second_ragrade_run_on_a_folder_in_use_stops_before_any_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, out = _job(tmp_path), tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = {"pid": holder.pid, "host": os.uname().nodename, "command": "ragrade run job.toml"}
        (out / "ragrade.lock").write_text(json.dumps(lock))
        assert main(["run", str(cfg), "--out", str(out), "--llm-base-url", "http://127.0.0.1:9/v1"]) == 2
    finally:
        holder.kill()
    assert f"in use by process {holder.pid}" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["ragrade.lock"]  # no stage started
