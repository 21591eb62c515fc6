"""A fast CPU path for BERT-style sentence-transformers models: ONNX export run with onnxruntime.

The model (transformer + mean pooling + L2 normalisation) is exported once with
``torch.onnx.export`` (TorchScript exporter, ``dynamo=False``, so no
``onnxscript`` is needed), optimised with onnxruntime's transformer fusions
where possible, and cached under ``$RAGRADE_CACHE_DIR/onnx/<model-hash>/``.
Texts are tokenised with ``tokenizers`` (the model's own ``tokenizer.json``),
sorted by length and batched so that padding is minimal.

Results match sentence-transformers' fp32 ``encode`` to a cosine of ~0.9999;
``quantize="int8"`` (dynamic int8 weights) is faster still but moves cosines
by ~0.02, so it is only used when asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragrade.deps import require
from ragrade.errors import BackendError, ConfigError
from ragrade.io import JSONObject

if TYPE_CHECKING:
    from ragrade.embedding.batching import FixedShape

log = logging.getLogger(__name__)

EXPORT_VERSION = 1
_HASHED_FILES = (
    "config.json",
    "model.safetensors",
    "pytorch_model.bin",
    "tokenizer.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)


def cache_root() -> Path:
    """``$RAGRADE_CACHE_DIR`` (default ``~/.cache/ragrade``; see :func:`ragrade.storage.cache_root`)."""
    from ragrade.storage import cache_root as root

    return root()


def model_hash(model_dir: str | Path) -> str:
    """A sha256 over the files that define a sentence-transformers model (first 16 hex digits)."""
    model_dir = Path(model_dir)
    h = hashlib.sha256(f"export-v{EXPORT_VERSION}".encode())
    found = False
    for name in _HASHED_FILES:
        path = model_dir / name
        if not path.is_file():
            continue
        found = True
        h.update(name.encode())
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    if not found:
        raise ConfigError(f"{model_dir}: not a sentence-transformers model folder (no config.json or weights)")
    return h.hexdigest()[:16]


def _pooling_mode(model_dir: Path) -> str:
    cfg_path = model_dir / "1_Pooling" / "config.json"
    if not cfg_path.is_file():
        return "mean"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    if cfg.get("pooling_mode_cls_token"):
        return "cls"
    if cfg.get("pooling_mode_mean_tokens", True):
        return "mean"
    raise ConfigError(f"{model_dir}: only mean or CLS pooling is supported by the ONNX path")


def max_seq_length(model_dir: Path) -> int:
    """The model's ``max_seq_length`` from ``sentence_bert_config.json`` (default 256)."""
    cfg_path = model_dir / "sentence_bert_config.json"
    if cfg_path.is_file():
        return int(json.loads(cfg_path.read_text(encoding="utf-8")).get("max_seq_length", 256))
    return 256


