from __future__ import annotations

from pathlib import Path

import pytest

from ragrade.errors import ConfigError
from ragrade.provenance import provenance
from ragrade.run.store import Journal, JournalMismatch

A, B = provenance(inputs={"exam": "aaa"}), provenance(inputs={"exam": "bbb"})


def test_other_fingerprint_or_spec_raises_journal_mismatch(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.sqlite")
    j.check_provenance(A)
    j.check_provenance(A)  # same inputs: resumable
    j.register_pipelines({"p1": {"k": 3}})
    j.register_pipelines({"p1": {"k": 3}})
    j.add("p1", [{"item_id": "q1", "error": None}])  # finished work: now the run is protected
    with pytest.raises(JournalMismatch, match="start over with overwrite"):
        j.check_provenance(B)
    with pytest.raises(JournalMismatch) as info:
        j.register_pipelines({"p1": {"k": 5}})
    assert isinstance(info.value, ConfigError)  # still a user error: one line, exit 2


def test_journal_without_finished_work_never_blocks_a_rerun(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.sqlite")
    j.check_provenance(A)
    j.register_pipelines({"p1": {"k": 3}})
    j.add("p1", [{"item_id": "q1", "error": "HTTP 500: down"}])  # only failures
    j.check_provenance(B)  # other settings: accepted, the failed rows are forgotten
    j.register_pipelines({"p1": {"k": 5}})
    assert j.count_failed() == 0 and j.count() == 0


def test_failed_rows_are_not_done_and_are_replaced_by_the_retry(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.sqlite")
    j.check_provenance(A)
    j.register_pipelines({"p1": {}})
    assert j.add("p1", [{"item_id": "q1", "error": None, "v": 1}, {"item_id": "q2", "error": "timed out", "v": 1}]) == 2
    assert j.done_items("p1") == {"q1"}
    assert (j.count("p1"), j.count_failed("p1")) == (1, 1)
    j.add("p1", [{"item_id": "q1", "error": None, "v": 2}, {"item_id": "q2", "error": None, "v": 2}])
    rows = {r["item_id"]: r["v"] for r in j.rows("p1")}
    assert rows == {"q1": 1, "q2": 2}  # a finished row is never replaced; the failed one is
    assert j.done_items("p1") == {"q1", "q2"} and j.count_failed() == 0
