"""The local Hugging Face transformers backend (``hf/<model path>``), on a GPU, Apple MPS or the CPU.

Generation applies the tokenizer's chat template to ``messages`` (a plain
``role: content`` layout when the tokenizer has none). Greedy requests from every caller in flight are merged
by a batcher and decoded together in padded groups (:mod:`ragrade.llm.hf_generate`); sampled ones run one at
a time, each reseeded.

Log-likelihood (``prefix-tree``, the default) scores many requests per forward pass: every caller's requests
(all the shards a grid has in flight) are merged by a batcher (:mod:`ragrade.llm.coalesce`) into one batch,
laid out as prefix trees (:mod:`ragrade.llm.prefix_tree`: a context shared by its options, and a prefix shared
by several requests, computed once) and run in padded passes under a token budget
(:mod:`ragrade.llm.hf_tree`; out of memory halves it). The scores equal scoring each request alone up to
floating-point rounding (checked once per model against full forwards; a model that fails the check is
scored one request at a time, with a warning). ``shared-prefix`` scores one request at a time from the
context's cached keys/values, ``per-choice`` runs one full sequence per option (the naive reference). All
methods tokenise context and continuations separately (a trailing space of the context moves to the
continuations), so they produce the same numbers.

``device`` and ``dtype`` default to ``auto`` (:mod:`ragrade.llm.device`: CUDA, else MPS, else the CPU;
bfloat16 on a GPU, float32 elsewhere), checked before anything is loaded, and printed at load.

Models are loaded from a local path only (no download): a model folder, or a GGUF file
(``hf/PATH.gguf``, or ``hf/gemma-3-270m`` for the embedded model) that transformers' GGUF loader
dequantises (needs ``pip install 'ragrade[gguf]'``). A GGUF tokenizer without a
chat template gets its family's template, as in the ``llamacpp`` backend.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrade.deps import require
from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.llm.cache import ResponseCache
from ragrade.llm.coalesce import Coalescer
from ragrade.llm.core import BaseLLM, log
from ragrade.llm.device import resolve as resolve_placement
from ragrade.llm.gguf import model_label
from ragrade.llm.hf_generate import BatchGenerator, GenItem, eos_ids
from ragrade.llm.hf_tree import STOPPED, TreeScorer, chunk_bounds
from ragrade.llm.limits import LimitConfig
from ragrade.llm.llamacpp import gguf_identity
from ragrade.llm.prefix_tree import Item

METHODS = ("prefix-tree", "shared-prefix", "per-choice")
#: token positions per forward pass on the CPU (rows x padded length); a GPU's budget follows its free memory
CPU_BATCH_TOKENS = 8192
GPU_BATCH_TOKENS_MAX = 65536


@dataclass
class ForwardStats:
    """Forward passes and token positions computed by the model (log-likelihood only)."""

    calls: int = 0
    tokens: int = 0


def _fingerprint(path: Path) -> str:
    """Path plus size and mtime of the weight/config files: a retrained model in the same folder gets new keys."""
    parts = [str(path.resolve())]
    for f in sorted(path.glob("*")):
        if f.suffix in (".json", ".safetensors", ".bin", ".model", ".txt"):
            st = f.stat()
            parts.append(f"{f.name}:{st.st_size}:{int(st.st_mtime_ns)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


class HFLLM(BaseLLM):
    """A causal LM from a local folder (see module docstring)."""

    provider = "hf"
    supports_loglikelihood = True

    def __init__(
        self,
        model: str,
        *,
        cache: ResponseCache | None = None,
        limits: LimitConfig | None = None,
        seed: int | None = 0,
        device: str | None = None,
        dtype: str | None = None,
        loglikelihood_method: str = "prefix-tree",
        max_batch: int = 32,
        batch_tokens: int | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        super().__init__(model, cache=cache, limits=limits, seed=seed)
        # the device and dtype first: a wrong one fails before any file is read
        self.placement = resolve_placement(device, dtype, require("torch", purpose="the hf backend"), f"hf/{model}")
        self.device, self.dtype = self.placement.device, self.placement.dtype
        #: encode and plan a call's requests in chunks that overlap the device's passes (off the CPU)
        self.stream_chunks = self.placement.kind != "cpu"
        self.gguf = _gguf_file(model)  # a GGUF file (embedded name or *.gguf path), loaded dequantised
        path = self.gguf.parent if self.gguf is not None else Path(model).expanduser()
        if self.gguf is None and not path.is_dir():
            raise ConfigError(
                f"hf/{model}: no model folder at {path} (the hf provider loads local folders and .gguf files only)"
            )
        if loglikelihood_method not in METHODS:
            raise ConfigError(f"loglikelihood_method must be one of {', '.join(METHODS)}, got '{loglikelihood_method}'")
        if batch_tokens is not None and batch_tokens < 1:
            raise ConfigError(f"batch_tokens must be positive, got {batch_tokens}")
        self.path = path
        self.method = loglikelihood_method
        self.max_batch = max_batch
        self.seed = seed
        self.forwards = ForwardStats()
        self._fingerprint = _fingerprint(path) if self.gguf is None else gguf_identity(model, self.gguf)[0]
        self._lock = threading.RLock()
        torch = require("torch", purpose="the hf backend")
        tf = require("transformers", purpose="the hf backend")
        load_kw: JSONObject = {"trust_remote_code": trust_remote_code}
        if self.gguf is not None:
            self.name = f"hf/{model_label(model)}"
            for module in ("gguf", "accelerate"):
                require(module, extra="gguf", purpose="hf/ on a GGUF file")
            load_kw["gguf_file"] = self.gguf.name
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            self.tokenizer = tf.AutoTokenizer.from_pretrained(str(path), **load_kw)
            self.lm = tf.AutoModelForCausalLM.from_pretrained(
                str(path), dtype=getattr(torch, self.dtype), **load_kw
            ).to(self.device)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"hf/{model}: cannot load the model or tokenizer: {str(exc).splitlines()[0]}") from exc
        except (struct.error, EOFError, KeyError, IndexError) as exc:  # what a cut-off or damaged file raises
            if self.gguf is None:
                raise
            raise ConfigError(
                f"hf/{model}: cannot read the GGUF file {self.gguf} (cut off or damaged? "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            ) from exc
        self.lm.eval()
        print(f"ragrade: {self.name} runs on {self.device} in {self.dtype}", file=sys.stderr)
        if self.gguf is not None:
            _gguf_chat_template(self.tokenizer, str(getattr(self.lm.config, "model_type", "")))
        self._torch = torch
        self._batch_tokens = batch_tokens
        self.tree = TreeScorer(self.lm, torch, self.device, budget=self._tree_budget(), empty_cache=self._empty_cache)
        self._tree_checked: str | None = None  # None: not yet; "" passed; else why not
        pad = self.tokenizer.pad_token_id
        self.generator = BatchGenerator(
            self.lm,
            torch,
            self.device,
            pad_id=int(pad if pad is not None else (self.tokenizer.eos_token_id or 0)),
            eos_ids=eos_ids(self.lm, self.tokenizer),
            empty_cache=self._empty_cache,
        )
        self._batcher: Coalescer[LoglikelihoodRequest, LoglikelihoodResult] = Coalescer(
            self._loglikelihood_sync, name=f"ragrade-hf-{model_label(model)}"
        )
        self._gen_batcher: Coalescer[GenerationRequest, Completion] = Coalescer(
            lambda reqs: self._locked(self._generate_sync, reqs), name=f"ragrade-hf-gen-{model_label(model)}"
        )

    def _identity(self) -> JSONObject:
        return {"provider": self.provider, "model": self._fingerprint, "dtype": self.dtype}

    # -- generation ----------------------------------------------------------------------------
    async def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        # every caller's requests are merged into the generation batcher's next batch
        return await self._gen_batcher.run(reqs)

    async def _loglikelihood_batch(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        # every caller's requests (all shards in flight) are merged into the batcher's next batch
        return await self._batcher.run(reqs)

    def _locked(self, fn: Any, reqs: object) -> Any:
        with self._lock:
            return fn(reqs)

    def _prompt_ids(self, req: GenerationRequest) -> list[int]:
        tok = self.tokenizer
        if req.messages is not None:
            msgs = [{"role": m.role, "content": m.content} for m in req.messages]
            if getattr(tok, "chat_template", None):
                ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
                if isinstance(ids, dict) or hasattr(ids, "keys"):
                    ids = ids["input_ids"]
                return [int(i) for i in ids]
            text = "".join(f"{m['role']}: {m['content']}\n" for m in msgs) + "assistant:"
        else:
            text = req.prompt or ""
        return [int(i) for i in tok(text).input_ids]

    def _generate_sync(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        """Greedy requests decoded together in padded groups (:mod:`ragrade.llm.hf_generate`); sampled ones
        one at a time, each reseeded."""
        out: list[Completion | None] = [None] * len(reqs)
        greedy: list[GenItem] = []
        prompts: dict[int, list[int]] = {}
        for n, req in enumerate(reqs):
            try:
                ids = self._prompt_ids(req) or [self._start_id()]
            except Exception as exc:  # one bad request must not sink the batch
                out[n] = Completion(text=None, error=f"{type(exc).__name__}: {exc}")
                continue
            prompts[n] = ids
            if req.temperature > 0:
                out[n] = self._sample_one(req, ids)
            else:
                greedy.append(GenItem(n, ids, req.max_tokens))
        if greedy:
            try:
                done = self.generator.run(greedy, self.max_batch, self._tree_budget())
            except Exception as exc:  # a failure that is not out of memory: these requests are missing
                log.debug("hf batched generation failed", exc_info=True)
                done = {it.index: f"{type(exc).__name__}: {exc}" for it in greedy}
            for it in greedy:
                got = done[it.index]
                out[it.index] = (
                    Completion(text=None, error=got)
                    if isinstance(got, str)
                    else self._decoded(reqs[it.index], len(prompts[it.index]), got)
                )
        return [c if c is not None else Completion(text=None, error="not generated") for c in out]

    def _sample_one(self, req: GenerationRequest, ids: list[int]) -> Completion:
        """One sampled request, reseeded from its own seed (else the backend's)."""
        torch = self._torch
        try:
            if req.seed is not None or self.seed is not None:
                torch.manual_seed(req.seed if req.seed is not None else int(self.seed or 0))
            x = torch.tensor([ids], device=self.device)
            with torch.no_grad():
                gen = self.lm.generate(
                    x,
                    attention_mask=torch.ones_like(x),
                    max_new_tokens=req.max_tokens,
                    do_sample=True,
                    temperature=req.temperature,
                    top_p=None,
                    top_k=None,
                    pad_token_id=self.generator.pad_id,
                )
            return self._decoded(req, len(ids), gen[0, len(ids) :].tolist())
        except Exception as exc:  # one bad request must not sink the batch
            log.debug("hf generation failed", exc_info=True)
            return Completion(text=None, error=f"{type(exc).__name__}: {exc}")

    def _decoded(self, req: GenerationRequest, n_prompt: int, new: list[int]) -> Completion:
        """The completion of ``new`` token ids: decoded, cut at the first stop string, with its usage."""
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        finish = "length" if len(new) >= req.max_tokens else "stop"
        for s in req.stop:
            if s and s in text:
                text, finish = text[: text.index(s)], "stop"
        return Completion(text=text, finish_reason=finish, usage=Usage(n_prompt, len(new)))

    # -- log-likelihood ------------------------------------------------------------------------
    def _start_id(self) -> int:
        tok = self.tokenizer
        for tid in (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, 0):
            if tid is not None:
                return int(tid)
        return 0

    def encode_pair(self, context: str, continuations: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """Token ids of the context (with a start token) and of each continuation, encoded separately."""
        return self.encode_pairs([(context, continuations)])[0]

    def encode_pairs(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[list[int], list[list[int]]]]:
        """:meth:`encode_pair` of many requests with two tokenizer calls (a fast tokenizer encodes a list at
        once); the ids are those of encoding each string on its own."""
        stripped = [context.rstrip(" ") for context, _ in pairs]
        conts = [context[len(s) :] + c for s, (context, cs) in zip(stripped, pairs, strict=True) for c in cs]
        tok = self.tokenizer
        ctx_ids = tok(stripped, add_special_tokens=False).input_ids if stripped else []
        cont_ids = tok(conts, add_special_tokens=False).input_ids if conts else []
        limit = int(getattr(self.lm.config, "max_position_embeddings", 0) or 0)
        start = self._start_id()
        out = []
        at = 0
        for ids, (_, cs) in zip(ctx_ids, pairs, strict=True):
            ctx = [start, *(int(i) for i in ids)]
            mine = [[int(i) for i in c] for c in cont_ids[at : at + len(cs)]]
            at += len(cs)
            longest = max((len(c) for c in mine), default=0)
            if limit and len(ctx) + longest > limit:  # keep the end of the context
                ctx = ctx[-max(1, limit - longest) :]
            out.append((ctx, mine))
        return out

    def _encode_all(self, reqs: Sequence[LoglikelihoodRequest]) -> list[Item | str]:
        """Each request's :class:`Item`, or the error that its encoding raised (that request's failure alone:
        a batch the tokenizer refuses is encoded again one request at a time)."""
        t0 = time.perf_counter()
        try:
            pairs = self.encode_pairs([(r.context, r.continuations) for r in reqs])
            got: list[Item | str] = [Item(tuple(c), tuple(tuple(x) for x in o)) for c, o in pairs]
        except Exception:
            got = []
            for req in reqs:
                try:
                    ctx, conts = self.encode_pair(req.context, req.continuations)
                    got.append(Item(tuple(ctx), tuple(tuple(c) for c in conts)))
                except Exception as exc:
                    log.debug("hf encoding failed", exc_info=True)
                    got.append(f"{type(exc).__name__}: {exc}")
        self.tree.stats.add_seconds("encode", time.perf_counter() - t0)
        return got

    def _loglikelihood_sync(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """Score ``reqs`` (every request of every caller that the batcher merged) as one batch. Off the CPU the
        requests are encoded and planned in growing chunks while the device runs the passes of the chunks
        before (:meth:`TreeScorer.score_stream`); on the CPU, where a pass is computed as it is launched, at
        once (fuller passes)."""
        with self._lock:
            out: list[LoglikelihoodResult | None] = [None] * len(reqs)
            alone: list[tuple[int, Item]] = []  # scored one request at a time (their own masks)
            placed: list[tuple[int, Item]] = []  # the requests given to the batched scorer, in its order

            def chunks() -> Iterator[list[Item]]:
                for lo, hi in chunk_bounds(len(reqs), self.tree.budget, placed if self.stream_chunks else None):
                    tree: list[Item] = []
                    encoded = self._encode_all(reqs[lo:hi])
                    items = [it for it in encoded if isinstance(it, Item)]
                    batched = self.method == "prefix-tree" and bool(items) and self._tree_ok(items)
                    for n, it in enumerate(encoded, lo):
                        if isinstance(it, str):
                            out[n] = LoglikelihoodResult(logprobs=None, error=it)
                        elif batched and self._fits_tree(it):
                            tree.append(it)
                            placed.append((n, it))
                        else:
                            alone.append((n, it))
                    yield tree

            got = self.tree.score_stream(chunks(), stop=_stopping)
            for k, (n, it) in enumerate(placed):
                out[n] = self._result(it, got[k] if k < len(got) else STOPPED, "prefix-tree")
            for n, it in alone:  # longer than the model's sliding window, or another method asked for
                out[n] = self._one(it, "per-choice" if self.method == "per-choice" else "shared-prefix")
            return [r or LoglikelihoodResult(logprobs=None, error=STOPPED) for r in out]

    def _one(self, it: Item, method: str) -> LoglikelihoodResult:
        ctx, conts = list(it.ctx), [list(c) for c in it.conts]
        try:
            if method == "shared-prefix":
                try:
                    return self._result(it, self.shared_prefix_scores(ctx, conts), method)
                except (AttributeError, NotImplementedError, TypeError) as exc:
                    log.warning(
                        "%s: shared-prefix scoring unsupported by this model (%s); using per-choice", self.name, exc
                    )
                    self.method = "per-choice"
            return self._result(it, self.per_choice_scores(ctx, conts), "per-choice")
        except Exception as exc:
            log.debug("hf log-likelihood failed", exc_info=True)
            return LoglikelihoodResult(logprobs=None, error=f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _result(it: Item, scores: list[float] | str, method: str) -> LoglikelihoodResult:
        if isinstance(scores, str):  # the batch scorer's error for this request
            return LoglikelihoodResult(logprobs=None, error=scores)
        return LoglikelihoodResult(
            logprobs=scores, token_counts=[len(c) for c in it.conts], method=method, prompt_tokens=len(it.ctx)
        )

    # -- the batched scorer's settings and its once-per-model check --------------------------------------------------
    def _tree_budget(self) -> int:
        """Token positions per forward pass: ``batch_tokens`` when given, else from the device's free memory."""
        if self._batch_tokens is not None:
            return self._batch_tokens
        torch = self._torch
        if self.placement.kind != "cuda":
            return CPU_BATCH_TOKENS
        free, _total = torch.cuda.mem_get_info(torch.device(self.device))
        cfg = self.lm.config
        hidden = int(getattr(cfg, "hidden_size", 0) or 4096)
        inner = int(getattr(cfg, "intermediate_size", 0) or 4 * hidden)
        per_token = torch.finfo(getattr(torch, self.dtype)).bits // 8 * (8 * hidden + 3 * inner)
        return int(max(1024, min(GPU_BATCH_TOKENS_MAX, 0.4 * free / per_token)))

    @property
    def requests_in_flight(self) -> int:
        """Requests a grid should keep in flight to fill this backend's batches (two batches' worth)."""
        return max(64, 2 * self.tree.budget // 256)

    def _empty_cache(self) -> None:
        if self.placement.kind == "cuda":
            self._torch.cuda.empty_cache()

    def _fits_tree(self, it: Item) -> bool:
        """Whether the request is shorter than the model's sliding window (the tree mask has no window)."""
        window = getattr(self.lm.config, "sliding_window", None)
        longest = len(it.ctx) + max((len(c) for c in it.conts), default=0)
        return not isinstance(window, int) or window <= 0 or longest <= window

    def _tree_ok(self, items: Sequence[Item]) -> bool:
        """Check once per model that batched scores equal full forwards (on up to three of ``items``)."""
        if self._tree_checked is None:
            probe = [it for it in items if self._fits_tree(it)][:3]
            if not probe:
                return True
            full = {id(it): self.per_choice_scores(list(it.ctx), [list(c) for c in it.conts]) for it in probe}
            why = self.tree.check(probe, lambda it: full[id(it)], self._check_tolerance(probe, full))
            self._tree_checked = why or ""
            if why:
                log.warning("%s: prefix-tree batching is not exact for this model (%s); scoring one request at a "
                            "time (shared-prefix)", self.name, why)  # fmt: skip
                self.method = "shared-prefix"
        return not self._tree_checked

    def _check_tolerance(self, probe: Sequence[Item], full: dict[int, list[float]]) -> float:
        """How far batched scores may be from full forwards (``full``, by ``id`` of the probe's items) in the
        once-per-model check. Float32: 1e-3 nats. A 16-bit dtype: 0.25 nats, or four times the spread between
        the two exact one-request methods on the same probe (a full forward per choice, and the context's
        cache shared by its choices) where that is larger: rounding grows with depth and with the logits'
        scale (a random-initialised 7B Llama in bf16 on an H200: batched and full forwards 0.316 nats apart),
        while a mask or positions that the model ignores cost whole nats."""
        if self.dtype == "float32":
            return 1e-3
        try:
            shared = {id(it): self.shared_prefix_scores(list(it.ctx), [list(c) for c in it.conts]) for it in probe}
            spread = max(abs(a - b) for it in probe for a, b in zip(shared[id(it)], full[id(it)], strict=True))
        except Exception:  # the cache-sharing method is not available for this model: the fixed tolerance
            log.debug("hf: no shared-prefix spread for the check", exc_info=True)
            return 0.25
        return max(0.25, 4 * spread)

    def shared_prefix_scores(self, ctx: list[int], conts: list[list[int]]) -> list[float]:
        """Encode ``ctx`` once, then score all continuations from its cached keys/values (batched)."""
        torch = self._torch
        with torch.no_grad():
            first = self.lm(torch.tensor([ctx], device=self.device), use_cache=True)
            self.forwards.calls += 1
            self.forwards.tokens += len(ctx)
            last = torch.log_softmax(first.logits[0, -1].float(), dim=-1)
            scores: list[float] = [0.0] * len(conts)
            todo = [i for i, c in enumerate(conts) if c]
            for start in range(0, len(todo), self.max_batch):
                idx = todo[start : start + self.max_batch]
                width = max(len(conts[i]) for i in idx)
                if width > 1:
                    # pad on the right: real tokens never attend to the padding that follows them
                    batch = torch.tensor(
                        [conts[i][:-1] + [0] * (width - len(conts[i])) for i in idx], device=self.device
                    )
                    past = _expand_cache(first.past_key_values, len(idx), len(todo) > self.max_batch)
                    logits = self.lm(batch, past_key_values=past, use_cache=True).logits.float()
                    self.forwards.calls += 1
                    self.forwards.tokens += sum(len(conts[i]) - 1 for i in idx)
                    lp = torch.log_softmax(logits, dim=-1)
                for row, i in enumerate(idx):
                    c = conts[i]
                    total = float(last[c[0]])
                    for j in range(1, len(c)):
                        total += float(lp[row, j - 1, c[j]])
                    scores[i] = total
        return scores

    def per_choice_scores(self, ctx: list[int], conts: list[list[int]]) -> list[float]:
        """The naive reference: one full forward of context + continuation per choice."""
        torch = self._torch
        scores = []
        with torch.no_grad():
            for c in conts:
                if not c:
                    scores.append(0.0)
                    continue
                ids = ctx + c
                logits = self.lm(torch.tensor([ids], device=self.device)).logits[0].float()
                self.forwards.calls += 1
                self.forwards.tokens += len(ids)
                lp = torch.log_softmax(logits, dim=-1)
                n = len(ctx)
                scores.append(float(sum(lp[n - 1 + j, t] for j, t in enumerate(c))))
        return scores

    def scoring_stats(self) -> JSONObject:
        """Forward passes and token positions of log-likelihood scoring so far (batched and one at a time)."""
        out: JSONObject = dict(self.tree.stats.as_dict())
        out["one_at_a_time"] = {"forward_passes": self.forwards.calls, "token_positions": self.forwards.tokens}
        out["batches_taken"] = len(self._batcher.batches)
        out["generation"] = dict(self.generator.stats.as_dict())
        return out

    def close(self) -> None:
        """End the batchers' threads."""
        self._batcher.close()
        self._gen_batcher.close()

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        out = super().describe()
        out.update(
            path=str(self.path),
            fingerprint=self._fingerprint,
            device=self.device,
            dtype=self.dtype,
            placement=self.placement.describe(),
            loglikelihood_method=self.method,
            batch_tokens=self.tree.budget,
            # what scoring computed: token positions against the plain count (one full sequence per option)
            scoring=self.scoring_stats(),
        )
        # requests are not limited in flight: every shard's requests join the batcher's next batch
        out["limits"] = {"concurrency": None, "note": "in-process: batched by token positions (batch_tokens)"}
        if self.gguf is not None:
            out.update(gguf_file=str(self.gguf), file_size=self.gguf.stat().st_size)
            sha = gguf_identity(self.model, self.gguf)[1]
            if sha:
                out["sha256"] = sha
        return out


def _stopping() -> bool:
    """True once a stop (Ctrl-C / SIGTERM) was asked for: the scorer leaves the remaining passes."""
    from ragrade import interrupt

    return interrupt.requested()


def _gguf_file(model: str) -> Path | None:
    """The GGUF file ``model`` names (an embedded model or a ``.gguf`` path), None for a model folder."""
    from ragrade.llm.gguf import EMBEDDED_MODELS, resolve_gguf

    if model in EMBEDDED_MODELS or model.lower().endswith(".gguf"):
        return resolve_gguf(model)
    return None


def _gguf_chat_template(tokenizer: Any, model_type: str) -> None:
    """Give a GGUF tokenizer without a chat template the family's template (as the llamacpp backend does)."""
    from ragrade.llm.chat_template import fallback_template

    if getattr(tokenizer, "chat_template", None):
        return
    vocab = tokenizer.get_vocab()
    found = fallback_template(model_type, lambda text: text in vocab)
    if found is not None:
        tokenizer.chat_template = found[1]


def _expand_cache(past: object, n: int, keep_original: bool) -> object:
    """The context's key/value cache repeated ``n`` times along the batch (a copy when it is reused later)."""
    import copy

    if keep_original:
        past = copy.deepcopy(past)
    if n == 1:
        return past
    if hasattr(past, "batch_repeat_interleave"):
        past.batch_repeat_interleave(n)
        return past
    if isinstance(past, tuple):  # legacy tuple-of-tuples cache
        return tuple(tuple(t.repeat_interleave(n, dim=0) for t in layer) for layer in past)
    raise NotImplementedError(f"cannot expand a {type(past).__name__} cache")


__all__ = ["HFLLM", "METHODS", "ForwardStats"]
