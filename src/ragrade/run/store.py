"""A durable journal of finished (pipeline, item) results: SQLite in WAL mode, fsync'd commits.

Every finished shard is committed in one transaction, so a process killed at
any moment (``kill -9``) leaves the journal holding exactly the shards that
finished; rerunning skips them. The journal also remembers each pipeline's
spec and the run's fingerprint, so a rerun with a different configuration is
refused instead of silently mixing results.

A row whose ``error`` is set (a failed LLM request, retrieval or external call)
is journaled as *failed*: it is kept (the run's files show it, as missing) but it
does not count as done, so a rerun asks exactly the failed items again and
replaces their rows. A journal holding no finished row never blocks a rerun with
other inputs or settings (a command that failed before any work is not a run).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragrade.errors import ConfigError, DataError

JOURNAL_FILE = "journal.sqlite"
_SCHEMA_VERSION = 1
_DONE = "json_extract(row, '$.error') IS NULL"  # a journaled row that did not fail

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pipelines (pipeline TEXT PRIMARY KEY, spec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    pipeline TEXT NOT NULL, item TEXT NOT NULL, row TEXT NOT NULL, PRIMARY KEY (pipeline, item)
);
"""



class JournalMismatch(ConfigError):
    """The run directory's journal holds results made with other inputs or settings (rerun with --overwrite)."""

class Journal:
    """Append-only store of result rows keyed by ``(pipeline, item)``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{self.path}: not a usable run journal ({exc})") from exc
        version = self.get_meta("schema_version")
        if version is None:
            self.set_meta("schema_version", str(_SCHEMA_VERSION))
        elif int(version) != _SCHEMA_VERSION:
            raise DataError(f"{self.path}: journal schema {version}, this ragrade reads {_SCHEMA_VERSION}")

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
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def check_fingerprint(self, fingerprint: str, what: str = "run") -> None:
        """Record ``fingerprint`` on first use; :class:`JournalMismatch` when a rerun's fingerprint differs."""
        old = self.get_meta("fingerprint")
        if old is not None and old != fingerprint and self.count() == 0:
            self._forget()  # nothing finished under the old settings: not a run to protect
            old = None
        if old is None:
            self.set_meta("fingerprint", fingerprint)
        elif old != fingerprint:
            raise JournalMismatch(
                f"{self.path.parent} holds a {what} with other inputs or settings; "
                "use a new --out directory or --overwrite"
            )

    def register_pipelines(self, specs: Mapping[str, Mapping[str, Any]]) -> None:
        """Record each pipeline's spec; ConfigError when an id was recorded with another spec."""
        known = {p: s for p, s in self._db.execute("SELECT pipeline, spec FROM pipelines")}
        new = []
        for pid, spec in specs.items():
            blob = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
            if pid in known and known[pid] != blob and self.count(pid) == 0:
                with self._tx():  # only failed rows under the old spec: start the pipeline afresh
                    self._db.execute("DELETE FROM results WHERE pipeline = ?", (pid,))
                    self._db.execute("UPDATE pipelines SET spec = ? WHERE pipeline = ?", (blob, pid))
                known[pid] = blob
            if pid in known and known[pid] != blob:
                raise JournalMismatch(
                    f"pipeline '{pid}' was run before with other settings; use a new --out directory or --overwrite"
                )
            if pid not in known:
                new.append((pid, blob))
        if new:
            with self._tx():
                self._db.executemany("INSERT INTO pipelines (pipeline, spec) VALUES (?, ?)", new)

    # ---------------------------------------------------------------- results
    def _forget(self) -> None:
        """Drop every row, pipeline and the fingerprint (only called when no row finished)."""
        with self._tx():
            self._db.execute("DELETE FROM results")
            self._db.execute("DELETE FROM pipelines")
            self._db.execute("DELETE FROM meta WHERE key = 'fingerprint'")

    def add(self, pipeline: str, rows: Iterable[Mapping[str, Any]], key: str = "item_id") -> int:
        """Commit ``rows`` of ``pipeline`` in one durable transaction; returns how many were new.

        A row replaces a journaled *failed* row of the same item (a retried failure; it counts as new once it
        succeeds); a finished row is never replaced.
        """
        rows = list(rows)
        payload = [
            (pipeline, str(r[key]), json.dumps(r, sort_keys=True, separators=(",", ":"), default=str)) for r in rows
        ]
        known = {r[0] for r in self._db.execute("SELECT item FROM results WHERE pipeline = ?", (pipeline,))}
        failed = known - self.done_items(pipeline)
        new = sum(1 for r in rows if str(r[key]) not in known or (str(r[key]) in failed and r.get("error") is None))
        with self._tx():
            self._db.executemany(
                "INSERT INTO results (pipeline, item, row) VALUES (?, ?, ?) ON CONFLICT (pipeline, item) "
                "DO UPDATE SET row = excluded.row WHERE json_extract(results.row, '$.error') IS NOT NULL",
                payload,
            )
        return new

    def done_items(self, pipeline: str) -> set[str]:
        """Item ids journaled as finished for ``pipeline`` (failed items are not done: a rerun asks them again)."""
        sql = f"SELECT item FROM results WHERE pipeline = ? AND {_DONE}"
        return {r[0] for r in self._db.execute(sql, (pipeline,))}

    def count(self, pipeline: str | None = None) -> int:
        """Number of finished (not failed) journaled rows (of one pipeline, or all)."""
        if pipeline is None:
            return int(self._db.execute(f"SELECT COUNT(*) FROM results WHERE {_DONE}").fetchone()[0])
        sql = f"SELECT COUNT(*) FROM results WHERE pipeline = ? AND {_DONE}"
        return int(self._db.execute(sql, (pipeline,)).fetchone()[0])

    def count_failed(self, pipeline: str | None = None) -> int:
        """Number of journaled rows that failed (of one pipeline, or all)."""
        sql = f"SELECT COUNT(*) FROM results WHERE NOT ({_DONE})" + (" AND pipeline = ?" if pipeline else "")
        return int(self._db.execute(sql, (pipeline,) if pipeline else ()).fetchone()[0])

    def rows(self, pipeline: str, items: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Rows of ``pipeline``, in ``items`` order when given (missing items are skipped)."""
        got = {
            item: json.loads(row)
            for item, row in self._db.execute("SELECT item, row FROM results WHERE pipeline = ?", (pipeline,))
        }
        if items is None:
            return [got[k] for k in sorted(got)]
        return [got[i] for i in items if i in got]

    def _tx(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")


__all__ = ["JOURNAL_FILE", "Journal", "JournalMismatch"]
