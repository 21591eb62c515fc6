"""The local Hugging Face transformers backend (``hf/<model path>``), CPU or GPU.

Generation applies the tokenizer's chat template to ``messages`` (a plain
``role: content`` layout when the tokenizer has none). Log-likelihood encodes the
shared context once and scores every continuation from its cached keys/values in
one batched forward (``shared-prefix``): for a 500-token context and four short
options that is ~500 + 4x(option) token positions instead of 4x(500 + option) for
the naive ``per-choice`` method, which stays available as a reference and as the
fallback for architectures whose cache cannot be expanded. Both tokenise
context and continuations separately (a trailing space of the context moves to
the continuations), so they produce the same numbers.

Models are loaded from a local path only (no download): a model folder, or a GGUF file
(``hf/PATH.gguf``, or ``hf/gemma-3-270m`` for the embedded model) that transformers' GGUF loader
dequantises (to float32 by default; needs ``pip install 'ragrade[gguf]'``). A GGUF tokenizer without a
chat template gets its family's template, as in the ``llamacpp`` backend.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrade.deps import require
from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.llm.cache import ResponseCache
from ragrade.llm.core import BaseLLM, log
from ragrade.llm.gguf import model_label
from ragrade.llm.limits import LimitConfig
from ragrade.llm.llamacpp import gguf_identity

METHODS = ("shared-prefix", "per-choice")


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
        device: str = "cpu",
        dtype: str = "float32",
        loglikelihood_method: str = "shared-prefix",
        max_batch: int = 32,
        trust_remote_code: bool = False,
    ) -> None:
        super().__init__(model, cache=cache, limits=limits, seed=seed)
        self.gguf = _gguf_file(model)  # a GGUF file (embedded name or *.gguf path), loaded dequantised
        path = self.gguf.parent if self.gguf is not None else Path(model).expanduser()
        if self.gguf is None and not path.is_dir():
            raise ConfigError(
                f"hf/{model}: no model folder at {path} (the hf provider loads local folders and .gguf files only)"
            )
        if loglikelihood_method not in METHODS:
            raise ConfigError(f"loglikelihood_method must be one of {', '.join(METHODS)}, got '{loglikelihood_method}'")
        self.path = path
        self.device = device
        self.dtype = dtype
        self.method = loglikelihood_method
        self.max_batch = max_batch
        self.seed = seed
        self.forwards = ForwardStats()
        self._fingerprint = _fingerprint(path) if self.gguf is None else gguf_identity(model, self.gguf)[0]
        self._lock = threading.Lock()
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
            self.lm = tf.AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype), **load_kw).to(
                device
            )
        except (OSError, ValueError) as exc:
            raise ConfigError(f"hf/{model}: cannot load the model or tokenizer: {str(exc).splitlines()[0]}") from exc
        self.lm.eval()
        if self.gguf is not None:
            _gguf_chat_template(self.tokenizer, str(getattr(self.lm.config, "model_type", "")))
        self._torch = torch

    def _identity(self) -> JSONObject:
        return {"provider": self.provider, "model": self._fingerprint, "dtype": self.dtype}

    # -- generation ----------------------------------------------------------------------------
    async def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        return await asyncio.to_thread(self._locked, self._generate_sync, reqs)

    async def _loglikelihood_batch(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        return await asyncio.to_thread(self._locked, self._loglikelihood_sync, reqs)

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
        torch = self._torch
        out = []
        for req in reqs:
            try:
                ids = self._prompt_ids(req)
                if not ids:
                    ids = [self._start_id()]
                if req.seed is not None or self.seed is not None:
                    torch.manual_seed(req.seed if req.seed is not None else int(self.seed or 0))
                x = torch.tensor([ids], device=self.device)
                pad = self.tokenizer.pad_token_id
                pad = pad if pad is not None else self.tokenizer.eos_token_id
                with torch.no_grad():
                    gen = self.lm.generate(
                        x,
                        attention_mask=torch.ones_like(x),
                        max_new_tokens=req.max_tokens,
                        do_sample=req.temperature > 0,
                        temperature=req.temperature if req.temperature > 0 else None,
                        top_p=None,
                        top_k=None,
                        pad_token_id=pad,
                    )
                new = gen[0, len(ids) :].tolist()
                text = self.tokenizer.decode(new, skip_special_tokens=True)
                finish = "length" if len(new) >= req.max_tokens else "stop"
                for s in req.stop:
                    if s and s in text:
                        text, finish = text[: text.index(s)], "stop"
                out.append(Completion(text=text, finish_reason=finish, usage=Usage(len(ids), len(new))))
            except Exception as exc:  # one bad request must not sink the batch
                log.debug("hf generation failed", exc_info=True)
                out.append(Completion(text=None, error=f"{type(exc).__name__}: {exc}"))
        return out

    # -- log-likelihood ------------------------------------------------------------------------
    def _start_id(self) -> int:
        tok = self.tokenizer
        for tid in (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, 0):
            if tid is not None:
                return int(tid)
        return 0

    def encode_pair(self, context: str, continuations: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """Token ids of the context (with a start token) and of each continuation, encoded separately."""
        stripped = context.rstrip(" ")
        moved = context[len(stripped) :]
        conts = [moved + c for c in continuations]
        tok = self.tokenizer
        ctx_ids = [self._start_id()] + [int(i) for i in tok(stripped, add_special_tokens=False).input_ids]
        cont_ids = [[int(i) for i in tok(c, add_special_tokens=False).input_ids] for c in conts]
        limit = int(getattr(self.lm.config, "max_position_embeddings", 0) or 0)
        longest = max((len(c) for c in cont_ids), default=0)
        if limit and len(ctx_ids) + longest > limit:  # keep the end of the context
            keep = max(1, limit - longest)
            ctx_ids = ctx_ids[-keep:]
        return ctx_ids, cont_ids

    def _loglikelihood_sync(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        out = []
        for req in reqs:
            try:
                ctx, conts = self.encode_pair(req.context, req.continuations)
                if self.method == "shared-prefix":
                    try:
                        scores = self.shared_prefix_scores(ctx, conts)
                        method = "shared-prefix"
                    except (AttributeError, NotImplementedError, TypeError) as exc:
                        log.warning(
                            "%s: shared-prefix scoring unsupported by this model (%s); using per-choice", self.name, exc
                        )
                        self.method = "per-choice"
                        scores, method = self.per_choice_scores(ctx, conts), "per-choice"
                else:
                    scores, method = self.per_choice_scores(ctx, conts), "per-choice"
                out.append(LoglikelihoodResult(logprobs=scores, token_counts=[len(c) for c in conts], method=method))
            except Exception as exc:
                log.debug("hf log-likelihood failed", exc_info=True)
                out.append(LoglikelihoodResult(logprobs=None, error=f"{type(exc).__name__}: {exc}"))
        return out

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

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        out = super().describe()
        out.update(
            path=str(self.path),
            fingerprint=self._fingerprint,
            device=self.device,
            dtype=self.dtype,
            loglikelihood_method=self.method,
        )
        if self.gguf is not None:
            out.update(gguf_file=str(self.gguf), file_size=self.gguf.stat().st_size)
            sha = gguf_identity(self.model, self.gguf)[1]
            if sha:
                out["sha256"] = sha
        return out


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