@contextlib.contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    """No weight-loading bar and no tracer/exporter warnings: the export is a one-time internal step a user
    cannot act on (announced as a progress phase by the caller)."""
    hf_logging = transformers.utils.logging
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _export(model_dir: Path, out_path: Path, *, fuse: bool = True) -> None:
    """Export transformer + pooling + normalisation to ``out_path`` (atomically)."""
    torch = require("torch", purpose="exporting the embedding model to ONNX")
    transformers = require("transformers", purpose="exporting the embedding model to ONNX")
    pooling = _pooling_mode(model_dir)
    with _quiet(transformers):
        base = transformers.AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
    base.eval()

    class Wrapped(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.base = base

        def forward(self, input_ids: object, attention_mask: Any, token_type_ids: object) -> object:
            hidden = self.base(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            if pooling == "cls":
                pooled = hidden[:, 0]
            else:
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    ids = torch.ones((2, 8), dtype=torch.long)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".export.", suffix=".onnx", dir=out_path.parent)
    os.close(fd)
    try:
        with torch.no_grad(), _quiet(transformers):
            torch.onnx.export(
                Wrapped(),
                (ids, ids, torch.zeros_like(ids)),
                tmp,
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["embedding"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "seq"},
                    "attention_mask": {0: "batch", 1: "seq"},
                    "token_type_ids": {0: "batch", 1: "seq"},
                    "embedding": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        if fuse:
            _optimise(tmp, base.config)
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _optimise(path: str, config: Any) -> None:
    """Fuse attention/LayerNorm/GELU with onnxruntime's transformer optimiser (in place; best effort)."""
    try:
        from onnxruntime.transformers import optimizer

        opt = optimizer.optimize_model(
            path,
            model_type="bert",
            num_heads=int(config.num_attention_heads),
            hidden_size=int(config.hidden_size),
            opt_level=1,
        )
        opt.save_model_to_file(path)
    except Exception as exc:  # the plain export still works, only slower
        log.warning("onnxruntime transformer fusion skipped: %s", exc)


def _quantize(src: Path, dst: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fd, tmp = tempfile.mkstemp(prefix=".quant.", suffix=".onnx", dir=dst.parent)
    os.close(fd)
    try:
        quantize_dynamic(str(src), tmp, weight_type=QuantType.QInt8)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def exported_model(model_dir: str | Path, quantize: str | None = None) -> Path:
    """Path of the cached ONNX export of ``model_dir`` (exported on first use)."""
    model_dir = Path(model_dir)
    folder = cache_root() / "onnx" / model_hash(model_dir)
    fp32 = folder / "model.onnx"
    if not fp32.is_file():
        log.info("exporting %s to ONNX (once) at %s", model_dir, fp32)
        try:
            _export(model_dir, fp32)
        except (RuntimeError, ValueError, OSError) as exc:
            raise BackendError(f"ONNX export of {model_dir} failed: {exc}") from exc
    if quantize is None:
        return fp32
    if quantize != "int8":
        raise ConfigError(f"unknown quantisation '{quantize}'; valid choices: int8")
    q8 = folder / "model.int8.onnx"
    if not q8.is_file():
        raw = folder / "model.unfused.onnx"
        if not raw.is_file():
            _export(model_dir, raw, fuse=False)
        _quantize(raw, q8)
    return q8


class OnnxEmbedder:
    """A sentence-transformers model folder run through onnxruntime (mean/CLS pooling, normalised)."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        name: str,
        batch_size: int = 32,
        quantize: str | None = None,
        threads: int | None = None,
    ) -> None:
        ort = require("onnxruntime", purpose="the fast ONNX embedding path")
        tokenizers = require("tokenizers", purpose="the fast ONNX embedding path")
        self.model_dir = Path(model_dir)
        self.name = name
        self.batch_size = batch_size
        self.quantize = quantize
        self.onnx_path = exported_model(self.model_dir, quantize)
        self.max_length = max_seq_length(self.model_dir)
        tok = tokenizers.Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_length)
        self._tok = tok
        pad_id = tok.token_to_id("[PAD]")
        self._pad_id = int(pad_id) if pad_id is not None else 0
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads or (os.cpu_count() or 1)
        opts.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(self.onnx_path), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = int(self.embed(["dimension probe"]).shape[1])

    def _run_batch(self, encodings: Sequence[Any], width: int | None = None) -> npt.NDArray[np.float32]:
        width = width or max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            types[row, :n] = enc.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        out = self._session.run(["embedding"], {k: v for k, v in feeds.items() if k in self._inputs})[0]
        return np.asarray(out, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Normalised float32 embeddings of ``texts`` (batched by token length)."""
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        encodings = self._tok.encode_batch(list(texts))
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")
        out = np.empty((len(texts), 0), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            vecs = self._run_batch([encodings[i] for i in idx])
            if out.shape[1] == 0:
                out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
            out[idx] = vecs
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.maximum(norms, 1e-12), dtype=np.float32)

    def embed_fixed(self, texts: Sequence[str], shape: FixedShape | None = None) -> npt.NDArray[np.float32]:
        """Like :meth:`embed`, but each text's vector depends on that text only (fixed batch shapes)."""
        from ragrade.embedding.batching import DEFAULT_SHAPE, fixed_shape_batches

        shape = shape or DEFAULT_SHAPE
        out = np.zeros((len(texts), getattr(self, "dim", 0)), dtype=np.float32)
        encodings = self._tok.encode_batch(list(texts)) if texts else []
        for idx, width in fixed_shape_batches([len(e.ids) for e in encodings], self.max_length, shape):
            rows = [encodings[i] for i in idx] + [encodings[idx[0]]] * (shape.batch - len(idx))
            vecs = self._run_batch(rows, width)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            out[idx] = (vecs / np.maximum(norms, 1e-12))[: len(idx)]
        return out

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "kind": "onnx",
            "name": self.name,
            "model": str(self.model_dir),
            "quantize": self.quantize,
            "batch_size": self.batch_size,
            "onnx": str(self.onnx_path),
        }


__all__ = ["OnnxEmbedder", "cache_root", "exported_model", "max_seq_length", "model_hash"]
