"""The one durable store of per-item results: SQLite in WAL mode, every batch one fsync'd commit.

Every stage that asks a backend item by item (exam take, qa answer, robust run,
judge scoring) commits each finished batch here, keyed by ``(unit, item)`` (a
unit is a pipeline, a model, a metric: whatever the stage runs items under),
and writes its output files from what the journal holds. A process killed at
any moment (``kill -9``) leaves the journal holding exactly the batches that
were committed; rerunning asks only the rest, and the files written at the
end are those of an uninterrupted run.

A row that *failed* (a failed LLM request, retrieval or external call; what
``done`` says of the row when it is stored) is kept, so the files show it as
missing, but it does not count as done: a rerun asks exactly the failed items
again and replaces their rows. The journal also remembers the run's
provenance (:mod:`ragrade.provenance`: what its results depend on) and each unit's spec, so a rerun
with a different configuration is refused, naming each difference, instead of silently mixing results
(one that only adds units or items extends the run); a journal holding no finished row
never blocks a rerun with other inputs or settings (a command that failed
before any work is not a run).

Two ways to store rows: :meth:`Journal.add` writes a row once (a finished row
is never replaced; the exam sweep's rows, stored with sorted keys) and
:meth:`Journal.put` writes the latest version of a row (a record that gains a
judge verdict, a score made with new settings), keeping its keys in order so
that a file written from the journal is byte-identical to one written from
memory.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragrade.errors import DataError
from ragrade.io import dumps_line
from ragrade.provenance import Decision, ProvenanceMismatch, decide, digest
from ragrade.storage import write_failure, writing

JOURNAL_FILE = "journal.sqlite"
JOURNAL_FILES = (JOURNAL_FILE, f"{JOURNAL_FILE}-wal", f"{JOURNAL_FILE}-shm")
_SCHEMA_VERSION = 2  # 2: an explicit ``done`` column (1 read it from the row's ``error``)

# the table and column names of schema 1 (``pipeline``: a unit) are kept, so old journals open unchanged
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pipelines (pipeline TEXT PRIMARY KEY, spec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    pipeline TEXT NOT NULL, item TEXT NOT NULL, row TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (pipeline, item)
);
"""

Row = Mapping[str, Any]
Done = Callable[[Row], bool]


def no_error(row: Row) -> bool:
    """The default rule: a row is done unless its ``error`` is set."""
    return row.get("error") is None


class JournalMismatch(ProvenanceMismatch):
    """The run directory's journal holds results made with other inputs or settings (rerun with ``overwrite``)."""


