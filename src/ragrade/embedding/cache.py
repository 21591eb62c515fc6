"""A persistent embedding cache keyed by (embedder cache key, sha256 of the text).

Vectors are stored as raw little-endian float32 bytes in one SQLite file,
``$RAGRADE_CACHE_DIR/embeddings.sqlite`` (WAL mode, safe for concurrent
processes). Re-indexing an unchanged corpus therefore computes no embedding;
a changed corpus computes only the chunks whose text changed.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragrade.embedding.onnx_embed import cache_root
from ragrade.errors import DataError

_SCHEMA = """CREATE TABLE IF NOT EXISTS embeddings (
    embedder TEXT NOT NULL, sha TEXT NOT NULL, dim INTEGER NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY (embedder, sha))"""


def text_sha(text: str) -> str:
    """sha256 hex digest of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class EmbedStats:
    """How many vectors were computed and how many came from the cache."""

    embedded: int = 0
    cached: int = 0


class EmbeddingCache:
    """Get-or-compute embeddings, persisted in SQLite."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else cache_root() / "embeddings.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{self.path}: embedding cache is unreadable ({exc}); delete it to rebuild") from exc

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def lookup(self, key: str, shas: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """Cached vectors for the given text hashes (missing ones are absent)."""
        found: dict[str, npt.NDArray[np.float32]] = {}
        unique = list(dict.fromkeys(shas))
        with self._lock:
            for start in range(0, len(unique), 500):
                part = unique[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT sha, dim, vec FROM embeddings WHERE embedder = ? AND sha IN ({marks})", [key, *part]
                ).fetchall()
                for sha, dim, blob in rows:
                    vec = np.frombuffer(blob, dtype="<f4")
                    if vec.size == dim:
                        found[sha] = vec.astype(np.float32)
        return found

    def store(self, key: str, shas: Sequence[str], vecs: npt.NDArray[np.float32]) -> None:
        """Persist vectors for text hashes."""
        rows = [
            (key, sha, int(v.size), np.asarray(v, dtype="<f4").tobytes()) for sha, v in zip(shas, vecs, strict=True)
        ]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)", rows)
            self._db.commit()

    def embed(
        self,
        key: str,
        texts: Sequence[str],
        compute: Callable[[Sequence[str]], npt.NDArray[np.float32]],
        *,
        batch: int = 256,
        progress: Callable[[int], None] | None = None,
        order: Callable[[str], int] | None = None,
    ) -> tuple[npt.NDArray[np.float32], EmbedStats]:
        """Vectors for ``texts``: cached ones read, the rest computed with ``compute`` and stored.

        ``order``: a sort key for the texts to compute (e.g. their length), so that each call of ``compute`` gets
        texts of similar length; only for a ``compute`` whose vectors do not depend on the batch (``embed_fixed``).
        """
        shas = [text_sha(t) for t in texts]
        have = self.lookup(key, shas)
        stats = EmbedStats()
        todo: dict[str, str] = {}
        for sha, text in zip(shas, texts, strict=True):
            if sha not in have and sha not in todo:
                todo[sha] = text
        stats.cached = sum(1 for s in shas if s in have)
        if progress is not None and stats.cached:
            progress(stats.cached)
        pending = list(todo.items())
        if order is not None:
            pending.sort(key=lambda p: order(p[1]))
        for start in range(0, len(pending), batch):
            part = pending[start : start + batch]
            vecs = compute([t for _, t in part])
            self.store(key, [s for s, _ in part], vecs)
            for (sha, _), vec in zip(part, vecs, strict=True):
                have[sha] = vec
            if progress is not None:
                progress(sum(1 for s in shas if s in {p for p, _ in part}))
        stats.embedded = len(shas) - stats.cached
        if not shas:
            return np.zeros((0, 0), dtype=np.float32), stats
        return np.stack([have[s] for s in shas]).astype(np.float32), stats


__all__ = ["EmbedStats", "EmbeddingCache", "text_sha"]
