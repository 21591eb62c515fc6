"""What an OpenAI-compatible server can really do, judged by its answers rather than by what was asked.

- :func:`server_root` and :func:`fetch_slots`: the server's root URL (the base URL without ``/v1``)
  and the slots it advertises (llama.cpp's ``GET /props`` ``total_slots``, else the length of
  ``GET /slots``), read once per backend with a short timeout; any failure (404 on other servers)
  just means "not advertised".
- :func:`detect_loglikelihood`: settles how the backend scores log-likelihoods, with a short probe
  request before the first batch: echoed prompt log-probabilities (a list of prompts, or one prompt
  per request), else forced-token scoring, else letter picking when the user allowed it, else none:
  every request then fails with one error that names what was tried and the way out. A probe that
  failed for another reason (timeout, network, rejected key) settles nothing: the request it stood
  for fails with that error, and the next one probes again.
- :func:`probe_capabilities`: the report of ``ragrade llm probe``; a capability holds only when the
  server's reply is usable (:func:`text_verdict`: no leaked chat-template token; for JSON output not
  empty), and ``notes`` say why one does not. An empty reply to a plain generation is the model's answer
  (:func:`answer_verdict`): the capability holds, with a note.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from ragrade.errors import render_settings
from ragrade.io import JSONObject
from ragrade.llm.base import LoglikelihoodRequest, LoglikelihoodResult
from ragrade.llm.core import log
from ragrade.llm.limits import PermanentError, TransientError
from ragrade.llm.openai_loglik import (
    Unsupported,
    as_dict,
    echo_scores,
    first_choice,
    forced_scores,
    message_text,
    tokenize,
)
from ragrade.llm.pacing import LETTER_HINT
from ragrade.llm.replies import leaked_template_token

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ragrade.llm.openai_client import OpenAIClient

NO_SLOT_PROBE_HOSTS = ("openai.com", "azure.com")  # hosted APIs: no llama.cpp endpoints to look for
SLOT_PROBE_TIMEOUT_S = 5.0
#: names settings as ``$name`` (see :mod:`ragrade.errors`): the error it ends is raised later, by a grid's tally
PROBE_CONTEXT = "The sky on a clear day is"
PROBE_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def server_root(url: str | None) -> str | None:
    """The server's root URL: ``url`` without a trailing ``/v1`` (where llama.cpp serves ``/tokenize``)."""
    if not url:
        return None
    parts = urllib.parse.urlsplit(url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


async def fetch_slots(llm: OpenAIClient) -> tuple[int | None, int | None]:
    """``(slots, context size per slot)`` the server advertises, ``(None, None)`` when it says nothing."""
    root = llm.server_root
    host = urllib.parse.urlsplit(root or "").hostname or ""
    if root is None or host.endswith(NO_SLOT_PROBE_HOSTS):
        return None, None
    props = await llm.get_json(f"{root}/props", SLOT_PROBE_TIMEOUT_S)
    if isinstance(props, dict) and isinstance(props.get("total_slots"), int):
        n_ctx = as_dict(props.get("default_generation_settings")).get("n_ctx")
        return int(props["total_slots"]), n_ctx if isinstance(n_ctx, int) else None
    slots = await llm.get_json(f"{root}/slots", SLOT_PROBE_TIMEOUT_S)
    if isinstance(slots, list) and slots:
        n_ctx = as_dict(slots[0]).get("n_ctx")
        return len(slots), n_ctx if isinstance(n_ctx, int) else None
    return None, None


# -- log-likelihood ----------------------------------------------------------------------------
async def _attempt(
    llm: OpenAIClient, make: Callable[[], Awaitable[LoglikelihoodResult]], budget: float
) -> LoglikelihoodResult | Unsupported:
    """One strategy under the limiter: its result, the refusal it met, or a failed result (other errors)."""

    async def run() -> LoglikelihoodResult | Unsupported:
        try:
            return await make()
        except Unsupported as exc:
            return exc  # the server answered: no retry, and it counts as reachable
        except (TypeError, ValueError, KeyError, IndexError) as exc:  # odd values in a well-formed reply
            return Unsupported(f"unreadable reply: {type(exc).__name__}: {str(exc)[:200]}")

    outcome = await llm.limiter.call(run, timeout=budget)
    if isinstance(outcome.value, Unsupported):
        return outcome.value
    return llm.loglik_result(outcome)  # type: ignore[arg-type]


async def detect_loglikelihood(llm: OpenAIClient) -> str | None:
    """Settle ``llm.loglikelihood_mode`` on a short probe request (cheap whatever the real contexts are).

    Returns None once settled, else the error that left it open: a failure that says nothing about
    the server's capabilities (timeout, network, rejected key, nothing but server errors).
    """
    probe = LoglikelihoodRequest(PROBE_CONTEXT, (" blue", " green"))
    budget = llm.loglikelihood_budget(probe)
    tried: list[str] = []
    answered = False
    steps = (
        ("echo", "echo+logprobs on /completions", partial(echo_scores, llm, probe, True)),
        ("forced-token", "forced-token scoring (/tokenize + logit_bias)", partial(forced_scores, llm, probe)),
    )
    for mode, label, make in steps:
        got = await _attempt(llm, make, budget)
        if isinstance(got, LoglikelihoodResult):
            if not got.ok:
                return got.error or "the log-likelihood probe failed"
            llm.loglikelihood_mode = mode
            how = ("a list of prompts" if llm.echo_batched else "one prompt") if mode == "echo" else label
            log.info("%s: log-likelihoods by %s (%s per request)", llm.name, mode, how)
            return None
        tried.append(f"{label}: {got}")
        answered = answered or got.status != 500
    if not answered:  # nothing but server errors: no evidence either way
        return f"every log-likelihood probe failed ({'; '.join(tried)})"
    if llm.letter_fallback:
        llm.loglikelihood_mode = "chat-logprobs"
        log.warning(
            "%s: the server returns no usable prompt log-probabilities (%s); picking lettered options on the "
            "chat endpoint instead, as letter_fallback allows",
            llm.name,
            "; ".join(tried),
        )
        return None
    llm.loglikelihood_mode = "none"
    what = "; ".join(tried)
    llm.no_loglikelihood = f"{llm.name}: the server cannot score log-likelihoods (tried {what}); {LETTER_HINT}"
    log.error("%s", render_settings(llm.no_loglikelihood))
    return None


# -- the probe report --------------------------------------------------------------------------
async def _ask(llm: OpenAIClient, path: str, body: Mapping[str, object]) -> tuple[JSONObject | None, str | None]:
    """POST under the limiter: ``(reply, None)`` or ``(None, error)``."""
    outcome = await llm.limiter.call(partial(llm.post_json, path, {"model": llm.model, "temperature": 0, **body}))
    return outcome.value, outcome.error


def _text(data: Mapping[str, object] | None) -> str | None:
    if data is None:
        return None
    try:
        choice = first_choice(data)
        message = as_dict(choice.get("message"))
        text = message_text(message.get("content")) if "message" in choice else choice.get("text")
    except TransientError:
        return None
    return text if isinstance(text, str) else None


def text_verdict(text: str | None, error: str | None = None) -> tuple[bool, str | None]:
    """Whether a generated reply is usable, and why not: the request failed, the reply is empty, or it
    shows a chat-template token (the server does not apply the model's template or stop at its turn end)."""
    if error is not None or text is None:
        return False, f"the request failed: {error or 'no text in the reply'}"
    if not text.strip():
        return False, "the reply is empty"
    token = leaked_template_token(text)
    if token is not None:
        return False, (
            f"the reply contains the chat-template token {token!r} (the server does not apply the model's "
            "chat template or does not stop at its end of turn)"
        )
    return True, None


#: the note of a generation that succeeded with an empty reply: the model's answer, not a missing capability
EMPTY_REPLY = (
    "the model ended its reply at once: an empty reply is the model's answer, not a missing capability "
    "(a base model often does so on a chat prompt)"
)


def answer_verdict(text: str | None, error: str | None = None) -> tuple[bool, str | None]:
    """:func:`text_verdict` for a plain generation: an empty reply to a request that succeeded is usable, with
    :data:`EMPTY_REPLY` as its note (JSON output keeps :func:`text_verdict`: an empty reply is no JSON)."""
    if error is None and text is not None and not text.strip():
        return True, EMPTY_REPLY
    return text_verdict(text, error)


def _json_object(text: str | None) -> bool:
    try:
        return isinstance(json.loads(text or ""), dict)
    except ValueError:
        return False


async def _json_output(llm: OpenAIClient, path: str, fmt: Mapping[str, object]) -> tuple[bool, str | None]:
    if path == "/chat/completions":
        ask: JSONObject = {"messages": [{"role": "user", "content": "Name a colour. Reply in JSON."}]}
    else:
        ask = {"prompt": "A colour, as JSON:"}
    data, error = await _ask(llm, path, {**ask, "max_tokens": 24, "response_format": fmt})
    text = _text(data)
    usable, why = text_verdict(text, error)
    if not usable or text is None:
        return False, why
    if _json_object(text):
        return True, None
    if text.lstrip().startswith("{"):
        return True, "the reply is cut short but begins a JSON object"
    return False, f"the reply is not JSON, the server ignored response_format: {text[:60]!r}"


async def _logit_bias(llm: OpenAIClient) -> tuple[bool | None, str | None]:
    try:
        [(token, piece)] = (await tokenize(llm, " green", add_special=False))[:1]
    except (PermanentError, TransientError, ValueError) as exc:
        return None, f"not checked: no /tokenize to pick a token id ({exc})"
    body = {"prompt": PROBE_CONTEXT, "max_tokens": 1, "logprobs": 1, "logit_bias": {str(token): 100}}
    data, error = await _ask(llm, "/completions", body)
    if data is None:
        return False, error
    content = as_dict(first_choice(data).get("logprobs")).get("content")
    got = as_dict(content[0]).get("id") if isinstance(content, list) and content else None
    ok = got == token if isinstance(got, int) else _text(data) == piece
    return ok, None if ok else "the forced token was not generated"


async def probe_capabilities(llm: OpenAIClient) -> dict[str, Any]:
    """Each capability of the server: chat, completions, prompt log-probabilities (and by which method),
    JSON output by schema and by object, logit_bias, slots; ``notes`` say why one is missing.

    Log-likelihood detection must have run already (the probe command scores one request first).
    """
    caps: JSONObject = {}
    notes: dict[str, str] = {}
    async with llm.batch_session():
        hello = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        chat, chat_error = await _ask(llm, "/chat/completions", hello)
        completion, completion_error = await _ask(llm, "/completions", {"prompt": PROBE_CONTEXT, "max_tokens": 4})
        for key, data, error in (("chat", chat, chat_error), ("completions", completion, completion_error)):
            caps[key], why = answer_verdict(_text(data), error)
            if why:
                notes[key] = why
        caps["prompt_logprobs"] = llm.prompt_logprobs_method()
        if llm.no_loglikelihood:
            notes["prompt_logprobs"] = render_settings(llm.no_loglikelihood)
        path = "/chat/completions" if _text(chat) is not None else "/completions"  # the chat endpoint answers
        schema = {"type": "json_schema", "json_schema": {"name": "answer", "schema": PROBE_SCHEMA, "strict": False}}
        for key, fmt in (("json_schema", schema), ("json_object", {"type": "json_object"})):
            caps[key], note = await _json_output(llm, path, fmt)
            if note:
                notes[key] = note
        caps["logit_bias"], note = await _logit_bias(llm)
        if note:
            notes["logit_bias"] = note
    caps["slots"] = llm.slots
    if notes:
        caps["notes"] = notes
    return caps


__all__ = [
    "EMPTY_REPLY",
    "LETTER_HINT",
    "answer_verdict",
    "detect_loglikelihood",
    "fetch_slots",
    "probe_capabilities",
    "server_root",
    "text_verdict",
]