class Journal:
    """Durable store of result rows keyed by ``(unit, item)``; see the module docstring."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.decision: Decision | None = None  # what check_provenance decided of this run
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # every COMMIT is fsync'd
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:  # a full disk says so (one line), a damaged file is named
            raise write_failure(exc, self.path) or DataError(f"{self.path}: not a usable run journal ({exc})") from exc
        version = self.get_meta("schema_version")
        if version is None:
            self.set_meta("schema_version", str(_SCHEMA_VERSION))
        elif version == "1":
            self._upgrade_from_1()
        elif version != str(_SCHEMA_VERSION):
            raise DataError(f"{self.path}: journal schema {version}, this ragrade reads {_SCHEMA_VERSION}")

    def _upgrade_from_1(self) -> None:
        with self._tx():
            cols = {r[1] for r in self._db.execute("PRAGMA table_info(results)")}
            if "done" not in cols:
                self._db.execute("ALTER TABLE results ADD COLUMN done INTEGER NOT NULL DEFAULT 1")
            self._db.execute("UPDATE results SET done = (json_extract(row, '$.error') IS NULL)")
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(_SCHEMA_VERSION),))

    def close(self) -> None:
        """Close the database (checkpointing the WAL)."""
        self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- meta
    def get_meta(self, key: str) -> str | None:
        """A metadata value, or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Set a metadata value (durably)."""
        with writing(self.path):
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def check_provenance(
        self, record: Mapping[str, Any], what: str = "run", *, extend: bool = True, ways: str | None = None
    ) -> Decision:
        """Decide what this run may do with the folder's results (:func:`ragrade.provenance.decide`) and record
        ``record`` as what they now depend on: :class:`JournalMismatch` naming each difference when the rerun
        would alter or drop finished results (nothing is written then). A journal with no finished row is not a
        run to protect: it is started afresh."""
        blob = self.get_meta("provenance")
        old = json.loads(blob) if blob else None
        if self.count() == 0 and (old is not None or self.get_meta("fingerprint") is not None):
            self._forget()  # nothing finished under the old record: not a run to protect
            old = blob = None
        elif old is None and self.get_meta("fingerprint") is not None:
            raise JournalMismatch(
                f"{self.path.parent} holds a {what} recorded by an earlier ragrade, without the record of what its "
                "results depend on; " + (ways or "write to a new $out directory, or start over with $overwrite")
            )
        decision = decide(old, record, extend=extend)
        self.decision = decision
        if decision.action == "refuse":
            raise JournalMismatch(decision.message(self.path.parent, what, self.count(), ways))
        new = json.dumps(record, sort_keys=True, separators=(",", ":"))
        if new != blob:  # the throughput it records may have changed
            with self._tx():
                self._db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('provenance', ?), ('fingerprint', ?)",
                    (new, digest(record)),
                )
        return decision

    def provenance(self) -> dict[str, Any] | None:
        """The provenance the journal's results were recorded under (None: none recorded)."""
        blob = self.get_meta("provenance")
        return json.loads(blob) if blob else None

    def register_pipelines(self, specs: Mapping[str, Mapping[str, Any]]) -> None:
        """Record each unit's spec; JournalMismatch when an id was recorded with another spec."""
        known = {p: s for p, s in self._db.execute("SELECT pipeline, spec FROM pipelines")}
        new = []
        for pid, spec in specs.items():
            blob = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
            if pid in known and known[pid] != blob and self.count(pid) == 0:
                with self._tx():  # only failed rows under the old spec: start the unit afresh
                    self._db.execute("DELETE FROM results WHERE pipeline = ?", (pid,))
                    self._db.execute("UPDATE pipelines SET spec = ? WHERE pipeline = ?", (blob, pid))
                known[pid] = blob
            if pid in known and known[pid] != blob:
                raise JournalMismatch(
                    f"pipeline '{pid}' was run before with other settings; "
                    "write to a new $out directory, or start over with $overwrite"
                )
            if pid not in known:
                new.append((pid, blob))
        if new:
            with self._tx():
                self._db.executemany("INSERT INTO pipelines (pipeline, spec) VALUES (?, ?)", new)

    # ---------------------------------------------------------------- results
    def _forget(self) -> None:
        """Drop every row, unit and the fingerprint (only called when no row finished)."""
        with self._tx():
            self._db.execute("DELETE FROM results")
            self._db.execute("DELETE FROM pipelines")
            self._db.execute("DELETE FROM meta WHERE key IN ('fingerprint', 'provenance')")

    def add(self, unit: str, rows: Iterable[Row], key: str = "item_id", done: Done = no_error) -> int:
        """Commit ``rows`` of ``unit`` in one durable transaction; returns how many were new.

        A row replaces a journaled *failed* row of the same item (a retried failure; it counts as new once it
        succeeds); a finished row is never replaced.
        """
        rows = list(rows)
        payload = [
            (unit, str(r[key]), json.dumps(r, sort_keys=True, separators=(",", ":"), default=str), int(done(r)))
            for r in rows
        ]
        known = {r[0] for r in self._db.execute("SELECT item FROM results WHERE pipeline = ?", (unit,))}
        failed = known - self.done_items(unit)
        new = sum(1 for r, p in zip(rows, payload, strict=True) if p[1] not in known or (p[1] in failed and p[3]))
        with self._tx():
            self._db.executemany(
                "INSERT INTO results (pipeline, item, row, done) VALUES (?, ?, ?, ?) ON CONFLICT (pipeline, item) "
                "DO UPDATE SET row = excluded.row, done = excluded.done WHERE results.done = 0",
                payload,
            )
        return new

    def put(self, unit: str, rows: Iterable[Row], key: str | Callable[[Row], str], done: Done = no_error) -> None:
        """Commit the latest version of ``rows`` of ``unit`` (replacing earlier ones) in one durable transaction.

        ``key`` names the row's item id field, or makes the id of a row. The rows are stored as
        :func:`ragrade.io.dumps_line` writes them, keys in order.
        """
        item = key if callable(key) else lambda r: str(r[key])
        payload = [(unit, item(r), dumps_line(r), int(done(r))) for r in rows]
        with self._tx():
            self._db.executemany(
                "INSERT OR REPLACE INTO results (pipeline, item, row, done) VALUES (?, ?, ?, ?)", payload
            )

    def delete(self, unit: str, items: Iterable[str]) -> None:
        """Forget the rows of ``items`` under ``unit`` (one durable transaction)."""
        with self._tx():
            self._db.executemany("DELETE FROM results WHERE pipeline = ? AND item = ?", [(unit, i) for i in items])

    def done_items(self, unit: str) -> set[str]:
        """Item ids journaled as finished for ``unit`` (failed items are not done: a rerun asks them again)."""
        return {r[0] for r in self._db.execute("SELECT item FROM results WHERE pipeline = ? AND done", (unit,))}

    def count(self, unit: str | None = None) -> int:
        """Number of finished (not failed) journaled rows (of one unit, or all)."""
        if unit is None:
            return int(self._db.execute("SELECT COUNT(*) FROM results WHERE done").fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM results WHERE pipeline = ? AND done", (unit,)).fetchone()[0])

    def count_failed(self, unit: str | None = None) -> int:
        """Number of journaled rows that failed (of one unit, or all)."""
        sql = "SELECT COUNT(*) FROM results WHERE NOT done" + (" AND pipeline = ?" if unit else "")
        return int(self._db.execute(sql, (unit,) if unit else ()).fetchone()[0])

    def rows(self, unit: str, items: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Rows of ``unit``, in ``items`` order when given (missing items are skipped), else by item id."""
        got = {
            item: json.loads(row)
            for item, row in self._db.execute("SELECT item, row FROM results WHERE pipeline = ?", (unit,))
        }
        if items is None:
            return [got[k] for k in sorted(got)]
        return [got[i] for i in items if i in got]

    def _tx(self) -> _Transaction:
        return _Transaction(self._db, self.path)


class _Transaction:
    """One durable transaction; a commit that fails for lack of space is rolled back and raised as one line
    (:class:`~ragrade.storage.WriteFailed`): the journal keeps the batches before it, a rerun asks the rest."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db = db
        self.path = path

    def __enter__(self) -> None:
        with writing(self.path):
            self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        with writing(self.path):
            if exc_type is None:
                try:
                    self.db.execute("COMMIT")
                except sqlite3.Error:
                    self._rollback()
                    raise
                return
            self._rollback()
            failure = write_failure(exc, self.path) if isinstance(exc, Exception) else None
            if failure is not None:
                raise failure from exc

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.OperationalError):  # SQLite ends the transaction itself on a full disk
            self.db.execute("ROLLBACK")


__all__ = ["JOURNAL_FILE", "JOURNAL_FILES", "Journal", "JournalMismatch", "no_error"]
