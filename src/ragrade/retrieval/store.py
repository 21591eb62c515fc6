"""Vector stores for the dense retriever, registered under kind ``vector_store``.

* ``exact`` (default): a persisted float32 matrix searched with one matrix product
  (exact; fast enough to ~100k chunks on a laptop);
* ``faiss`` (HNSW, inner product) and ``usearch`` (HNSW, inner product): approximate
  nearest-neighbour indexes for large collections (extra ``ann``);
* ``chroma``: a ChromaDB persistent collection inside the index dir (extra ``chroma``);
* ``pgvector``: a PostgreSQL table with a ``vector`` column (extra ``pgvector``); exact
  sequential scan by default, ``hnsw=True`` adds an HNSW index. The connection string
  comes from the ``dsn`` option or ``RAGRADE_PG_DSN`` and is never written to disk.

Every store is a handle on a folder: ``build(ids, vectors)`` replaces its content,
``search(queries, k)`` returns ``(chunk position, cosine)`` lists best first, with
ties broken by position so that exact backends agree exactly.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ragrade.deps import require
from ragrade.errors import BackendError, ConfigError, DataError
from ragrade.io import JSONObject, atomic_write_bytes
from ragrade.registry import register

Matrix = npt.NDArray[np.float32]
Results = list[list[tuple[int, float]]]


class VectorStore(Protocol):
    """Stores L2-normalised vectors by chunk position and finds the nearest ones by cosine."""

    name: str

    def build(self, vectors: Matrix) -> None:
        """Replace the store's content with ``vectors`` (row i = chunk position i)."""
        ...

    def exists(self) -> bool:
        """True when the store has been built."""
        ...

    def search(self, queries: Matrix, k: int) -> Results:
        """The ``k`` nearest positions per query as ``(position, cosine)``, best first."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        ...


def topk_exact(matrix: Matrix, queries: Matrix, k: int) -> Results:
    """Exact top-k by inner product, ties broken by lower position."""
    n = matrix.shape[0]
    k = min(k, n)
    if k <= 0 or queries.shape[0] == 0:
        return [[] for _ in range(queries.shape[0])]
    scores = queries @ matrix.T
    out: Results = []
    for row in scores:
        if k < n:
            kth = np.partition(-row, k - 1)[k - 1]
            cand = np.nonzero(-row <= kth)[0]
        else:
            cand = np.arange(n)
        order = cand[np.lexsort((cand, -row[cand]))][:k]
        out.append([(int(i), float(row[i])) for i in order])
    return out


def load_vectors(file: Path, dim: int, rows: int | None = None) -> Matrix:
    """Read a ``vectors.npy`` matrix (never pickled); DataError when damaged or of the wrong shape."""
    hint = "rebuild the index with `ragrade index`"
    try:
        raw = np.load(file, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise DataError(f"{file}: damaged vector file ({str(exc).splitlines()[0][:120]}); {hint}") from exc
    if not isinstance(raw, np.ndarray) or raw.ndim != 2 or raw.dtype.kind not in "fiu":
        shape = getattr(raw, "shape", "?")
        raise DataError(f"{file}: expected a 2-D numeric matrix, found shape {shape} of {raw.dtype}; {hint}")
    if raw.shape[1] != dim:
        raise DataError(f"{file}: vectors have {raw.shape[1]} dimensions, the index manifest says {dim}; {hint}")
    if rows is not None and raw.shape[0] != rows:
        raise DataError(f"{file}: {raw.shape[0]} vectors for {rows} chunks; {hint}")
    matrix = np.asarray(raw, dtype=np.float32)
    if not np.isfinite(matrix).all():
        raise DataError(f"{file}: vectors hold NaN or infinite values; {hint}")
    return matrix


class ExactStore:
    """``vectors.npy`` searched exactly with numpy (memory-mapped on load)."""

    name = "exact"

    def __init__(self, path: str | Path, dim: int, **_: object) -> None:
        self.path = Path(path)
        self.dim = dim
        self._matrix: Matrix | None = None

    @property
    def file(self) -> Path:
        """The matrix file."""
        return self.path / "vectors.npy"

    def build(self, vectors: Matrix) -> None:
        """Write the matrix atomically."""
        import io

        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        atomic_write_bytes(self.file, buf.getvalue())
        self._matrix = None

    def exists(self) -> bool:
        """True when the matrix file exists."""
        return self.file.is_file()

    def matrix(self) -> Matrix:
        """The stored matrix (loaded once)."""
        if self._matrix is None:
            if not self.exists():
                raise DataError(f"{self.file}: vectors missing; rebuild the index with `ragrade index`")
            self._matrix = load_vectors(self.file, self.dim)
        return self._matrix

    def check_rows(self, rows: int) -> None:
        """Load the matrix, checking that it holds one vector per chunk (``rows``)."""
        self._matrix = load_vectors(self.file, self.dim, rows)

    def search(self, queries: Matrix, k: int) -> Results:
        """Exact cosine top-k."""
        return topk_exact(self.matrix(), queries, k)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"backend": self.name}


class FaissStore:
    """FAISS HNSW over inner product (``faiss.index`` in FAISS's own binary format)."""

    name = "faiss"

    def __init__(
        self, path: str | Path, dim: int, m: int = 32, ef_construction: int = 200, ef_search: int = 128, **_: object
    ) -> None:
        self.path = Path(path)
        self.dim, self.m, self.ef_construction, self.ef_search = dim, m, ef_construction, ef_search
        self._index: Any = None

    def _faiss(self) -> Any:
        return require("faiss", package="faiss-cpu", extra="ann", purpose="the faiss vector store")

    def build(self, vectors: Matrix) -> None:
        """Build and save the HNSW graph."""
        faiss = self._faiss()
        index = faiss.IndexHNSWFlat(self.dim, self.m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / ".faiss.index.tmp"
        faiss.write_index(index, str(tmp))
        os.replace(tmp, self.path / "faiss.index")
        self._index = index

    def exists(self) -> bool:
        """True when the index file exists."""
        return (self.path / "faiss.index").is_file()

    def search(self, queries: Matrix, k: int) -> Results:
        """Approximate top-k."""
        if self._index is None:
            self._index = self._faiss().read_index(str(self.path / "faiss.index"))
        self._index.hnsw.efSearch = max(self.ef_search, k)
        k = min(k, int(self._index.ntotal))
        if k <= 0:
            return [[] for _ in range(len(queries))]
        scores, ids = self._index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return [
            [(int(i), float(s)) for i, s in zip(row_i, row_s, strict=True) if i >= 0]
            for row_i, row_s in zip(ids, scores, strict=True)
        ]

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"backend": self.name, "m": self.m, "ef_construction": self.ef_construction, "ef_search": self.ef_search}


class UsearchStore:
    """usearch HNSW over inner product (``usearch.index``)."""

    name = "usearch"

    def __init__(
        self,
        path: str | Path,
        dim: int,
        connectivity: int = 32,
        expansion_add: int = 200,
        expansion_search: int = 128,
        **_: object,
    ) -> None:
        self.path = Path(path)
        self.dim = dim
        self.connectivity, self.expansion_add, self.expansion_search = connectivity, expansion_add, expansion_search
        self._index: Any = None

    def _new(self) -> Any:
        usearch = require("usearch.index", package="usearch", extra="ann", purpose="the usearch vector store")
        return usearch.Index(
            ndim=self.dim,
            metric="ip",
            dtype="f32",
            connectivity=self.connectivity,
            expansion_add=self.expansion_add,
            expansion_search=self.expansion_search,
        )

    def build(self, vectors: Matrix) -> None:
        """Build and save the graph."""
        index = self._new()
        if len(vectors):
            index.add(np.arange(len(vectors), dtype=np.uint64), np.ascontiguousarray(vectors, dtype=np.float32))
        self.path.mkdir(parents=True, exist_ok=True)
        index.save(str(self.path / "usearch.index"))
        self._index = index

    def exists(self) -> bool:
        """True when the index file exists."""
        return (self.path / "usearch.index").is_file()

    def search(self, queries: Matrix, k: int) -> Results:
        """Approximate top-k (cosine = 1 - inner-product distance)."""
        if self._index is None:
            self._index = self._new()
            self._index.load(str(self.path / "usearch.index"))
        k = min(k, len(self._index))
        if k <= 0:
            return [[] for _ in range(len(queries))]
        res = self._index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        keys = np.atleast_2d(res.keys)
        dists = np.atleast_2d(res.distances)
        counts = np.atleast_1d(res.counts) if hasattr(res, "counts") else np.array([keys.shape[1]])
        return [
            [(int(keys[q, j]), float(1.0 - dists[q, j])) for j in range(int(counts[q]))] for q in range(len(queries))
        ]

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"backend": self.name, "connectivity": self.connectivity, "expansion_search": self.expansion_search}


