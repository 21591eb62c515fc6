"""Build and load a retrieval index directory.

Layout (``manifest.json`` has ``format: ragrade-index`` and ``version``)::

    INDEX_DIR/
      manifest.json    chunker params, embedder (name, space, dim), store, BM25 config, counts
      chunks.jsonl     the chunks, in index order (a ``chunks`` JSONL file)
      bm25/            bm25s arrays (.npy) + vocabulary and config (.json)
      dense/           vectors.npy (always; the exact store) + any ANN/chroma files

Embeddings come from a persistent cache keyed by (embedder numerics, sha256 of
the chunk text), ``$RAGRADE_CACHE_DIR/embeddings.sqlite``: re-indexing an
unchanged corpus embeds nothing; an edited document re-embeds only its chunks.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragrade.corpus.types import CHUNKS_KIND, CHUNKS_VERSION, Chunk, Document
from ragrade.errors import ConfigError, DataError
from ragrade.io import JSONObject, read_json, read_jsonl, write_json, write_jsonl
from ragrade.retrieval.bm25 import BM25Config, BM25Index
from ragrade.retrieval.integrity import component_files, verify_components
from ragrade.schemas import check_index_manifest
from ragrade.storage import no_space

if TYPE_CHECKING:
    import numpy.typing as npt

    from ragrade.embedding.base import Embedder
    from ragrade.embedding.cache import EmbedStats
    from ragrade.retrieval.base import Retriever
    from ragrade.retrieval.store import VectorStore

INDEX_FORMAT = "ragrade-index"
INDEX_VERSION = 1


class IndexConfig(BaseModel):
    """What ``build_index`` builds (merged defaults < config file < CLI flags)."""

    model_config = ConfigDict(extra="forbid")

    embedder: str = "minilm"
    dense: bool = True
    store: str = "exact"
    store_options: dict[str, Any] = Field(
        default_factory=dict, description="Keyword options of the vector store backend (its own settings)."
    )
    bm25: BM25Config = Field(default_factory=BM25Config)
    strategy: str = "recursive"
    size: int = 200
    overlap: int = 20
    chunker_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options of the chunking strategy (tokenizer, min_size; semantic: embedder, threshold, buffer).",
    )
    headings: bool = False  # index each chunk with its heading path (page > section) on a first line
    device: str | None = None  # where a local embedding model runs: auto (None), cpu, cuda[:N], mps


@dataclass
class IndexStats:
    """What a build did (``--json`` output of ``ragrade index``)."""

    chunks: int
    documents: int
    embedded: int
    cached: int
    embedder: str | None
    store: str | None
    seconds: float
    out: str
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        """A JSON-ready dict."""
        return asdict(self)


Progress = Callable[[str, int, int], None]


class EmbedderInfo(TypedDict):
    """The ``embedder`` entry of an index manifest: which vectors the index holds."""

    name: str
    space: str
    dim: int
    cache_key: str
    describe: NotRequired[JSONObject]


class Counts(TypedDict):
    """The ``counts`` entry of an index manifest."""

    chunks: int
    documents: int


class IndexManifest(TypedDict):
    """``manifest.json`` of an index directory (checked by :func:`ragrade.schemas.check_index_manifest`)."""

    format: str
    version: int
    created: str
    counts: Counts
    chunker: JSONObject
    bm25: JSONObject
    indexed_text: str
    embedder: EmbedderInfo | None
    store: JSONObject | None
    files: dict[str, int]  # each component file's size (retrieval/integrity.py); absent in older indexes


def _chunk_docs(
    docs: Sequence[Document], cfg: IndexConfig, progress: Progress | None = None
) -> tuple[list[Chunk], JSONObject]:
    from ragrade.corpus.chunk import chunk_documents, create_chunker

    chunker = create_chunker(cfg.strategy, size=cfg.size, overlap=cfg.overlap, **cfg.chunker_options)
    desc = chunker.describe() if hasattr(chunker, "describe") else {"strategy": cfg.strategy}
    done = [0]

    def tick(n: int) -> None:
        done[0] += n
        if progress is not None:
            progress("chunk", done[0], len(docs))

    return chunk_documents(docs, chunker, progress=tick if progress is not None else None), dict(desc)


def read_input(path: str | Path) -> tuple[list[Chunk] | list[Document], JSONObject]:
    """Documents or chunks from a JSONL file, detected by its header kind (or by record keys)."""
    path = Path(path)
    if path.is_dir():
        commands = "`ragrade corpus {} --out docs.jsonl`, then `ragrade index docs.jsonl --out INDEX`".format(path)  # noqa: UP032 (one string: a command line to copy, not a flag)
        raise DataError(f"{path} is a folder; index takes a documents or chunks JSONL file: make one with {commands}")
    if not path.is_file():
        raise DataError(f"{path}: input file not found")
    header, records = read_jsonl(path)
    kind = header.kind if header is not None else ("chunks" if records and "doc_id" in records[0] else "documents")
    if kind == CHUNKS_KIND:
        from ragrade.corpus.files import read_chunk_file

        cf = read_chunk_file(path)
        return cf.chunks, cf.chunker
    if kind == "documents":
        from ragrade.corpus.files import read_documents

        return read_documents(path), {}
    raise DataError(f"{path}: expected a documents or chunks file, found a '{kind}' file")


def _resolve_chunks(
    chunks_or_docs: Sequence[Chunk] | Sequence[Document] | str | Path,
    cfg: IndexConfig,
    progress: Progress | None = None,
) -> tuple[list[Chunk], int, JSONObject]:
    """The chunks to index, the document count and the chunker description (chunking documents if given)."""
    chunker_desc: JSONObject = {}
    items: Sequence[object]
    if isinstance(chunks_or_docs, (str, Path)):
        items, chunker_desc = read_input(chunks_or_docs)
    else:
        items = chunks_or_docs
    if not items:
        raise DataError("nothing to index: the input has no documents or chunks")
    if all(isinstance(x, Document) for x in items):
        n_docs = len(items)
        chunks, chunker_desc = _chunk_docs([x for x in items if isinstance(x, Document)], cfg, progress)
    elif all(isinstance(x, Chunk) for x in items):
        chunks = [x for x in items if isinstance(x, Chunk)]
        n_docs = len({c.doc_id for c in chunks})
        if not chunker_desc and chunks[0].strategy:
            chunker_desc = {"strategy": chunks[0].strategy, **chunks[0].params}
    else:
        raise ConfigError("build_index takes a sequence of Chunk or of Document, not a mix")
    _check_chunks(chunks)
    return chunks, n_docs, chunker_desc


def _check_chunks(chunks: list[Chunk]) -> None:
    """DataError when there are no chunks, duplicate ids, or chunks without text."""
    if not chunks:
        raise DataError("nothing to index: chunking produced no chunks")
    from ragrade.retrieval.store import check_ids

    check_ids([c.id for c in chunks])
    empty = [c.id for c in chunks if not c.text.strip()]
    if empty:
        raise DataError(f"{len(empty)} chunk(s) have no text, e.g. '{empty[0]}'")


def _start_index_dir(out: Path, chunks: list[Chunk], chunker_desc: Mapping[str, object]) -> None:
    """Create ``out``, invalidate any old manifest and write ``chunks.jsonl``."""
    out.mkdir(parents=True, exist_ok=True)
    old = out / "manifest.json"
    if old.exists():
        old.unlink()  # a half-rebuilt dir must not look valid
    write_jsonl(
        out / "chunks.jsonl",
        (c.to_record() for c in chunks),
        kind=CHUNKS_KIND,
        version=CHUNKS_VERSION,
        meta={"chunker": chunker_desc} if chunker_desc else None,
    )


def indexed_text(chunk: Chunk, *, headings: bool) -> str:
    """What BM25 and the embedder see for ``chunk``: its text, after its heading path when ``headings``."""
    if not headings:
        return chunk.text
    from ragrade.retrieval.passages import heading_line

    head = heading_line(chunk)
    return f"{head}\n{chunk.text}" if head else chunk.text


def _build_bm25(texts: list[str], out: Path, cfg: IndexConfig, progress: Progress | None) -> None:
    """Build the BM25 index over ``texts`` and save it in ``out/bm25`` (replacing an old one)."""
    if progress:
        progress("bm25", 0, len(texts))
    bm25 = BM25Index.build(texts, cfg.bm25)
    if (out / "bm25").exists():
        shutil.rmtree(out / "bm25")
    bm25.save(out / "bm25")
    if progress:
        progress("bm25", len(texts), len(texts))


def build_index(
    chunks_or_docs: Sequence[Chunk] | Sequence[Document] | str | Path,
    out_dir: str | Path,
    cfg: IndexConfig | None = None,
    *,
    progress: Progress | None = None,
) -> IndexStats:
    """Build (or rebuild) the index in ``out_dir`` from chunks, documents, or a JSONL file of either."""
    cfg = cfg or IndexConfig()
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    from ragrade.retrieval.bm25 import check_bm25_config

    check_bm25_config(cfg.bm25)
    _check_dense(cfg)
    chunks, n_docs, chunker_desc = _resolve_chunks(chunks_or_docs, cfg, progress)
    timings["chunk"] = time.perf_counter() - t0

    out = Path(out_dir)
    fresh = not out.exists()
    try:
        return _build_into(out, chunks, n_docs, chunker_desc, cfg, progress, timings, t0)
    except BaseException as exc:
        if fresh:  # a failed or interrupted build leaves no half index behind (a rebuild keeps no manifest)
            shutil.rmtree(out, ignore_errors=True)
        full = no_space(exc, out)  # a full disk met by the BM25 or vector files, which name no file
        if full is not None:
            raise full from exc
        raise


def _check_dense(cfg: IndexConfig) -> None:
    """The embedder spec and the vector store's settings, checked before any file is written or text embedded
    (a store may also check what it needs through a ``ready()`` method: pgvector its connection string)."""
    if not cfg.dense:
        return
    from ragrade.embedding.embed import plan_embedder
    from ragrade.retrieval.store import create_store

    plan_embedder(cfg.embedder, cfg.device)  # an unknown embedder or a missing device: before any write
    if cfg.store != "exact":
        with tempfile.TemporaryDirectory(prefix="ragrade-store-check-") as tmp:
            store = create_store(cfg.store, Path(tmp) / "dense", 8, **cfg.store_options)
            ready = getattr(store, "ready", None)
            if callable(ready):
                ready()


def _build_into(
    out: Path,
    chunks: list[Chunk],
    n_docs: int,
    chunker_desc: JSONObject,
    cfg: IndexConfig,
    progress: Progress | None,
    timings: dict[str, float],
    t0: float,
) -> IndexStats:
    """:func:`build_index`'s files: chunks, BM25, the dense store, then the manifest (last: a folder without
    one is not an index)."""
    _start_index_dir(out, chunks, chunker_desc)

    t = time.perf_counter()
    texts = [indexed_text(c, headings=cfg.headings) for c in chunks]
    _build_bm25(texts, out, cfg, progress)
    timings["bm25"] = time.perf_counter() - t

    embedded = cached = 0
    emb_info: EmbedderInfo | None = None
    store_desc: JSONObject | None = None
    if cfg.dense:
        embedded, cached, emb_info, store_desc = _build_dense(texts, out, cfg, progress, timings)
    elif (out / "dense").exists():
        shutil.rmtree(out / "dense")

    manifest: IndexManifest = {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "created": _now(),
        "counts": {"chunks": len(chunks), "documents": n_docs},
        "chunker": chunker_desc,
        "bm25": cfg.bm25.model_dump(),
        "indexed_text": "heading path + chunk text" if cfg.headings else "chunk text",
        "embedder": emb_info,
        "store": store_desc,
        "files": component_files(out),
    }
    write_json(out / "manifest.json", manifest)
    return IndexStats(
        chunks=len(chunks),
        documents=n_docs,
        embedded=embedded,
        cached=cached,
        embedder=emb_info["name"] if emb_info else None,
        store=str(store_desc["backend"]) if store_desc else None,
        seconds=round(time.perf_counter() - t0, 3),
        out=str(out),
        timings=timings,
    )


def _embed_cached(
    texts: list[str], spec: str, progress: Progress | None, device: str | None = None
) -> tuple[npt.NDArray[np.float32], EmbedStats, EmbedderInfo]:
    """Vectors from the cache, loading the embedder only when some text is not cached.

    A local model embeds with ``embed_fixed`` in :data:`~ragrade.embedding.batching.INDEX_SHAPE` batches on every
    core: a chunk's vector depends on its text only (not on the chunks batched with it, the order of the corpus
    or the machine's thread count), under its own cache key. An endpoint (``openai:``) embeds as it does.
    """
    from ragrade.embedding.batching import ChunkEmbedding
    from ragrade.embedding.cache import EmbeddingCache, EmbedStats, text_sha
    from ragrade.embedding.embed import cached_embedder, plan_chunk_key, plan_embedder

    name, space, _ = plan_embedder(spec, device)
    planned = plan_chunk_key(spec, device)
    cache = EmbeddingCache()
    try:
        shas = [text_sha(t) for t in texts]
        found = cache.lookup(planned, shas)
        if len(found) == len(set(shas)):
            if progress:
                progress("embed", len(texts), len(texts))
            vecs = np.stack([found[s] for s in shas]).astype(np.float32)
            info: EmbedderInfo = {"name": name, "space": space, "dim": int(vecs.shape[1]), "cache_key": planned}
            return vecs, EmbedStats(embedded=0, cached=len(texts)), info
        embedder = cached_embedder(spec, device)
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            if progress:
                progress("embed", done[0], len(texts))

        rule = ChunkEmbedding.of(embedder, getattr(embedder, "cache_key", embedder.name))
        batch = 128 if rule.order is None else 256  # sorted fixed-shape calls waste less padding when larger
        vecs, st = cache.embed(rule.key, texts, rule.compute, batch=batch, progress=tick, order=rule.order)
    finally:
        cache.close()
    info = {
        "name": embedder.name,
        "space": getattr(embedder, "space", embedder.name),
        "dim": int(vecs.shape[1]),
        "cache_key": rule.key,
        "describe": embedder.describe(),
    }
    return vecs, st, info


def _build_dense(
    texts: list[str], out: Path, cfg: IndexConfig, progress: Progress | None, timings: dict[str, float]
) -> tuple[int, int, EmbedderInfo, JSONObject]:
    from ragrade.retrieval.store import create_store

    t = time.perf_counter()
    vecs, st, info = _embed_cached(texts, cfg.embedder, progress, cfg.device)
    timings["embed"] = time.perf_counter() - t
    t = time.perf_counter()
    dense_dir = out / "dense"
    if dense_dir.exists():
        shutil.rmtree(dense_dir)
    exact = create_store("exact", dense_dir, int(vecs.shape[1]))
    exact.build(vecs)
    store = (
        exact if cfg.store == "exact" else create_store(cfg.store, dense_dir, int(vecs.shape[1]), **cfg.store_options)
    )
    if store is not exact:
        store.build(vecs)
    timings["store"] = time.perf_counter() - t
    return st.embedded, st.cached, info, store.describe()


def _now() -> str:
    from ragrade.io import now_iso

    return now_iso()


_SPEC_RE = re.compile(r"^\s*([a-z][a-z0-9_-]*)\s*(?:\((.*)\))?\s*$")


class Index:
    """A loaded index directory: chunks, manifest, and retrievers over them."""

    def __init__(self, path: Path, manifest: IndexManifest, chunks: list[Chunk]) -> None:
        self.path = path
        self.manifest = manifest
        self.chunks = chunks
        self._pos = {c.id: i for i, c in enumerate(chunks)}
        self._bm25: BM25Index | None = None
        self._stores: dict[str, VectorStore] = {}
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self.chunks)

    def chunk(self, chunk_id: str) -> Chunk:
        """The chunk with id ``chunk_id`` (DataError when unknown)."""
        return self.chunks[self.position(chunk_id)]

    def position(self, chunk_id: str) -> int:
        """The index position of ``chunk_id``."""
        try:
            return self._pos[chunk_id]
        except KeyError:
            raise DataError(f"chunk id '{chunk_id}' is not in the index {self.path}") from None

    def bm25(self) -> BM25Index:
        """The BM25 index (loaded once)."""
        with self._lock:
            if self._bm25 is None:
                self._bm25 = BM25Index.load(self.path / "bm25")
            return self._bm25

    def _dense_info(self) -> EmbedderInfo:
        info = self.manifest.get("embedder")
        if not info:
            raise ConfigError(f"index {self.path} was built without dense vectors (rebuild it with $dense on)")
        return info

    def embedder(self, spec: str | None = None) -> Embedder:
        """The embedder for queries: the one the index was built with, or ``spec`` if it is compatible."""
        from ragrade.embedding.embed import cached_embedder

        info = self._dense_info()
        emb: Embedder = cached_embedder(spec or info["name"])
        space = getattr(emb, "space", emb.name)
        if space != info.get("space") or int(emb.dim) != int(info["dim"]):
            raise ConfigError(
                f"index {self.path} was built with embedder '{info['name']}' "
                f"({info.get('space')}, dim {info['dim']}); '{emb.name}' ({space}, dim {emb.dim}) "
                "gives incompatible vectors; rebuild the index or use its embedder"
            )
        return emb

    def store(self, backend: str | None = None, **options: object) -> VectorStore:
        """The vector store (the index's own, or ``backend`` built from ``dense/vectors.npy`` on first use)."""
        from ragrade.retrieval.store import create_store

        info = self._dense_info()
        built = dict(self.manifest.get("store") or {"backend": "exact"})
        name = backend or str(built.get("backend", "exact"))
        with self._lock:
            if name not in self._stores:
                opts: dict[str, object] = (
                    {k: v for k, v in built.items() if k != "backend"} if name == built.get("backend") else {}
                )
                opts.update(options)
                store = create_store(name, self.path / "dense", int(info["dim"]), **opts)
                exact = store if name == "exact" else create_store("exact", self.path / "dense", int(info["dim"]))
                if exact.exists():
                    exact.check_rows(len(self.chunks))  # type: ignore[attr-defined]
                if not store.exists():
                    store.build(exact.matrix())  # type: ignore[attr-defined]
                self._stores[name] = store
            return self._stores[name]

    def retriever(self, spec: str, **kw: object) -> Retriever:
        """A retriever by spec: ``bm25``, ``dense``, ``hybrid``, ``rerank(<base>)``, ``closed``, ``oracle``."""
        from ragrade.registry import create

        m = _SPEC_RE.match(spec or "")
        if not m:
            raise ConfigError(f"invalid retriever spec '{spec}'; expected e.g. bm25, hybrid or rerank(dense)")
        name, arg = m.group(1), m.group(2)
        if arg is not None:
            if name != "rerank":
                raise ConfigError(f"retriever '{name}' takes no argument in parentheses")
            kw = {**kw, "base": arg.strip() or "hybrid"}
        retriever: Retriever = create("retriever", name, index=self, **kw)
        return retriever

    def describe(self) -> dict[str, object]:
        """Where the index is and how it was built (for run manifests)."""
        embedder, store = self.manifest.get("embedder"), self.manifest.get("store")
        return {
            "path": str(self.path),
            "counts": self.manifest.get("counts"),
            "chunker": self.manifest.get("chunker"),
            "embedder": embedder.get("name") if embedder else None,
            "store": store.get("backend") if store else None,
        }


def load_index(path: str | Path) -> Index:
    """Load the index in ``path`` (DataError when missing, unfinished or of another version)."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: index directory not found")
    mpath = path / "manifest.json"
    if not mpath.is_file():
        raise DataError(f"{path}: not a ragrade index (no manifest.json; build it with `ragrade index`)")
    manifest = read_json(mpath)
    check_index_manifest(manifest, str(mpath), INDEX_FORMAT)
    if int(manifest.get("version", 0)) > INDEX_VERSION:
        raise DataError(
            f"{mpath}: index version {manifest.get('version')} is newer than this ragrade "
            f"(supports {INDEX_VERSION}); upgrade ragrade"
        )
    verify_components(path, manifest)  # a deleted or cut-off BM25 or vector file, found before any search
    from ragrade.corpus.files import read_chunks

    chunks = read_chunks(path / "chunks.jsonl")
    expected = int(manifest.get("counts", {}).get("chunks", len(chunks)))
    if expected != len(chunks):
        raise DataError(f"{path}: manifest lists {expected} chunks but chunks.jsonl has {len(chunks)}")
    return Index(path, manifest, chunks)


def embed_queries(index: Index, queries: Sequence[str]) -> npt.NDArray[np.float32]:
    """Query vectors with the index's embedder (for callers that search the store themselves)."""
    return np.asarray(index.embedder().embed(list(queries)), dtype=np.float32)


__all__ = [
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "Index",
    "IndexConfig",
    "IndexStats",
    "build_index",
    "load_index",
    "read_input",
]
