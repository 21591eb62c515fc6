"""An embedded llama.cpp backend (``llamacpp/<model>``): a GGUF model run inside this process, on the CPU.

``llamacpp/gemma-3-270m`` runs the embedded Gemma 3 270M base model (Q4_K_M, shipped as a package,
see :mod:`ragrade.llm.gguf`); ``llamacpp/PATH.gguf`` runs any GGUF file the bundled runtime
(``ik-llama-cpp-python``, a build of the ik_llama.cpp fork) can load. No server, no network.

Log-likelihood (``shared-prefix``): the context is decoded once; each continuation is then decoded after
it and dropped from the cache again (``seq_rm``) before the next one, so every continuation sees exactly
the cache a lone request would. Tokenisation follows the ``hf`` backend: a trailing space of the context
moves to the continuations, the context gets the start token, each continuation is tokenised on its own
without special tokens, and log-softmax runs in float64 over the whole vocabulary. A context longer than
the window keeps its end.

Several questions at once (``parallel_sequences``). The KV cache's cells are shared by all sequences,
and the numbers depend on which cell holds a token, not only on its position. Measured with
ik-llama-cpp-python 0.1.5 on the embedded model (x86 AVX2, flash attention off, 1 and 2 threads): a
context that starts on a cell whose index is not a multiple of 8 (another sequence's cells before it)
scores up to 0.5 nats away from the same request alone, and continuation cells that lie off their
positions modulo 8 move some scores by 0.02 nats (sharing one context's cells between its options with
``seq_cp`` was off by up to 0.45 nats: each option lands after the others). :meth:`LlamaCppLLM.parallel_scores`
therefore places every token on a cell equal to its position modulo :data:`SLOT_ALIGN` (16: a multiple of
AVX2's 8, room for wider vectors), filling gaps with pad rows on a spare sequence: each question on its own
sequence id, its context in its own call as alone, then one option of every question per round, packed
into calls of at most :data:`ROWS_PER_DECODE` rows (the option needing the fewest pad rows next). That
reproduces one-at-a-time scoring to the last digit here; on another CPU the first group is checked once
against one at a time (:data:`CHECK_TOLERANCE`) and a difference turns parallel sequences off, with a
warning and the reason in ``describe()``.

It is not faster on 2 cores (``benchmarks/bench_llamacpp_sequences.py``, numbers in its docstring): every
row attends to every cell of the shared cache, the other questions' contexts included, and the pad rows
run through every layer, while the contexts' prefill, most of the work, gains nothing. So the default
(:func:`parallel_count`) is one question at a time below :data:`PARALLEL_FROM_THREADS` threads, where a call
of a few rows is cheap to share out; from there :data:`PARALLEL_DEFAULT` questions at once, a setting not
measured yet on such a machine (the benchmark measures it: ``--threads N --group G``).

llama.cpp's numbers also depend on how tokens are grouped into ``llama_decode`` calls: batches of 32
tokens or more use other kernels. Decoding context and continuation in one call instead of context first
moves scores by up to a few tenths of a nat on this model; continuations are therefore decoded in chunks
of at most :data:`ROWS_PER_DECODE` tokens, which gives the same numbers as token-by-token decoding.
The schedule is fixed, so the same request always gets the same numbers, whatever else is in the batch.
Flash attention is off by default: with it and more than one thread, a chunk of several tokens and the
same tokens one at a time gave scores ~0.1 nats apart (without it they agree exactly), and it was not
measurably faster here. ``flash_attn=True`` turns it on (on CPUs with VNNI only).

Generation renders ``messages`` with the model's chat template (see :mod:`ragrade.llm.chat_template`),
then decodes greedily (temperature 0, argmax) or samples from ``softmax(logits / temperature)`` with a
numpy generator seeded per request. It stops at an end-of-generation token, a ``stop`` string or
``max_tokens``. ``json_schema`` is not enforced (no grammar): the model writes plain text and the
callers' tolerant parsing reads it.

Threads: the ``n_threads`` option, else ``$RAGRADE_LLAMACPP_THREADS``, else the cores this process may
run on (its CPU affinity, which a container or ``taskset`` limits, not the machine's core count);
``describe()`` records the count and where it came from. With flash attention off the count does not
change the numbers (1, 2 and 3 threads gave identical scores). One context serves one batch at a time:
the work runs in a worker thread under a lock. ``describe()`` records the parallel sequences, where the
count came from, and the check's largest difference.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.llm.cache import ResponseCache
from ragrade.llm.chat_template import fallback_template, plain_prompt, render
from ragrade.llm.core import BaseLLM, log
from ragrade.llm.gguf import EMBEDDED_MODELS, model_label, resolve_gguf
from ragrade.llm.limits import LimitConfig

Encoded = tuple[list[int], list[list[int]]]  # a request's context and continuation token ids

# continuation tokens per llama_decode call: below 32 tokens ik_llama.cpp computes every row on its own, so
# the scores equal token-by-token decoding whatever the chunking (at 32 and more it switches kernels, and
# the scores move by up to ~0.3 nats on the embedded model)
ROWS_PER_DECODE = 31
#: environment variable with llama.cpp's default thread count (see :func:`thread_count`)
THREADS_VAR = "RAGRADE_LLAMACPP_THREADS"
#: parallel sequences: every cell index equals its token's position modulo this (8 was enough on AVX2;
#: 16 leaves room for wider vectors at a few more pad rows)
SLOT_ALIGN = 16
#: the largest |difference| in nats the once-per-model check of parallel sequences accepts (the tests' tolerance)
CHECK_TOLERANCE = 1e-4
#: threads from which several questions are decoded as parallel sequences by default, and how many
PARALLEL_FROM_THREADS = 16
PARALLEL_DEFAULT = 4


def gguf_identity(model: str, path: Path) -> tuple[str, str | None]:
    """``(fingerprint, sha256)`` of a GGUF file: the embedded model's published SHA-256 (fingerprint: its
    first 16 digits), or for user files a hash of path, size and mtime and no SHA-256 (hashing GBs is slow)."""
    sha: str | None = None
    if model in EMBEDDED_MODELS:
        import importlib

        try:
            sha = str(importlib.import_module(EMBEDDED_MODELS[model]).EXPECTED_SHA256)
        except (ImportError, AttributeError):
            sha = None
    if sha:
        return sha[:16], sha
    st = path.stat()
    raw = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16], None


def _stopping() -> bool:
    """True once a stop (Ctrl-C / SIGTERM) was asked for: the worker thread stops computing."""
    from ragrade import interrupt

    return interrupt.requested()


def usable_cores() -> tuple[int, str]:
    """How many cores this process may run on, and how that was found: its CPU affinity where the OS
    reports one (a container or ``taskset`` limit shows there, not in the machine's core count), else
    ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0))), "cpu affinity"
    except (AttributeError, OSError):  # no affinity call on this OS
        return max(1, os.cpu_count() or 1), "os.cpu_count()"


