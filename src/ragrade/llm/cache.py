"""The LLM response cache: one SQLite file in WAL mode, keyed by everything that changes an answer.

The key is a SHA-256 of the canonical JSON of provider, model, base URL, the call
kind (generate / loglikelihood) and every request parameter (messages or prompt,
temperature, max tokens, stop, seed, JSON schema, ...). Values are JSON. The file
lives in ``$RAGRADE_CACHE_DIR/llm-cache.sqlite`` (default ``~/.cache/ragrade``).

Concurrency and crash safety come from SQLite itself: WAL journal, a busy
timeout for concurrent writers (threads or processes), one short transaction
per write, so a ``kill -9`` loses at most the writes in flight, never the file.
API keys are never part of a key or a value.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from ragrade.errors import BackendError
from ragrade.io import JSONObject

CACHE_FILE = "llm-cache.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_model ON responses (provider, model);
"""


def cache_dir() -> Path:
    """The ragrade cache directory: ``$RAGRADE_CACHE_DIR`` or ``~/.cache/ragrade`` (:func:`ragrade.storage.cache_root`:
    with ``HOME`` unset, the folder is said on standard error)."""
    from ragrade.storage import cache_root

    return cache_root()


def default_cache_path(directory: str | Path | None = None) -> Path:
    """The cache file inside ``directory`` (default :func:`cache_dir`)."""
    return Path(directory).expanduser() / CACHE_FILE if directory is not None else cache_dir() / CACHE_FILE


def make_key(parts: Mapping[str, object]) -> str:
    """A stable SHA-256 hex key of ``parts`` (canonical JSON: sorted keys, no whitespace)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """A thread-safe, multi-process-safe key/value store of LLM responses (SQLite, WAL)."""

    def __init__(self, path: str | Path | None = None, *, busy_timeout_s: float = 60.0) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[sqlite3.Connection] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._conn()
            with conn:
                conn.executescript(_SCHEMA)
                conn.execute("INSERT OR IGNORE INTO meta (k, v) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except (sqlite3.Error, OSError) as exc:
            raise BackendError(f"cannot open the LLM cache {self.path}: {exc}") from exc

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def get_many(self, keys: Iterable[str]) -> JSONObject:
        """Values of the ``keys`` present in the cache (missing keys are absent from the result)."""
        wanted = list(dict.fromkeys(keys))
        out: JSONObject = {}
        conn = self._conn()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(f"SELECT key, value FROM responses WHERE key IN ({marks})", chunk).fetchall()
            for key, value in rows:
                try:
                    out[key] = json.loads(value)
                except json.JSONDecodeError:  # a damaged row is treated as a miss
                    continue
        return out

    def get(self, key: str) -> object | None:
        """The value of ``key`` or None."""
        return self.get_many([key]).get(key)

    def put(self, key: str, value: object, *, provider: str, model: str, kind: str) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` in its own short transaction."""
        self.put_many([(key, value)], provider=provider, model=model, kind=kind)

    def put_many(self, items: Iterable[tuple[str, object]], *, provider: str, model: str, kind: str) -> None:
        """Store several values in one transaction."""
        rows = [(k, provider, model, kind, json.dumps(v, ensure_ascii=False), time.time()) for k, v in items]
        if not rows:
            return
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT OR REPLACE INTO responses (key, provider, model, kind, value, created) VALUES (?,?,?,?,?,?)",
                rows,
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def info(self) -> JSONObject:
        """Path, entry count, file size and counts per provider/model and kind."""
        conn = self._conn()
        total = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        by_model = [
            {"provider": p, "model": m, "kind": k, "entries": n}
            for p, m, k, n in conn.execute(
                "SELECT provider, model, kind, COUNT(*) FROM responses GROUP BY provider, model, kind ORDER BY 1, 2, 3"
            )
        ]
        size = sum(f.stat().st_size for f in self.path.parent.glob(self.path.name + "*") if f.is_file())
        return {
            "path": str(self.path),
            "entries": int(total),
            "bytes": int(size),
            "by_model": by_model,
            "schema_version": SCHEMA_VERSION,
        }

    def clear(self, *, provider: str | None = None, model: str | None = None) -> int:
        """Delete entries (all, or those of ``provider`` / ``model``); returns how many were deleted."""
        where, args = [], []
        if provider is not None:
            where.append("provider = ?")
            args.append(provider)
        if model is not None:
            where.append("model = ?")
            args.append(model)
        sql = "DELETE FROM responses" + (" WHERE " + " AND ".join(where) if where else "")
        conn = self._conn()
        cur = conn.execute(sql, args)
        deleted = int(cur.rowcount)
        if not where:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
        return deleted

    def close(self) -> None:
        """Close every connection this object opened."""
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._conns.clear()
        self._local = threading.local()


__all__ = ["CACHE_FILE", "ResponseCache", "cache_dir", "default_cache_path", "make_key"]
