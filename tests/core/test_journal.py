"""The durable per-item store: what a kill leaves, failed rows redone, fingerprints, old journals, row bytes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ragrade.io import dumps_line
from ragrade.journal import Journal, JournalMismatch

# commits one batch, then dies by SIGKILL inside the transaction of a second one (before its COMMIT)
_KILLED_MID_BATCH = """
import os, signal, sys
from ragrade.journal import Journal
j = Journal(sys.argv[1])
j.put("u", [{"k": "a", "v": 1}, {"k": "b", "v": 2}], key="k")
j._db.execute("BEGIN IMMEDIATE")
j._db.executemany("INSERT INTO results (pipeline, item, row, done) VALUES ('u', ?, '{}', 1)", [("c",), ("d",)])
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_batch_killed_before_its_commit_is_not_visible(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    proc = subprocess.run([sys.executable, "-c", _KILLED_MID_BATCH, str(path)], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    with Journal(path) as j:
        assert j.rows("u") == [{"k": "a", "v": 1}, {"k": "b", "v": 2}]
        assert j.done_items("u") == {"a", "b"} and j.count() == 2


def test_failed_rows_are_kept_but_not_done_and_replaced_when_redone(tmp_path: Path) -> None:
    with Journal(tmp_path / "journal.sqlite") as j:
        assert j.add("p", [{"item_id": "1", "error": None}, {"item_id": "2", "error": "HTTP 500"}]) == 2
        assert (j.done_items("p"), j.count("p"), j.count_failed("p")) == ({"1"}, 1, 1)
        assert [r["error"] for r in j.rows("p")] == [None, "HTTP 500"]  # the failure stays visible
        # a rerun asks item 2 again: its success replaces the failed row; a finished row is never replaced
        assert j.add("p", [{"item_id": "2", "error": None, "v": 1}, {"item_id": "1", "error": None, "v": 9}]) == 1
        assert j.rows("p") == [{"error": None, "item_id": "1"}, {"error": None, "item_id": "2", "v": 1}]
        assert (j.count("p"), j.count_failed("p")) == (2, 0)
        # put: the latest version wins, with a stage's own rule of what is done
        j.put(
            "s",
            [{"key": "x", "failed": True}, {"key": "y", "failed": False}],
            key="key",
            done=lambda r: not r["failed"],
        )
        assert j.done_items("s") == {"y"}
        j.put("s", [{"key": "x", "failed": False}], key="key", done=lambda r: not r["failed"])
        assert j.done_items("s") == {"x", "y"} and j.rows("s", ["x"]) == [{"key": "x", "failed": False}]
        j.delete("s", ["y"])
        assert j.done_items("s") == {"x"}


def test_a_rerun_with_another_provenance_is_refused_once_a_row_finished(tmp_path: Path) -> None:
    from ragrade.provenance import provenance

    a, b = provenance(settings={"seed": 1}), provenance(settings={"seed": 2})
    with Journal(tmp_path / "journal.sqlite") as j:
        j.check_provenance(a)
        j.add("p", [{"item_id": "1", "error": "timeout"}])
        j.check_provenance(b)  # only a failed row: not a run to protect, started afresh
        assert j.rows("p") == [] and j.provenance() == b
        j.add("p", [{"item_id": "1", "error": None}])
        assert j.check_provenance(b).action == "resume"
        with pytest.raises(JournalMismatch, match="other inputs or settings: seed: 2 -> 1"):
            j.check_provenance(a)


def test_a_schema_1_journal_opens_with_its_failed_rows_not_done(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    with sqlite3.connect(path) as db:  # what ragrade wrote before the done column
        db.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE pipelines (pipeline TEXT PRIMARY KEY, spec TEXT NOT NULL);"
            "CREATE TABLE results (pipeline TEXT NOT NULL, item TEXT NOT NULL, row TEXT NOT NULL,"
            " PRIMARY KEY (pipeline, item));"
            "INSERT INTO meta VALUES ('schema_version', '1');"
            """INSERT INTO results VALUES ('p', '1', '{"error":null,"item_id":"1"}');"""
            """INSERT INTO results VALUES ('p', '2', '{"error":"HTTP 500","item_id":"2"}');"""
        )
    db.close()
    with Journal(path) as j:
        assert (j.done_items("p"), j.count_failed("p")) == ({"1"}, 1)
        assert j.get_meta("schema_version") == "2"
    with Journal(path) as j:  # and again, upgraded once
        assert j.done_items("p") == {"1"}


def test_put_keeps_rows_as_the_files_write_them(tmp_path: Path) -> None:
    row = {"z": 1, "a": "é", "n": 0.1 + 0.2, "t": (1, 2), "p": Path("x")}
    with Journal(tmp_path / "journal.sqlite") as j:
        j.put("u", [row], key=lambda r: "only")
        [back] = j.rows("u")
    assert list(back) == ["z", "a", "n", "t", "p"] and dumps_line(back) == dumps_line(row)
    assert json.loads(dumps_line(row)) == back


def test_an_unreadable_journal_is_a_data_error(tmp_path: Path) -> None:
    from ragrade.errors import DataError

    path = tmp_path / "journal.sqlite"
    path.write_bytes(b"not a database at all, just some bytes" * 50)
    with pytest.raises(DataError, match="not a usable run journal"):
        Journal(path)


def test_a_resume_before_any_row_finished_keeps_the_record(tmp_path: Path) -> None:
    """A run stopped before its first row, resumed, then finished: a later rerun with other settings is still
    compared with the record (the resume forgot the empty run and must write the record again)."""
    from ragrade.provenance import provenance

    a, b = provenance(settings={"seed": 1}), provenance(settings={"seed": 2})
    with Journal(tmp_path / "journal.sqlite") as j:
        j.check_provenance(a)  # stopped before any row finished
        j.check_provenance(a)  # the resume
        assert j.provenance() == a
        j.add("p", [{"item_id": "1", "error": None}])
        with pytest.raises(JournalMismatch, match="seed: 1 -> 2"):
            j.check_provenance(b)