def thread_count(n_threads: int | None = None) -> tuple[int, str]:
    """llama.cpp's thread count and where it comes from: the ``n_threads`` option, else
    ``$RAGRADE_LLAMACPP_THREADS`` (e.g. 1 on a machine shared with other work: llama.cpp's threads spin
    while they wait, so fewer threads than cores is faster there), else every usable core
    (:func:`usable_cores`). A count that is not a positive whole number is a :class:`ConfigError`
    naming the setting and the value."""
    if n_threads is not None:
        if int(n_threads) < 1:
            raise ConfigError(f"llamacpp: n_threads must be a positive whole number, got {n_threads}")
        return int(n_threads), "n_threads option"
    value = os.environ.get(THREADS_VAR, "").strip()
    if not value:
        return usable_cores()
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"{THREADS_VAR} must be a positive whole number of threads, got '{value}'")
    return count, THREADS_VAR


def parallel_count(asked: int | None, threads: int) -> tuple[int, str]:
    """How many questions are decoded at once as parallel sequences, and why: the ``parallel_sequences``
    option, else :data:`PARALLEL_DEFAULT` from :data:`PARALLEL_FROM_THREADS` threads on (more threads wait
    on each other longer in a call of a few rows), else 1 (on 2 cores it was never faster:
    ``benchmarks/bench_llamacpp_sequences.py``)."""
    if asked is not None:
        if int(asked) < 1:
            raise ConfigError(f"llamacpp: parallel_sequences must be a positive whole number, got {asked}")
        return int(asked), "parallel_sequences option"
    if threads >= PARALLEL_FROM_THREADS:
        return PARALLEL_DEFAULT, f"auto: {threads} threads (>= {PARALLEL_FROM_THREADS})"
    return 1, f"auto: {threads} thread(s) (< {PARALLEL_FROM_THREADS})"


