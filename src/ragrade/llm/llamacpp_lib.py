"""A thin ctypes layer over the ik_llama.cpp shared library (package ``ik-llama-cpp-python``).

The package's own high-level ``IkLlama`` decodes one sequence at a time and samples in Python loops
over the whole vocabulary; this module exposes just what :mod:`ragrade.llm.llamacpp` needs instead:
loading a model and one context, tokenising, reading GGUF metadata, decoding batches of tokens with
the logits of chosen positions returned as a numpy array, and dropping positions from the KV cache
(``seq_rm``).

The structures and the functions the package binds come from ``ik_llama_cpp._ctypes_api``; the few
extra symbols used here (KV-cache editing, metadata, vocabulary size, the log hook) are bound on the
same library handle when the library is first used. Note that this fork's vocabulary functions take
the *model* pointer, not a vocabulary pointer.

Nothing here is thread-safe: the backend serialises every call under one lock.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.deps import require
from ragrade.errors import BackendError, ConfigError

log = logging.getLogger("ragrade.llm")

_c_void_p, _i32, _bool = ctypes.c_void_p, ctypes.c_int32, ctypes.c_bool
# symbol -> (argument types, result type): bound on first use, on the package's library handle
_EXTRA: dict[str, tuple[list[Any], Any]] = {
    "llama_kv_cache_seq_rm": ([_c_void_p, _i32, _i32, _i32], _bool),
    "llama_kv_cache_seq_cp": ([_c_void_p, _i32, _i32, _i32, _i32], None),
    "llama_model_meta_val_str": ([_c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t], _i32),
    "llama_n_vocab": ([_c_void_p], _i32),
    "llama_n_ctx_train": ([_c_void_p], _i32),
    "llama_n_ctx": ([_c_void_p], ctypes.c_uint32),
    "llama_n_batch": ([_c_void_p], ctypes.c_uint32),
    "llama_token_bos": ([_c_void_p], _i32),
    "llama_token_eos": ([_c_void_p], _i32),
    "llama_get_logits": ([_c_void_p], ctypes.POINTER(ctypes.c_float)),
    "llama_token_get_text": ([_c_void_p, _i32], ctypes.c_char_p),
}
_LOG_CALLBACK_T = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_state: dict[str, object] = {}
_state_lock = threading.Lock()


def _forward_log(level: int, text: bytes | None, _user: object) -> None:
    """Route the library's own messages to the debug log instead of stderr."""
    if text:
        log.debug("llama.cpp: %s", text.decode("utf-8", "replace").rstrip())


def api() -> ModuleType:
    """The package's ctypes module with the extra symbols bound (install hint when the package is missing)."""
    with _state_lock:
        loaded = _state.get("api")
        if isinstance(loaded, ModuleType):
            return loaded
        capi = require(
            "ik_llama_cpp._ctypes_api", package="ik-llama-cpp-python", extra="llamacpp", purpose="the llamacpp backend"
        )
        lib = capi._lib
        for name, (argtypes, restype) in _EXTRA.items():
            fn = getattr(lib, name)  # AttributeError here means an incompatible library build
            fn.argtypes, fn.restype = argtypes, restype
        if hasattr(lib, "llama_log_set"):
            callback = _LOG_CALLBACK_T(_forward_log)
            lib.llama_log_set.argtypes, lib.llama_log_set.restype = [_LOG_CALLBACK_T, _c_void_p], None
            lib.llama_log_set(callback, None)
            _state["log_callback"] = callback  # the C side keeps a pointer: keep the object alive
        capi.llama_backend_init()
        _state["api"] = capi
        return capi


def cpu_has_vnni() -> bool:
    """True when /proc/cpuinfo lists AVX-VNNI or AVX512-VNNI (False when it cannot tell).

    The package's own wrapper turns flash attention off on x86 CPUs without VNNI: the fork's flash
    attention kernels abort the whole process there on longer prompts.
    """
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
            break
    return bool(flags & {"avx_vnni", "avxvnni", "avx512_vnni"})


def package_version() -> str:
    """The installed ``ik-llama-cpp-python`` version ("unknown" when it cannot be read)."""
    try:
        from importlib.metadata import version

        return version("ik-llama-cpp-python")
    except Exception:
        return "unknown"