class ChromaStore:
    """A ChromaDB persistent collection (cosine space) in ``<path>/chroma``."""

    name = "chroma"

    def __init__(self, path: str | Path, dim: int, collection: str = "chunks", **_: object) -> None:
        self.path = Path(path)
        self.dim = dim
        self.collection = collection
        self._coll: Any = None

    def _client(self) -> Any:
        chromadb = require("chromadb", extra="chroma", purpose="the chroma vector store")
        from chromadb.config import Settings

        return chromadb.PersistentClient(
            path=str(self.path / "chroma"), settings=Settings(anonymized_telemetry=False, allow_reset=True)
        )

    def build(self, vectors: Matrix) -> None:
        """(Re)create the collection and add every vector."""
        client = self._client()
        if self.collection in [c if isinstance(c, str) else c.name for c in client.list_collections()]:
            client.delete_collection(self.collection)
        coll = client.create_collection(self.collection, metadata={"hnsw:space": "cosine"})
        step = max(1, min(5000, int(client.get_max_batch_size())))
        for start in range(0, len(vectors), step):
            part = vectors[start : start + step]
            coll.add(ids=[str(i) for i in range(start, start + len(part))], embeddings=part.tolist())
        self._coll = coll

    def exists(self) -> bool:
        """True when the chroma folder exists."""
        return (self.path / "chroma").is_dir()

    def search(self, queries: Matrix, k: int) -> Results:
        """Top-k from chroma's HNSW (cosine = 1 - distance)."""
        if self._coll is None:
            self._coll = self._client().get_collection(self.collection)
        k = min(k, int(self._coll.count()))
        if k <= 0:
            return [[] for _ in range(len(queries))]
        res = self._coll.query(query_embeddings=np.asarray(queries).tolist(), n_results=k, include=["distances"])
        return [
            [(int(i), 1.0 - float(d)) for i, d in zip(ids, dists, strict=True)]
            for ids, dists in zip(res["ids"], res["distances"], strict=True)
        ]

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"backend": self.name, "collection": self.collection}


_TABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class PgVectorStore:
    """A PostgreSQL + pgvector table ``(pos, embedding vector(dim))``; exact scan unless ``hnsw``."""

    name = "pgvector"

    def __init__(
        self,
        path: str | Path,
        dim: int,
        dsn: str | None = None,
        table: str = "ragrade_chunks",
        hnsw: bool = False,
        **_: object,
    ) -> None:
        self.path = Path(path)
        self.dim = dim
        self.dsn = dsn or os.environ.get("RAGRADE_PG_DSN")
        if not _TABLE_RE.match(table):
            raise ConfigError(f"pgvector table name '{table}' is not a plain SQL identifier")
        self.table = table
        self.hnsw = hnsw
        self._conn: object = None

    def ready(self) -> None:
        """ConfigError (or the install hint) for what connecting would need: a connection string and psycopg."""
        if not self.dsn:
            raise ConfigError("the pgvector store needs a connection string: pass dsn=... or set RAGRADE_PG_DSN")
        require("psycopg", package="psycopg[binary]", extra="pgvector", purpose="the pgvector store")

    def _connect(self) -> Any:
        if self._conn is None:
            if not self.dsn:
                raise ConfigError("the pgvector store needs a connection string: pass dsn=... or set RAGRADE_PG_DSN")
            psycopg = require("psycopg", package="psycopg[binary]", extra="pgvector", purpose="the pgvector store")
            try:
                self._conn = psycopg.connect(self.dsn, autocommit=True)
            except psycopg.Error as exc:
                raise BackendError(f"cannot connect to PostgreSQL: {exc}") from exc
        return self._conn

    @staticmethod
    def _literal(vec: npt.NDArray[np.float32]) -> str:
        return "[" + ",".join(repr(float(x)) for x in vec) + "]"

    def build(self, vectors: Matrix) -> None:
        """Recreate the table and copy every vector in."""
        conn = self._connect()
        with conn.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
            cur.execute(f"DROP TABLE IF EXISTS {self.table}")
            cur.execute(f"CREATE TABLE {self.table} (pos integer PRIMARY KEY, embedding vector({self.dim}))")
            with cur.copy(f"COPY {self.table} (pos, embedding) FROM STDIN") as copy:
                for i, vec in enumerate(vectors):
                    copy.write_row((i, self._literal(vec)))
            if self.hnsw:
                cur.execute(f"CREATE INDEX ON {self.table} USING hnsw (embedding vector_ip_ops)")
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "pgvector.json").write_text(json.dumps({"table": self.table, "rows": len(vectors)}) + "\n")

    def exists(self) -> bool:
        """True when this index dir has built its table."""
        return (self.path / "pgvector.json").is_file()

    def search(self, queries: Matrix, k: int) -> Results:
        """Top-k by inner product (``<#>`` is its negative), ties by position."""
        conn = self._connect()
        out: Results = []
        with conn.cursor() as cur:
            for q in queries:
                lit = self._literal(q)
                cur.execute(
                    f"SELECT pos, -(embedding <#> %s::vector) FROM {self.table} "
                    f"ORDER BY embedding <#> %s::vector, pos LIMIT %s",
                    (lit, lit, k),
                )
                out.append([(int(p), float(s)) for p, s in cur.fetchall()])
        return out

    def describe(self) -> JSONObject:
        """Arguments for the manifest (the connection string is left out on purpose)."""
        return {"backend": self.name, "table": self.table, "hnsw": self.hnsw}