def _summed(first: float, rows: list[float]) -> float:
    """A continuation's score added up as :meth:`LlamaCppLLM.shared_prefix_scores` adds it (same order)."""
    total = first
    for s in range(0, len(rows), ROWS_PER_DECODE):
        total += sum(rows[s : s + ROWS_PER_DECODE])
    return total


class LlamaCppLLM(BaseLLM):
    """A GGUF model in process through llama.cpp (see module docstring)."""

    provider = "llamacpp"
    supports_loglikelihood = True

    def __init__(
        self,
        model: str,
        *,
        cache: ResponseCache | None = None,
        limits: LimitConfig | None = None,
        seed: int | None = 0,
        n_threads: int | None = None,
        n_ctx: int = 4096,
        flash_attn: bool = False,
        parallel_sequences: int | None = None,
        **unknown: object,
    ) -> None:
        from ragrade.llm import llamacpp_lib

        super().__init__(model, cache=cache, limits=limits, seed=seed)
        if unknown:
            names = ", ".join(sorted(unknown))
            raise ConfigError(
                f"llamacpp: unknown option(s) {names} (options: n_threads, n_ctx, flash_attn, parallel_sequences, seed)"
            )
        if int(n_ctx) < 16:
            raise ConfigError(f"llamacpp: n_ctx must be at least 16, got {n_ctx}")
        threads, self.threads_from = thread_count(n_threads)
        self.parallel, self.parallel_from = parallel_count(parallel_sequences, threads)
        self.parallel_check: float | None = None  # the once-per-model check's largest |difference|
        try:
            llamacpp_lib.api()
        except OSError as exc:  # the package is there but its shared library cannot be loaded
            raise ConfigError(f"llamacpp: cannot load the llama.cpp library: {exc}") from exc
        self.path = resolve_gguf(model)
        self.label = model_label(model)
        self.name = f"{self.provider}/{self.label}"
        self.seed = seed
        self._fingerprint, self.sha256 = gguf_identity(model, self.path)
        self.file_size = self.path.stat().st_size
        self.runtime_version = llamacpp_lib.package_version()
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        t0 = time.perf_counter()
        several = self.parallel > 1  # question sequences, a pad sequence for contexts, one for continuations
        self.rt = llamacpp_lib.LlamaRuntime(
            self.path, n_ctx=int(n_ctx), n_threads=threads, seed=int(seed or 0), flash_attn=flash_attn,
            n_seq=self.parallel + 2 if several else 1, cells=int(n_ctx) * self.parallel if several else None,
        )  # fmt: skip
        self.load_s = time.perf_counter() - t0
        self.n_ctx = self.rt.n_ctx
        self.architecture = self.rt.meta("general.architecture")
        self.template_source, self.chat_template = self._find_template()
        self._bos_text = self.rt.token_text(self.rt.bos_id())
        self._eos_text = self.rt.token_text(self.rt.eos_id())

    # -- model facts ---------------------------------------------------------------------------
    def _is_single_token(self, text: str) -> bool:
        return len(self.rt.tokenize(text, add_special=False, parse_special=True)) == 1

    def _find_template(self) -> tuple[str, str | None]:
        """Where the chat template comes from: the file, a family fallback, or none (plain layout)."""
        own = self.rt.meta("tokenizer.chat_template")
        if own:
            return "gguf", own
        fallback = fallback_template(self.architecture, self._is_single_token)
        if fallback is not None:
            return fallback
        return "plain", None

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def _identity(self) -> JSONObject:
        return {
            "provider": self.provider,
            "model": self._fingerprint,
            "n_ctx": self.n_ctx,
            "runtime": self.runtime_version,
            # both move scores by a few hundredths of a nat: cached numbers must come from the same setting
            "n_threads": self.rt.n_threads,
            "flash_attn": self.rt.flash_attn,
        }

    # -- batches -------------------------------------------------------------------------------
    async def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        return await asyncio.to_thread(self._locked, self._generate_sync, reqs)

    async def _loglikelihood_batch(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        return await asyncio.to_thread(self._locked, self._loglikelihood_sync, reqs)

    def _locked(self, fn: Any, reqs: object) -> Any:
        with self._lock:
            return fn(reqs)

    def _check_open(self) -> None:
        if self.rt.ctx is None:
            raise RuntimeError(f"{self.name} is closed")
        if _stopping():
            raise RuntimeError("stopped (a stop was requested)")

    # -- log-likelihood ------------------------------------------------------------------------
    def encode_pair(self, context: str, continuations: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """Token ids of the context (with the start token) and of each continuation, as ``hf`` does it."""
        stripped = context.rstrip(" ")
        moved = context[len(stripped) :]
        rt = self.rt
        ctx_ids = [rt.bos_id(), *rt.tokenize(stripped, add_special=False, parse_special=True)]
        cont_ids = [rt.tokenize(moved + c, add_special=False, parse_special=True) for c in continuations]
        longest = max((len(c) for c in cont_ids), default=0)
        if len(ctx_ids) + longest > self.n_ctx:  # keep the end of the context
            keep = max(1, self.n_ctx - longest)
            self._warn_once(
                "ll-truncate",
                "%s: a log-likelihood context of %d tokens does not fit the %d-token window; "
                "keeping its last %d tokens (reported once)",
                self.name,
                len(ctx_ids),
                self.n_ctx,
                keep,
            )
            ctx_ids = ctx_ids[-keep:]
        return ctx_ids, cont_ids

    def _loglikelihood_sync(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        out: list[LoglikelihoodResult | None] = [None] * len(reqs)
        ready: list[tuple[int, Encoded]] = []
        for i, req in enumerate(reqs):
            try:
                self._check_open()
                ctx, conts = self.encode_pair(req.context, req.continuations)
                if any(len(c) >= self.n_ctx for c in conts):
                    raise ValueError(f"a continuation does not fit the {self.n_ctx}-token window")
                ready.append((i, (ctx, conts)))
            except Exception as exc:  # one bad request must not sink the batch
                out[i] = _failed(exc)
        size = self.parallel  # fixed for this batch (a failed check turns it to 1 half-way)
        for g in range(0, len(ready), size):
            group = ready[g : g + size]
            try:
                self._check_open()
                scores = self._group_scores([enc for _, enc in group])
            except Exception:  # the group failed: each request alone, so that only a bad one fails
                scores = [None] * len(group)
            for (i, (ctx, conts)), got in zip(group, scores, strict=True):
                try:
                    if got is None:
                        self._check_open()
                        got = self.shared_prefix_scores(ctx, conts)
                    out[i] = LoglikelihoodResult(
                        logprobs=got, token_counts=[len(c) for c in conts], method="shared-prefix",
                        prompt_tokens=len(ctx),
                    )  # fmt: skip
                except Exception as exc:
                    out[i] = _failed(exc)
        return [some for some in out if some is not None]

    def _group_scores(self, group: list[Encoded]) -> list[list[float] | None]:
        """Scores of several encoded requests: as parallel sequences where they fit the cache (checked once
        per model against one at a time, see module docstring), else one at a time."""
        if len(group) == 1 or self.parallel == 1:
            return [self.shared_prefix_scores(*enc) for enc in group]
        need = sum(len(ctx) + SLOT_ALIGN for ctx, _ in group)
        need += sum(max((len(c) for c in conts), default=0) + SLOT_ALIGN for _, conts in group)
        if need > self.rt.n_cells:  # too long together: in halves
            half = len(group) // 2
            return [*self._group_scores(group[:half]), *self._group_scores(group[half:])]
        together: list[list[float] | None] = list(self.parallel_scores(group))
        if self.parallel_check is None:
            self._check_parallel(group, together)
        return together

    def _check_parallel(self, group: list[Encoded], together: list[list[float] | None]) -> None:
        """Once per model: the first and last request of the first group scored alone must agree within
        :data:`CHECK_TOLERANCE`; else this backend falls back to one at a time (with a warning)."""
        delta = 0.0
        for k in {0, len(group) - 1}:
            alone = self.shared_prefix_scores(*group[k])
            got = together[k] or []
            delta = max([delta, *(abs(a - b) for a, b in zip(alone, got, strict=True))])
            together[k] = alone
        self.parallel_check = delta
        if delta > CHECK_TOLERANCE:
            log.warning(
                "%s: parallel sequences scored %.2g nats away from one at a time on this machine; "
                "scoring one at a time",
                self.name,
                delta,
            )
            self.parallel, self.parallel_from = 1, f"{self.parallel_from}; off: check off by {delta:.2g} nats"
            for k in range(1, len(group) - 1):
                together[k] = None  # rescored alone by the caller

    def parallel_scores(self, group: list[Encoded]) -> list[list[float]]:
        """Score several requests at once, each on its own sequence id (see module docstring).

        Contexts: one ``llama_decode`` call each, as alone, each starting on a cell whose index is a multiple of
        :data:`SLOT_ALIGN` (pad rows on sequence ``len(group)`` fill the gap). Then in rounds, option ``r`` of
        every request, packed into calls of at most :data:`ROWS_PER_DECODE` rows (the continuation needing the
        fewest pad rows next), each row on a cell equal to its position modulo :data:`SLOT_ALIGN`; after each
        round the options are dropped again.
        """
        from ragrade.llm.llamacpp_lib import SlotPacker, log_softmax64

        rt, n = self.rt, len(group)
        rt.clear()
        try:
            cell, firsts = 0, []
            for s, (ctx, _) in enumerate(group):
                pad = (-cell) % SLOT_ALIGN
                if pad:
                    rt.decode([(0, cell + k, n, False) for k in range(pad)])
                firsts.append(log_softmax64(rt.prefill(ctx, seq=s)))
                cell += pad + len(ctx)
            scores = [[0.0] * len(conts) for _, conts in group]
            for r in range(max(len(conts) for _, conts in group)):
                pk = SlotPacker(rt, cell, align=SLOT_ALIGN, pad_seq=n + 1, limit=ROWS_PER_DECODE)
                todo = [(s, len(ctx), conts[r]) for s, (ctx, conts) in enumerate(group) if r < len(conts)]
                todo = [t for t in todo if len(t[2]) > 1]
                while todo:
                    pick = min(range(len(todo)), key=lambda i: (pk.gap(todo[i][1]), -len(todo[i][2])))
                    s, start, c = todo.pop(pick)
                    pk.add(s, s, c[:-1], start, c[1:])
                pk.flush()
                for s, (ctx, conts) in enumerate(group):
                    if r < len(conts) and conts[r]:
                        rows = pk.rows.get(s, [])
                        scores[s][r] = _summed(float(firsts[s][conts[r][0]]), rows)
                    if not rt.seq_rm(s, len(ctx), -1):
                        raise RuntimeError("llama.cpp could not drop a continuation from its cache")
                rt.seq_rm(n + 1, -1, -1)
        finally:
            rt.clear()
        return scores

    def shared_prefix_scores(self, ctx: list[int], conts: list[list[int]]) -> list[float]:
        """Decode ``ctx`` once, then score each continuation after it (see module docstring)."""
        from ragrade.llm.llamacpp_lib import log_softmax64, token_logprobs

        rt = self.rt
        n = len(ctx)
        rt.clear()
        try:
            first = log_softmax64(rt.prefill(ctx))
            scores: list[float] = []
            for c in conts:
                if not c:
                    scores.append(0.0)
                    continue
                total = float(first[c[0]])
                items = [(t, n + k, 0, True) for k, t in enumerate(c[:-1])]
                for s in range(0, len(items), ROWS_PER_DECODE):
                    chunk = items[s : s + ROWS_PER_DECODE]
                    total += sum(token_logprobs(rt.decode(chunk), c[1 + s : 1 + s + len(chunk)]))
                if not rt.seq_rm(0, n, -1):  # drop the continuation, keep the context
                    raise RuntimeError("llama.cpp could not drop a continuation from its cache")
                scores.append(total)
        finally:
            rt.clear()
        return scores

    # -- generation ----------------------------------------------------------------------------
    def render_messages(self, req: GenerationRequest) -> str:
        """The prompt text of a chat request (the chat template, or ``role: content`` lines without one)."""
        messages = req.messages or ()
        if self.chat_template is None:
            self._warn_once("plain", "%s: the model has no chat template; using 'role: content' lines", self.name)
            return plain_prompt(messages)
        return render(self.chat_template, messages, bos_token=self._bos_text, eos_token=self._eos_text)

    def prompt_ids(self, req: GenerationRequest) -> list[int]:
        """Token ids the model reads for ``req`` (chat: rendered template; prompt: start token + text)."""
        rt = self.rt
        if req.messages is not None and self.chat_template is not None:
            text = self.render_messages(req)
            ids = rt.tokenize(text, add_special=False, parse_special=True)
        else:
            text = self.render_messages(req) if req.messages is not None else (req.prompt or "")
            ids = rt.tokenize(text, add_special=True, parse_special=True)
        return ids or [rt.bos_id()]

    def _generate_sync(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        out = []
        for req in reqs:
            try:
                out.append(self._generate_one_sync(req))
            except Exception as exc:  # one bad request must not sink the batch
                log.debug("llamacpp generation failed", exc_info=True)
                out.append(Completion(text=None, error=f"{type(exc).__name__}: {exc}"))
        return out

    def _fit_prompt(self, ids: list[int], max_tokens: int) -> list[int]:
        room = max(1, self.n_ctx - min(max_tokens, self.n_ctx // 2))
        if len(ids) > room:
            self._warn_once(
                "gen-truncate",
                "%s: a prompt of %d tokens does not fit the %d-token window; keeping its last %d (reported once)",
                self.name,
                len(ids),
                self.n_ctx,
                room,
            )
            ids = ids[-room:]
        return ids

    def _generate_one_sync(self, req: GenerationRequest) -> Completion:
        self._check_open()
        rt = self.rt
        ids = self._fit_prompt(self.prompt_ids(req), req.max_tokens)
        seed = req.seed if req.seed is not None else int(self.seed or 0)
        rng = np.random.default_rng(seed) if req.temperature > 0 else None
        rt.clear()
        logits = rt.prefill(ids)
        new: list[int] = []
        raw = b""
        finish = "length"
        pos = len(ids)
        while len(new) < req.max_tokens and pos < self.n_ctx:
            if _stopping():  # never hand back a cut answer as if it were complete
                raise RuntimeError("stopped (a stop was requested)")
            token = _choose(logits, req.temperature, rng)
            if rt.is_eog(token):
                finish = "stop"
                break
            new.append(token)
            raw += rt.piece(token)
            if req.stop:
                text = raw.decode("utf-8", "ignore")
                hit = _first_stop(text, req.stop)
                if hit is not None:
                    return Completion(text=text[:hit], finish_reason="stop", usage=Usage(len(ids), len(new)))
            if len(new) >= req.max_tokens:
                break
            logits = rt.decode([(token, pos, 0, True)])[0]
            pos += 1
        text = raw.decode("utf-8", "replace")
        return Completion(text=text, finish_reason=finish, usage=Usage(len(ids), len(new)))

    # -- manifest and cleanup ------------------------------------------------------------------
    def describe(self) -> JSONObject:
        """Arguments for the run manifest: the file, its identity, the runtime and the context settings."""
        out = super().describe()
        out.update(
            path=str(self.path),
            label=self.label,
            file_size=self.file_size,
            fingerprint=self._fingerprint,
            runtime=f"ik-llama-cpp-python {self.runtime_version}",
            architecture=self.architecture,
            n_threads=self.rt.n_threads,
            n_threads_from=self.threads_from,
            usable_cores=usable_cores()[0],
            parallel_sequences=self.parallel,
            parallel_sequences_from=self.parallel_from,
            parallel_check_nats=self.parallel_check,
            flash_attn=self.rt.flash_attn,
            n_ctx=self.n_ctx,
            n_ctx_train=self.rt.n_ctx_train,
            chat_template=self.template_source,
            loglikelihood_method="shared-prefix",
            load_s=round(self.load_s, 3),
        )
        if self.sha256:
            out["sha256"] = self.sha256
        return out

    def close(self) -> None:
        """Free the llama.cpp context and model (safe to call twice)."""
        with self._lock:
            self.rt.close()


def _failed(exc: Exception) -> LoglikelihoodResult:
    log.debug("llamacpp log-likelihood failed", exc_info=True)
    return LoglikelihoodResult(logprobs=None, error=f"{type(exc).__name__}: {exc}")


def _choose(logits: Any, temperature: float, rng: np.random.Generator | None) -> int:
    """The next token: argmax at temperature 0, else a draw from ``softmax(logits / temperature)``."""
    if temperature <= 0 or rng is None:
        return int(np.argmax(logits))
    x = logits.astype(np.float64) / temperature
    p = np.exp(x - x.max())
    cdf = np.cumsum(p)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(cdf) - 1))


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Where the earliest ``stop`` string starts in ``text`` (None when none occurs)."""
    found = [text.find(s) for s in stops if s]
    hits = [i for i in found if i >= 0]
    return min(hits) if hits else None


__all__ = [
    "ROWS_PER_DECODE",
    "SLOT_ALIGN",
    "THREADS_VAR",
    "LlamaCppLLM",
    "gguf_identity",
    "parallel_count",
    "thread_count",
    "usable_cores",
]
