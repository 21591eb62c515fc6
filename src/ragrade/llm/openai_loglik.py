"""Log-likelihood strategies of the OpenAI-compatible backend, each judged by what the server returned.

- **echo** (``method="echo-logprobs"``): ``/completions`` with ``echo`` and ``logprobs``; the
  reply's tokens must cover the prompt (a server that ignores ``echo`` returns only the generated
  token, which must not pass for the prompt's). Prompts go as one list per request where the
  server accepts lists, else one prompt per request (llama-cpp-python answers lists with HTTP 500).
- **forced-token** (``method="forced-token"``): for servers without prompt log-probabilities but with
  ``/tokenize`` and ``logit_bias`` (llama.cpp's ``llama-server``). Context and continuations are
  tokenised by the server as the Hugging Face backend does (a trailing space of the context moves to
  the continuations; the context gets the start token, the continuations none); then one
  ``/completions`` request per continuation token, with the token-id prompt "context + earlier
  continuation tokens", ``max_tokens=1``, ``logprobs=1`` and a ``logit_bias`` that forces the token:
  the reply's log-probability of the forced token is the model's, before the bias. The requests of a
  question run in order, so that the server's prompt cache holds the shared prefix; the first one
  computes the context afresh, so that the scores do not depend on what the server cached before
  (llama.cpp's numbers vary by up to ~0.2 nats with how a prompt was split into batches). A token
  found among the top log-probabilities of an earlier reply at the same position needs no request.
- **letter choice** (``"chat-logprobs"`` / ``"letter-choice"``): the chat endpoint picks a lettered
  option; only when the user allowed it, since it measures something else.

:class:`Unsupported` marks an answer that shows the server lacks what a strategy needs; capability
detection (:mod:`ragrade.llm.capabilities`) reads it, settled runs report it as a permanent error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragrade.io import JSONObject
from ragrade.llm.base import LoglikelihoodRequest, LoglikelihoodResult
from ragrade.llm.core import log
from ragrade.llm.limits import AuthError, PermanentError, TransientError

if TYPE_CHECKING:
    from ragrade.llm.openai_client import OpenAIClient

MISSING_SCORE = -50.0
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
FALLBACK_PROMPT = (
    "Read the text below and decide which option continues it best.\n\n"
    "{context}\n\nOptions:\n{options}\n\n"
    "Reply with the letter of the best option and nothing else."
)
FORCE_BIAS = 100  # added to the forced token's logit: far above any other token's
TOP_LOGPROBS = 20  # top log-probabilities asked with each forced token (other continuations' tokens among them)
UNSUPPORTED_STATUS = (400, 404, 405, 415, 422)
TOKEN_CACHE_CHARS, TOKEN_CACHE_SIZE = 200, 10_000  # remembered tokenisations: texts up to this long, this many


class Unsupported(PermanentError):
    """The server answered, but without what the strategy needs (``status``: the HTTP status, if any)."""


def unsupported(exc: PermanentError) -> bool:
    """True when ``exc`` can mean "this server does not support that request" (a capability fallback may help).

    Authentication errors and failures without an HTTP status (network, unreadable replies) never do.
    """
    return isinstance(exc, Unsupported) or (not isinstance(exc, AuthError) and exc.status in UNSUPPORTED_STATUS)


def refusal(exc: Exception) -> Unsupported | None:
    """``exc`` as an :class:`Unsupported` when it is a refusal of the request's shape while probing.

    A 4xx "unsupported" status and an HTTP 500 (some servers crash on what they do not support)
    qualify; authentication errors, rate limits, timeouts and network failures do not.
    """
    if isinstance(exc, Unsupported):
        return exc
    if isinstance(exc, PermanentError) and unsupported(exc):
        return Unsupported(str(exc), exc.status)
    if isinstance(exc, TransientError) and exc.status == 500:
        return Unsupported(str(exc), 500)
    return None


# -- echo --------------------------------------------------------------------------------------
async def echo_scores(llm: OpenAIClient, req: LoglikelihoodRequest, probing: bool = False) -> LoglikelihoodResult:
    """Score ``req`` from echoed prompt log-probabilities (a list of prompts, or one prompt per request)."""
    if not req.continuations:
        return LoglikelihoodResult(logprobs=[], token_counts=[], method="echo-logprobs")
    prompts = [req.context + c for c in req.continuations]
    if llm.echo_batched:
        try:
            choices = await _echo_request(llm, prompts, probing)
        except (PermanentError, TransientError) as exc:
            refused = refusal(exc)
            if refused is None:
                raise
            # the list may be what the server refuses: one prompt per request decides
            first = (await _echo_request(llm, prompts[0], probing))[0]
            _continuation_logprob(first.get("logprobs"), len(req.context), prompts[0])
            llm.echo_batched = False
            log.warning(
                "%s: the server refuses a list of prompts with echo (%s); sending one prompt per request",
                llm.name,
                refused,
            )
            choices = [first, *[(await _echo_request(llm, p, probing))[0] for p in prompts[1:]]]
    else:
        choices = [(await _echo_request(llm, p, probing))[0] for p in prompts]
    scores, counts = [], []
    for prompt, choice in zip(prompts, choices, strict=True):
        lp, n = _continuation_logprob(choice.get("logprobs"), len(req.context), prompt)
        scores.append(lp)
        counts.append(n)
    return LoglikelihoodResult(logprobs=scores, token_counts=counts, method="echo-logprobs")


async def _echo_request(llm: OpenAIClient, prompt: str | list[str], probing: bool) -> list[JSONObject]:
    """The choices of one echo request for ``prompt`` (a list of prompts or one), sorted by index."""
    body: JSONObject = {
        "model": llm.model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0,
        "echo": True,
        "logprobs": 1,
    }
    try:
        data = await llm.post_json("/completions", body)
    except (PermanentError, TransientError) as exc:
        refused = refusal(exc) if probing else None
        if refused is not None:
            raise refused from exc
        raise
    first_choice(data)  # checks the shape
    choices = sorted((as_dict(c) for c in data["choices"]), key=lambda c: count(c.get("index")))
    expected = len(prompt) if isinstance(prompt, list) else 1
    if len(choices) != expected:
        raise Unsupported(f"expected {expected} choices, got {len(choices)}")
    return choices


def _continuation_logprob(logprobs: object, ctx_len: int, prompt: str) -> tuple[float, int]:
    """Sum of the log-probabilities of the echoed tokens covering ``prompt[ctx_len:]``.

    :class:`Unsupported` unless the reply's tokens really cover the prompt: a server that ignores
    ``echo`` returns the generated token's log-probability only.
    """
    end = len(prompt)
    if not isinstance(logprobs, dict):
        raise Unsupported("the reply has no logprobs")
    tokens = [str(t) for t in logprobs.get("tokens") or []]
    lps = list(logprobs.get("token_logprobs") or [])
    offsets = list(logprobs.get("text_offset") or [])
    if not tokens or len(lps) != len(tokens):
        raise Unsupported("the reply has no per-token logprobs of the prompt (echo ignored)")
    if len(offsets) != len(tokens):
        offsets, pos = [], 0
        for tok in tokens:
            offsets.append(pos)
            pos += len(tok)
    echoed = "".join(t for t, off in zip(tokens, offsets, strict=True) if off < end)
    if offsets[0] != 0 or offsets[-1] + len(tokens[-1]) < end or (echoed != prompt and len(echoed) < end):
        raise Unsupported("the reply's tokens do not cover the prompt (echo ignored)")
    total, n = 0.0, 0
    for tok, lp, off in zip(tokens, lps, offsets, strict=True):
        if off >= end:
            break  # the generated token(s)
        if off + max(len(tok), 1) <= ctx_len:
            continue
        if lp is None:
            raise Unsupported("a continuation token has no logprob (empty context?)")
        total += float(lp)
        n += 1
    if n == 0 and end > ctx_len:
        raise Unsupported("no continuation tokens in the echoed prompt")
    return total, n


# -- forced token ------------------------------------------------------------------------------
async def tokenize(llm: OpenAIClient, text: str, add_special: bool) -> list[tuple[int, str | None]]:
    """``text`` as the server tokenises it: (id, piece) pairs (piece None when the server gives none).

    Short texts (options such as " A" recur in every question) are remembered per backend.
    """
    if llm.server_root is None:
        raise Unsupported("no server URL to find /tokenize at")
    key = (text, add_special)
    known = llm.token_cache.get(key)
    if known is not None:
        return known
    body = {"content": text, "add_special": add_special, "with_pieces": True}
    try:
        data = await llm.post_json(f"{llm.server_root}/tokenize", body, extra=False)
    except PermanentError as exc:
        raise (refusal(exc) or exc) from exc
    tokens = data.get("tokens")
    if not isinstance(tokens, list):
        raise Unsupported("/tokenize returned no token list")
    out: list[tuple[int, str | None]] = []
    for t in tokens:
        if isinstance(t, dict) and isinstance(t.get("id"), int):
            piece = t.get("piece")
            out.append((int(t["id"]), piece if isinstance(piece, str) else None))
        elif isinstance(t, int):
            out.append((t, None))
        else:
            raise Unsupported(f"/tokenize returned an unreadable token {str(t)[:40]}")
    if len(text) <= TOKEN_CACHE_CHARS:
        if len(llm.token_cache) >= TOKEN_CACHE_SIZE:
            llm.token_cache.clear()
        llm.token_cache[key] = out
    return out


async def encode_pair(
    llm: OpenAIClient, context: str, continuations: Sequence[str]
) -> tuple[list[int], list[list[tuple[int, str | None]]]]:
    """Token ids of the context (with the start token) and of each continuation, tokenised separately."""
    stripped = context.rstrip(" ")
    moved = context[len(stripped) :]
    ctx = [i for i, _ in await tokenize(llm, stripped, add_special=True)]
    conts = [await tokenize(llm, moved + c, add_special=False) for c in continuations]
    if not ctx:
        raise PermanentError("the context tokenises to nothing (the server adds no start token)")
    longest = max((len(c) for c in conts), default=0)
    if llm.n_ctx and len(ctx) + longest + 1 > llm.n_ctx:  # keep the end of the context
        ctx = ctx[-max(1, llm.n_ctx - longest - 1) :]
    return ctx, conts


async def forced_scores(llm: OpenAIClient, req: LoglikelihoodRequest) -> LoglikelihoodResult:
    """Score ``req`` one forced continuation token per request (see module docstring).

    Each reply also carries the top log-probabilities at its position (before the bias); a later
    continuation token at the same position found among them needs no request of its own.
    """
    if not req.continuations:
        return LoglikelihoodResult(logprobs=[], token_counts=[], method="forced-token")
    ctx, conts = await encode_pair(llm, req.context, req.continuations)
    todo: dict[tuple[int, ...], str | None] = {}  # continuation prefix -> piece of its last token
    for cont in conts:
        for j in range(len(cont)):
            todo.setdefault(tuple(i for i, _ in cont[: j + 1]), cont[j][1])
    seen: dict[tuple[int, ...], float] = {}  # continuation prefix -> log-prob of its last token
    for key, piece in todo.items():
        if key in seen:
            continue
        # the first request computes the context afresh (not from whatever the server cached before), the
        # others reuse it: a question's scores then do not depend on the requests that came before it
        prompt = ctx + list(key[:-1])
        seen[key], tops = await forced_logprob(llm, prompt, key[-1], piece, cache_prompt=bool(seen))
        for token, lp in tops.items():
            seen.setdefault((*key[:-1], token), lp)
    firsts = [seen[k] for k in todo if len(k) == 1]
    if len(firsts) > 1 and sum(math.exp(v) for v in firsts) > 1.05:
        raise Unsupported("the reported log-probabilities include the logit_bias (they sum above 1)")
    scores = [sum(seen[tuple(i for i, _ in cont[: j + 1])] for j in range(len(cont))) for cont in conts]
    return LoglikelihoodResult(
        logprobs=scores, token_counts=[len(c) for c in conts], method="forced-token", prompt_tokens=len(ctx)
    )


async def forced_logprob(
    llm: OpenAIClient, prompt: list[int], token: int, piece: str | None, cache_prompt: bool = True
) -> tuple[float, dict[int, float]]:
    """log P(``token`` | ``prompt``), read from a one-token completion that ``logit_bias`` forces to it, and
    the top log-probabilities at that position by token id (empty when the reply has no ids).

    ``cache_prompt``: let the server reuse what it cached of ``prompt`` (llama.cpp's prompt cache).
    """
    body: JSONObject = {
        "model": llm.model,
        "prompt": prompt,
        "max_tokens": 1,
        "logprobs": TOP_LOGPROBS,
        "logit_bias": {str(token): FORCE_BIAS},
        "temperature": 0,
        "cache_prompt": cache_prompt,
    }
    data = await llm.post_json("/completions", body)
    if cache_prompt:
        note_recomputed(llm, data.get("timings"))
    choice = first_choice(data)
    logprobs = as_dict(choice.get("logprobs"))
    content = logprobs.get("content")
    tops: dict[int, float] = {}
    if isinstance(content, list) and content:
        entry = as_dict(content[0])
        got_id, got_text, lp = entry.get("id"), entry.get("token"), entry.get("logprob")
        for top in entry.get("top_logprobs") or []:
            top = as_dict(top)
            if isinstance(top.get("id"), int) and isinstance(top.get("logprob"), (int, float)):
                tops[int(top["id"])] = float(top["logprob"])
    elif logprobs.get("token_logprobs"):
        got_id, got_text, lp = None, (logprobs.get("tokens") or [None])[0], logprobs["token_logprobs"][0]
    else:
        raise Unsupported("the reply has no logprobs of the generated token")
    if not isinstance(lp, (int, float)) or not math.isfinite(lp):
        raise Unsupported(f"the generated token has no usable logprob ({lp!r})")
    if isinstance(got_id, int):
        ok = got_id == token
    else:
        text = got_text if isinstance(got_text, str) else choice.get("text")
        ok = piece is None or not isinstance(text, str) or text == piece
    if not ok:
        shown = got_id if isinstance(got_id, int) else repr(got_text)
        raise Unsupported(f"the server ignored logit_bias (asked for token {token}, got {shown})")
    if tops.get(token, lp) != lp:  # the top list is of another distribution than the forced token's
        tops = {}
    return float(lp), tops


# -- letter choice -----------------------------------------------------------------------------
#: a request extending a cached prompt needs one position computed; llama-server with a sliding-window model
#: (Gemma 3, ...) and its default SWA cache recomputes several (5-6 seen), which makes forced-token scoring
#: about 1.3-2x slower (benchmarks/bench_real_mcq.py: 0.40x in-process speed without --swa-full, 0.53x with)
RECOMPUTE_WARN_TOKENS, RECOMPUTE_WARN_AFTER = 4, 8


def note_recomputed(llm: OpenAIClient, timings: object) -> None:
    """Count replies whose ``timings.prompt_n`` (llama-server: prompt tokens computed) shows that the server
    recomputed several tokens of a cached prompt; warn once when most do, with the setting that avoids it."""
    if not isinstance(timings, Mapping) or not isinstance(timings.get("prompt_n"), int):
        return
    seen = llm.cache_watch
    seen.replies += 1
    seen.recomputing += timings["prompt_n"] >= RECOMPUTE_WARN_TOKENS
    if not seen.warned and seen.replies >= RECOMPUTE_WARN_AFTER and 2 * seen.recomputing > seen.replies:
        seen.warned = True
        log.warning(
            "%s: the server recomputes %d prompt tokens per request that extends a cached prompt (1 is "
            "needed): a sliding-window model's cache (Gemma 3, ...) in llama-server; start llama-server with "
            "--swa-full to score options about 1.3-2x faster",
            llm.name,
            timings["prompt_n"],
        )


async def letter_choice(llm: OpenAIClient, req: LoglikelihoodRequest) -> LoglikelihoodResult:
    """Ask the chat endpoint to pick a lettered option (only when the user allowed it)."""
    n = len(req.continuations)
    if n == 0:
        return LoglikelihoodResult(logprobs=[], token_counts=[], method="letter-choice")
    if n > len(LETTERS):
        raise PermanentError(f"letter picking handles at most {len(LETTERS)} continuations, got {n}")
    options = "\n".join(f"{LETTERS[i]}. {c.strip()}" for i, c in enumerate(req.continuations))
    prompt = llm.fallback_prompt.replace("{context}", req.context.strip()).replace("{options}", options)
    body: JSONObject = {
        "model": llm.model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": 2,
    }
    data = None
    if llm.chat_logprobs and llm.loglikelihood_mode != "letter-choice":
        try:
            data = await llm.post_json("/chat/completions", {**body, "logprobs": True, "top_logprobs": 20})
        except PermanentError as exc:
            if not unsupported(exc):
                raise
            llm.chat_logprobs = False
    if data is None:
        data = await llm.post_json("/chat/completions", body)
    choice = first_choice(data)
    scores = _letter_logprobs(choice.get("logprobs"), n)
    if scores is not None:
        return LoglikelihoodResult(logprobs=scores, token_counts=[1] * n, method="chat-logprobs")
    text = (message_text(as_dict(choice.get("message")).get("content")) or "").strip()
    m = re.match(r"[\s(\[]*([A-Z])\b", text.upper())
    if not m or LETTERS.index(m.group(1)) >= n:
        raise PermanentError(f"could not read an option letter from the reply {text[:60]!r}")
    picked = LETTERS.index(m.group(1))
    return LoglikelihoodResult(
        logprobs=[0.0 if i == picked else MISSING_SCORE for i in range(n)],
        token_counts=[1] * n,
        method="letter-choice",
    )


def _letter_logprobs(logprobs: object, n: int) -> list[float] | None:
    """Scores of the option letters from the first generated token's top log-probabilities, if present."""
    content = as_dict(logprobs).get("content")
    if not content or not isinstance(content, list):
        return None
    best: dict[str, float] = {}
    for entry in content[:2]:
        for top in as_dict(entry).get("top_logprobs") or []:
            top = as_dict(top)
            if top.get("logprob") is None:
                continue
            letter = str(top.get("token", "")).strip().strip(".):(").upper()
            if len(letter) == 1 and letter in LETTERS[:n]:
                best[letter] = max(best.get(letter, -1e9), float(top["logprob"]))
        if best:
            break
    if not best:
        return None
    return [best.get(LETTERS[i], MISSING_SCORE) for i in range(n)]


# -- reply helpers -----------------------------------------------------------------------------
def first_choice(data: Mapping[str, object]) -> JSONObject:
    """The first choice of a reply; TransientError when the reply has none (or is an error object)."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        err = data.get("error")
        if err:
            message = err.get("message", err) if isinstance(err, dict) else err
            raise TransientError(f"server error in the reply: {str(message)[:300]}")
        raise TransientError("unreadable response: no choices")
    first: JSONObject = choices[0]
    return first


def as_dict(value: object) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty dict."""
    return value if isinstance(value, dict) else {}


def count(value: Any) -> int:
    """A token count or index from a reply (0 when absent or not a number)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def message_text(content: object) -> str | None:
    """A chat message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise TransientError(f"unreadable response: message content is a {type(content).__name__}")


__all__ = [
    "FALLBACK_PROMPT",
    "LETTERS",
    "MISSING_SCORE",
    "Unsupported",
    "echo_scores",
    "encode_pair",
    "forced_logprob",
    "forced_scores",
    "letter_choice",
    "refusal",
    "tokenize",
    "unsupported",
]