class LlamaRuntime:
    """One model and one context on it (CPU), with a reusable token batch.

    ``n_ctx`` (one sequence's window) is capped at the model's training context; ``n_seq`` is how many
    sequence ids the context accepts and ``cells`` how many tokens its KV cache holds (default ``n_ctx``;
    several sequences at once need more). The batch size follows the window only, so a context is split
    into the same ``llama_decode`` calls whatever the cache size (see :mod:`ragrade.llm.llamacpp` for when
    the backend decodes several sequences at once).
    """

    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int,
        n_threads: int,
        seed: int = 0,
        flash_attn: bool = False,
        n_seq: int = 1,
        cells: int | None = None,
    ) -> None:
        self.C = api()
        self.lib = self.C._lib
        self.path = path
        params = self.C.llama_model_default_params()
        params.n_gpu_layers = 0
        self.model = self.C.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not self.model:
            from ragrade.llm.gguf import gguf_problem

            why = gguf_problem(path)
            raise ConfigError(
                f"{path}: llama.cpp could not load this GGUF file: "
                + (why or "an architecture this llama.cpp build does not know, or a damaged file")
            )
        self.ctx: int | None = None
        self.batch: Any = None
        self.n_vocab = int(self.lib.llama_n_vocab(self.model))
        self.n_ctx_train = int(self.lib.llama_n_ctx_train(self.model))
        n_ctx = min(n_ctx, self.n_ctx_train) if self.n_ctx_train > 0 else n_ctx
        cparams = self.C.llama_context_default_params()
        cparams.n_ctx = max(n_ctx, cells or 0)
        cparams.n_batch = min(n_ctx, 2048)
        cparams.n_seq_max = self.n_seq = max(1, n_seq)
        cparams.n_threads = cparams.n_threads_batch = n_threads
        cparams.seed = seed & 0xFFFFFFFF
        if flash_attn and not cpu_has_vnni():
            log.warning("llamacpp: flash attention needs a CPU with VNNI here (it can abort the process); off")
            flash_attn = False
        cparams.flash_attn = self.flash_attn = bool(flash_attn)
        self.ctx = self.C.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            self.close()
            raise BackendError(f"{path}: llama.cpp could not create a context of {n_ctx} tokens")
        self.n_cells = int(self.lib.llama_n_ctx(self.ctx))
        self.n_ctx = self.n_cells if cells is None else min(n_ctx, self.n_cells)
        self.n_batch = int(self.lib.llama_n_batch(self.ctx))
        self.n_threads = n_threads
        self.batch = self.C.llama_batch_init(self.n_batch, 0, 1)

    def _live(self) -> None:
        """Refuse to touch freed pointers (a call after :meth:`close` would crash the process)."""
        if not self.model or not self.ctx:
            raise RuntimeError(f"{self.path.name}: the llama.cpp model is closed")

    # -- model facts ---------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        """A GGUF metadata value as text (None when the key is missing)."""
        self._live()
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = int(self.lib.llama_model_meta_val_str(self.model, key.encode("utf-8"), buf, size))
            if n < 0:
                return None
            if n < size:
                return buf.value.decode("utf-8", "replace")
            size = n + 1

    def bos_id(self) -> int:
        """The start-of-text token (the end token, then 0, when the model has none)."""
        self._live()
        for tid in (int(self.lib.llama_token_bos(self.model)), int(self.lib.llama_token_eos(self.model)), 0):
            if tid >= 0:
                return tid
        return 0

    def eos_id(self) -> int:
        """The end-of-text token (-1 when the model has none)."""
        self._live()
        return int(self.lib.llama_token_eos(self.model))

    def token_text(self, token: int) -> str:
        """The vocabulary entry of ``token`` as written in the tokenizer (``<bos>``, ``▁Paris``, ...)."""
        self._live()
        if token < 0:
            return ""
        raw = self.lib.llama_token_get_text(self.model, token)
        return raw.decode("utf-8", "replace") if raw else ""

    def is_eog(self, token: int) -> bool:
        """True when ``token`` ends generation (end of sequence, end of turn, ...)."""
        self._live()
        return bool(self.C.llama_token_is_eog(self.model, token))

    # -- text <-> tokens -----------------------------------------------------------------------
    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        """Token ids of ``text``; ``add_special`` adds the model's start token, ``parse_special`` reads
        control tokens such as ``<start_of_turn>`` written in the text."""
        self._live()
        raw = text.encode("utf-8")
        cap = len(raw) + 8
        buf = (self.C.llama_token * cap)()
        n = int(self.C.llama_tokenize(self.model, raw, len(raw), buf, cap, add_special, parse_special))
        if n < 0:
            cap = -n
            buf = (self.C.llama_token * cap)()
            n = int(self.C.llama_tokenize(self.model, raw, len(raw), buf, cap, add_special, parse_special))
        return [int(t) for t in buf[:n]]

    def piece(self, token: int) -> bytes:
        """The bytes ``token`` stands for (control tokens render as nothing)."""
        self._live()
        buf = ctypes.create_string_buffer(64)
        n = int(self.C.llama_token_to_piece(self.model, token, buf, 64, 0, False))
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = int(self.C.llama_token_to_piece(self.model, token, buf, -n, 0, False))
        return buf.raw[: max(n, 0)]

    # -- decoding ------------------------------------------------------------------------------
    def decode(self, items: list[tuple[int, int, int, bool]]) -> npt.NDArray[np.float32]:
        """Decode ``(token, position, sequence, want_logits)`` items (at most ``n_batch``) in one call.

        Returns the logits of the flagged items, one row each, in item order: a view of the library's
        buffer, valid until the next call (copy what must outlive it).
        """
        n_out = sum(1 for it in items if it[3])
        if not items:
            return np.zeros((0, self.n_vocab), dtype=np.float32)
        if len(items) > self.n_batch:
            raise ValueError(f"{len(items)} tokens exceed the batch size {self.n_batch}")
        self._live()
        b = self.batch
        for i, (tok, pos, seq, want) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, int(want)
            b.seq_id[i][0] = seq
        b.n_tokens = len(items)
        rc = int(self.C.llama_decode(self.ctx, b))
        if rc != 0:
            raise BackendError(f"llama_decode failed with code {rc} ({len(items)} tokens)")
        if not n_out:
            return np.zeros((0, self.n_vocab), dtype=np.float32)
        ptr = self.lib.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(ptr, shape=(n_out, self.n_vocab))

    def prefill(self, tokens: list[int], *, seq: int = 0, start: int = 0) -> npt.NDArray[np.float32]:
        """Decode ``tokens`` on ``seq`` from position ``start`` (in chunks of ``n_batch``); a copy of the
        logits after the last token."""
        last = np.zeros(self.n_vocab, dtype=np.float32)
        for i in range(0, len(tokens), self.n_batch):
            chunk = tokens[i : i + self.n_batch]
            final = i + len(chunk) == len(tokens)
            items = [(t, start + i + j, seq, final and j == len(chunk) - 1) for j, t in enumerate(chunk)]
            out = self.decode(items)
            if final:
                last = out[0].copy()
        return last

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        """Let ``dst`` share the cells of ``src`` at positions ``[p0, p1)`` (-1: open end); no copy is made."""
        self._live()
        self.lib.llama_kv_cache_seq_cp(self.ctx, src, dst, p0, p1)

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        """Forget the positions ``[p0, p1)`` of ``seq`` (-1: open end); False when the cache cannot."""
        self._live()
        return bool(self.lib.llama_kv_cache_seq_rm(self.ctx, seq, p0, p1))

    def clear(self) -> None:
        """Empty the KV cache."""
        self._live()
        self.C.llama_kv_cache_clear(self.ctx)

    def close(self) -> None:
        """Free the batch, the context and the model (safe to call twice)."""
        if self.batch is not None:
            self.C.llama_batch_free(self.batch)
            self.batch = None
        if self.ctx:
            self.C.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            self.C.llama_free_model(self.model)
            self.model = None


