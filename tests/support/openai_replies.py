"""Pure helpers of the test server (:mod:`tests.support.openai_server`): its tokenizer, log-probabilities,
embeddings and reply shapes, all deterministic."""

from __future__ import annotations

import hashlib
import math
import re
import threading
from typing import Any

_TOKEN_RE = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^\sA-Za-z0-9_]|\s+")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into tokens whose concatenation equals ``text`` (words and punctuation, with leading space)."""
    return _TOKEN_RE.findall(text)


def token_logprob(prev: str, tok: str) -> float:
    """A deterministic log-probability in (-6, -0.01] for ``tok`` following ``prev``."""
    digest = hashlib.sha256(f"{prev}\x00{tok}".encode()).digest()
    return -0.01 - (int.from_bytes(digest[:4], "big") % 5990) / 1000.0


def embed_text(text: str, dim: int) -> list[float]:
    """A deterministic L2-normalised vector for ``text`` (hash based)."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        digest = hashlib.sha256(f"{counter}\x00{text}".encode()).digest()
        for i in range(0, len(digest), 2):
            out.append(int.from_bytes(digest[i : i + 2], "big") / 65535.0 - 0.5)
        counter += 1
    vec = out[:dim]
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def default_reply(body: dict[str, Any]) -> str:
    """The default deterministic reply: a short sentence derived from the prompt."""
    text = prompt_text(body)
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    words = text.split()
    tail = " ".join(words[-6:]) if words else ""
    return f"Answer {digest}: {tail}".strip()


def prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        parts = []
        for m in body.get("messages") or []:
            content = m.get("content", "")
            if isinstance(content, list):  # content parts
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            parts.append(f"{m.get('role', 'user')}: {content}")
        return "\n".join(parts)
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return str(prompt[0]) if prompt else ""
    return str(prompt)


def logprobs_object(p_toks: list[str], c_toks: list[str], echo: bool) -> dict[str, Any]:
    """Legacy completions ``logprobs`` object for the (echoed) prompt and continuation tokens."""
    toks = (p_toks if echo else []) + c_toks
    context = ["", *p_toks, *c_toks] if echo else [(p_toks or [""])[-1], *c_toks]
    lps: list[float | None] = [token_logprob(p, t) for p, t in zip(context, toks, strict=False)]
    if echo and lps:
        lps[0] = None  # like vLLM/OpenAI: the first prompt token has no logprob
    offsets, pos = [], 0
    for t in toks:
        offsets.append(pos)
        pos += len(t)
    return {
        "tokens": toks,
        "token_logprobs": lps,
        "text_offset": offsets,
        "top_logprobs": [None if lp is None else {t: lp} for t, lp in zip(toks, lps, strict=True)],
    }


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def limit(text: str, body: dict[str, Any]) -> tuple[str, str]:
    """Apply ``stop`` and ``max_tokens`` to a reply; return (text, finish_reason)."""
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    for s in stop:
        if s and s in text:
            text = text[: text.index(s)]
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    toks = tokenize(text)
    if isinstance(max_tokens, int) and 0 < max_tokens < len(toks):
        return "".join(toks[:max_tokens]), "length"
    return text, "stop"


class Vocab:
    """Token ids of :func:`tokenize`'s pieces, handed out as they are first seen (1 is the start token):
    what ``/tokenize``, token-id prompts and ``logit_bias`` of a llama.cpp-like test server use."""

    START = "<bos>"

    def __init__(self) -> None:
        self.ids: dict[str, int] = {self.START: 1}
        self.pieces: dict[int, str] = {1: self.START}
        self._lock = threading.Lock()

    def id(self, piece: str) -> int:
        """The id of ``piece`` (a new one the first time)."""
        with self._lock:
            if piece not in self.ids:
                self.ids[piece] = len(self.ids) + 1
                self.pieces[self.ids[piece]] = piece
            return self.ids[piece]

    def encode(self, text: str, add_special: bool) -> list[dict[str, Any]]:
        """``/tokenize``'s token list (``id`` and ``piece``), the start token first when ``add_special``."""
        pieces = ([self.START] if add_special else []) + tokenize(text)
        return [{"id": self.id(p), "piece": p} for p in pieces]

    def forced_choice(self, prompt: list[int], bias: dict[str, Any], honour: bool) -> dict[str, Any]:
        """A one-token completion of the token-id ``prompt`` in llama.cpp's shape: the token ``bias`` forces
        (unless not ``honour``-ed: then " the"), with its log-probability before the bias."""
        prev = next((self.pieces.get(i, "") for i in reversed(prompt) if i != 1), "")
        forced = [int(k) for k, v in bias.items() if float(v) >= 50]
        piece = self.pieces[forced[0]] if forced and honour and forced[0] in self.pieces else " the"
        entry = {"id": self.id(piece), "token": piece, "logprob": token_logprob(prev, piece)}
        logprobs = {"content": [{**entry, "top_logprobs": [entry]}]}
        return {"index": 0, "text": piece, "logprobs": logprobs, "finish_reason": "length"}


__all__ = [
    "Vocab",
    "default_reply",
    "embed_text",
    "limit",
    "logprobs_object",
    "prompt_text",
    "token_logprob",
    "tokenize",
    "usage",
]
