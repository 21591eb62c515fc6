"""kill -9 `ragrade robust run` after its first committed batch, rerun: the files of an uninterrupted run."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import repo_env
from tests.support.kill import kill_after
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

DATA = Path(__file__).resolve().parent / "data" / "en_base.jsonl"
TOTAL = 4 * 5  # 4 questions x 5 noise ratios


def _reply(body: dict[str, Any]) -> str:
    """A different answer per prompt (so a record carrying another request's answer would show)."""
    digest = hashlib.sha256(body["messages"][-1]["content"].encode()).hexdigest()[:8]
    return f"Port Alder, I think ({digest})."


def _cmd(url: str, out: Path, config: Path) -> list[str]:
    return [
        sys.executable, "-m", "ragrade", "robust", "run", str(DATA), "--testbed", "noise", "--llm",
        "openai/test-model", "--llm-base-url", url, "--out", str(out), "--max-retries", "0", "--no-cache",
        "--concurrency", "1", "--config", str(config),
    ]  # fmt: skip


def _results(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header (less its time stamp) and the records (less their latency) of results.jsonl."""
    head, *lines = (json.loads(x) for x in (out / "results.jsonl").read_text(encoding="utf-8").splitlines())
    head["ragrade"].pop("updated")
    return head, [{k: v for k, v in r.items() if k != "latency_s"} for r in lines]


def _metrics(out: Path) -> dict[str, Any]:
    m: dict[str, Any] = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    m.pop("created")
    return m


@pytest.mark.slow
def test_kill_9_after_the_first_batch_then_rerun_gives_the_uninterrupted_files(tmp_path: Path) -> None:
    config = tmp_path / "robust.toml"
    config.write_text("[robust]\nbatch_size = 2\n", encoding="utf-8")
    ref, out = tmp_path / "reference", tmp_path / "killed"
    with OpenAIServer(responder=_reply, latency_s=0.05) as srv:
        done = subprocess.run(_cmd(srv.base_url, ref, config), env=repo_env(), capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert srv.requests_total == TOTAL
        srv.reset_counters()
        kept = kill_after(_cmd(srv.base_url, out, config), repo_env(), out / "journal.sqlite", rows=2)
        assert 2 <= kept < TOTAL and not (out / "results.jsonl").exists()
        asked_before_kill = srv.requests_total
        srv.reset_counters()
        rerun = subprocess.run(_cmd(srv.base_url, out, config), env=repo_env(), capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr
        assert srv.requests_total == TOTAL - kept  # nothing committed is asked again
        assert asked_before_kill + srv.requests_total <= TOTAL + 1  # at most the request in flight twice
    assert f"generated={TOTAL - kept} resumed={kept}" in rerun.stdout
    assert _results(out) == _results(ref)
    assert _metrics(out) == _metrics(ref)
    assert (out / "table.csv").read_bytes() == (ref / "table.csv").read_bytes()


def test_a_directory_holding_another_commands_journal_is_refused(tmp_path: Path) -> None:
    from ragrade.errors import ConfigError
    from ragrade.journal import Journal
    from ragrade.provenance import provenance
    from ragrade.robust.run import RecordJournal

    with Journal(tmp_path / "journal.sqlite") as j:
        sweep = provenance(inputs={"exam": "9f2c4e"}, settings={"seed": 1})  # an exam sweep's, with a finished row
        j.check_provenance(sweep)
        j.add("pipeline-1", [{"item_id": "q1", "error": None}])
        with pytest.raises(ConfigError, match=r"other inputs or settings: model: \(none\) -> m; seed: 1 -> 0"):
            fp = {"model": "m", "seed": 0}
            RecordJournal(j, tmp_path / "results.jsonl", fp, provenance(settings=fp))
        assert j.provenance() == sweep and j.count() == 1  # left as it was