class SlotPacker:
    """Rows of several sequences packed into ``llama_decode`` calls of at most ``limit`` rows, placed so that
    every row's cell index equals its position modulo ``align``.

    llama.cpp puts a call's rows in the next free cells one after the other; :meth:`add` first fills the
    gap to the right cell with rows of ``pad_seq`` (no logits; drop that sequence afterwards). The
    log-probability of each row's target is collected under its key, in order (:attr:`rows`).
    """

    def __init__(self, rt: LlamaRuntime, cell: int, *, align: int, pad_seq: int, limit: int) -> None:
        self.rt, self.cell, self.align, self.pad_seq, self.limit = rt, cell, align, pad_seq, limit
        self.batch: list[tuple[int, int, int, bool]] = []
        self.targets: list[tuple[object, int]] = []
        self.pad_pos = 0
        self.rows: dict[object, list[float]] = {}

    def gap(self, start: int) -> int:
        """Pad rows needed before a continuation whose first row has position ``start``."""
        return (start - self.cell - len(self.batch)) % self.align

    def add(self, key: object, seq: int, tokens: list[int], start: int, targets: list[int]) -> None:
        """Queue ``tokens`` of ``seq`` from position ``start``; ``targets[k]`` is scored after ``tokens[k]``."""
        for k, tok in enumerate(tokens):
            pad = self.gap(start) if k == 0 else 0
            if len(self.batch) + pad + 1 > self.limit:
                self.flush()
                pad = self.gap(start) if k == 0 else 0
            for _ in range(pad):
                self.batch.append((0, self.pad_pos, self.pad_seq, False))
                self.pad_pos += 1
            self.batch.append((tok, start + k, seq, True))
            self.targets.append((key, targets[k]))

    def flush(self) -> None:
        """Decode the queued rows and collect their log-probabilities."""
        if not self.batch:
            return
        logits = self.rt.decode(self.batch)
        for (key, _), lp in zip(self.targets, token_logprobs(logits, [t for _, t in self.targets]), strict=True):
            self.rows.setdefault(key, []).append(lp)
        self.cell += len(self.batch)
        self.batch, self.targets = [], []


def log_softmax64(logits: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Log-softmax over the last axis in float64 (the whole vocabulary)."""
    x = logits.astype(np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    out: npt.NDArray[np.float64] = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return out


def token_logprobs(logits: npt.NDArray[np.float32], targets: list[int], chunk: int = 16) -> list[float]:
    """``log softmax(logits[i])[targets[i]]`` for every row, in float64, a few rows at a time."""
    out: list[float] = []
    for s in range(0, len(targets), chunk):
        lp = log_softmax64(logits[s : s + chunk])
        out.extend(float(lp[r, t]) for r, t in enumerate(targets[s : s + chunk]))
    return out


__all__ = ["LlamaRuntime", "SlotPacker", "api", "cpu_has_vnni", "log_softmax64", "package_version", "token_logprobs"]