@register("vector_store", "exact")
def _exact(path: str | Path, dim: int, **kw: object) -> ExactStore:
    return ExactStore(path, dim, **kw)


@register("vector_store", "faiss")
def _faiss(path: str | Path, dim: int, **kw: Any) -> FaissStore:
    return FaissStore(path, dim, **kw)


@register("vector_store", "usearch")
def _usearch(path: str | Path, dim: int, **kw: Any) -> UsearchStore:
    return UsearchStore(path, dim, **kw)


@register("vector_store", "chroma")
def _chroma(path: str | Path, dim: int, **kw: Any) -> ChromaStore:
    return ChromaStore(path, dim, **kw)


@register("vector_store", "pgvector")
def _pgvector(path: str | Path, dim: int, **kw: Any) -> PgVectorStore:
    return PgVectorStore(path, dim, **kw)


def create_store(backend: str, path: str | Path, dim: int, **options: object) -> VectorStore:
    """A store handle of ``backend`` on folder ``path``."""
    from ragrade.registry import create

    store: VectorStore = create("vector_store", backend, path=path, dim=dim, **options)
    return store


def recall_at_k(exact: Results, approx: Results, k: int) -> float:
    """Mean fraction of the exact top-k found in the approximate top-k."""
    if not exact:
        return float("nan")
    total = 0.0
    for e, a in zip(exact, approx, strict=True):
        want = {p for p, _ in e[:k]}
        total += len(want & {p for p, _ in a[:k]}) / max(1, len(want))
    return total / len(exact)


def check_ids(ids: Sequence[str]) -> None:
    """Raise DataError on duplicate chunk ids."""
    seen: set[str] = set()
    for cid in ids:
        if cid in seen:
            raise DataError(f"duplicate chunk id '{cid}'")
        seen.add(cid)


__all__ = [
    "ChromaStore",
    "ExactStore",
    "FaissStore",
    "PgVectorStore",
    "UsearchStore",
    "VectorStore",
    "check_ids",
    "create_store",
    "recall_at_k",
    "topk_exact",
]
