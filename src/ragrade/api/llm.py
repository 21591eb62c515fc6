"""LLM backends and their response cache (``ragrade llm probe``, ``cache info``, ``cache clear``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.errors import ConfigError

if TYPE_CHECKING:
    from ragrade.llm.base import LLM, LoglikelihoodResult
    from ragrade.llm.options import LLMOptions

#: what :func:`probe_llm` can be asked to require
PROBE_NEEDS = ("generate", "loglikelihood", "json")
#: a probe answers quickly: the run defaults of LLMOptions with a shorter timeout, one retry and no cache
PROBE_OPTIONS: dict[str, Any] = {"timeout": 30.0, "max_retries": 1, "cache": False}


@dataclass(frozen=True)
class CacheInfo:
    """Where the response cache is, whether it exists yet, and what it holds (entries per provider/model/kind)."""

    path: Path
    exists: bool
    entries: int
    bytes: int
    by_model: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``ragrade cache info --json`` prints."""
        return {
            "path": str(self.path),
            "entries": self.entries,
            "bytes": self.bytes,
            "by_model": self.by_model,
            "exists": self.exists,
        }


def cache_info(cache_dir: str | Path | None = None) -> CacheInfo:
    """What the LLM response cache holds (``ragrade cache info``); ``cache_dir`` defaults to
    ``$RAGRADE_CACHE_DIR`` or ``~/.cache/ragrade``."""
    from ragrade.llm.cache import ResponseCache, default_cache_path

    path = default_cache_path(cache_dir)
    if not path.exists():
        return CacheInfo(path, False, 0, 0)
    store = ResponseCache(path)
    try:
        info: dict[str, Any] = dict(store.info())
    finally:
        store.close()
    return CacheInfo(Path(info["path"]), True, int(info["entries"]), int(info["bytes"]), list(info["by_model"]))


@dataclass(frozen=True)
class ClearedCache:
    """What :func:`clear_cache` did: the cache's path, whether it existed, and the responses deleted."""

    path: Path
    exists: bool
    deleted: int


def clear_cache(cache_dir: str | Path | None = None, *, llm: str | None = None) -> ClearedCache:
    """Delete cached LLM responses (``ragrade cache clear``): all, or those of one PROVIDER/MODEL ``llm``."""
    from ragrade.llm import parse_spec
    from ragrade.llm.cache import ResponseCache, default_cache_path

    path = default_cache_path(cache_dir)
    if not path.exists():
        return ClearedCache(path, False, 0)
    provider, model = parse_spec(llm) if llm else (None, None)
    store = ResponseCache(path)
    try:
        deleted = store.clear(provider=provider, model=model)
    finally:
        store.close()
    return ClearedCache(path, True, deleted)


@dataclass(frozen=True)
class ProbeReport:
    """What :func:`probe_llm` found: ``report`` (the backend, the generation and log-likelihood requests and
    their verdicts, each capability, what was needed and what is missing; the JSON ``ragrade llm probe``
    prints) and ``missing`` (each needed capability that is not usable, with the reason)."""

    name: str
    report: dict[str, Any]
    missing: dict[str, str]

    def check(self) -> None:
        """BackendError (exit 2) when something the probe was told to need is not usable."""
        from ragrade.errors import BackendError

        if self.missing:
            why = "; ".join(f"{k}: {v}" for k, v in sorted(self.missing.items()))
            raise BackendError(f"{self.name} cannot serve what $need asks ({why})")


def probe_llm(
    llm: str,
    *,
    llm_options: LLMOptions | Mapping[str, Any] | None = None,
    need: Sequence[str] = ("generate",),
    check: bool = True,
    options: LLMOptions | Mapping[str, Any] | None = None,
) -> ProbeReport:
    """Send a few requests to ``llm`` (PROVIDER/MODEL) and report each capability of the backend
    (``ragrade llm probe``).

    For an OpenAI-compatible server: chat, completions, prompt log-probabilities and by which method, JSON
    output by schema and by object, logit_bias and the server's slots; for other backends what a generation
    and a log-likelihood request showed. ``llm_options``: an :class:`~ragrade.llm.options.LLMOptions` or its
    fields over :data:`PROBE_OPTIONS` (a 30 s timeout, one retry, no cache), named as every other verb of the API
    names them (``options``, its old name, is read with a deprecation line). ``need``: what the model must
    serve (generate, loglikelihood, json); BackendError when one is not usable (``check=False``: the report
    anyway; ``report.check()`` raises then).
    """
    from ragrade.config import build_config
    from ragrade.llm import GenerationRequest, LLMOptions, LoglikelihoodRequest, Message, create_llm, generate
    from ragrade.llm import loglikelihood as _loglikelihood
    from ragrade.llm.capabilities import answer_verdict

    unknown = [n for n in need if n not in PROBE_NEEDS]
    if unknown:
        raise ConfigError(f"$need takes a comma list of {', '.join(PROBE_NEEDS)}; got '{unknown[0]}'")
    if options is not None:
        from ragrade.config import deprecated

        if llm_options is not None:
            raise ConfigError("probe_llm takes llm_options (options is its old name), not both")
        deprecated("probe_llm(options=...) is the old name of llm_options=; it is read until the next release")
    options = llm_options if llm_options is not None else options
    if not isinstance(options, LLMOptions):
        options = build_config(LLMOptions, PROBE_OPTIONS, dict(options or {}), source="probe options")
    model = create_llm(llm, options)  # the spec, its options and the model file are checked before it loads
    ask = "Reply with the word ready."
    [gen] = generate(
        model, [GenerationRequest(messages=(Message("user", ask),), max_tokens=8, question=ask, passages=("ready",))]
    )
    sky = "The sky on a clear day is"
    [ll] = _loglikelihood(model, [LoglikelihoodRequest(sky, (" blue", " green"), question=f"{sky} ____.")])
    gen_ok, gen_why = answer_verdict(gen.text, gen.error)
    note = None
    if gen_ok and gen_why is not None:  # an empty reply: the model's answer; a second prompt tells more
        gen_ok, gen_why, note = _second_prompt(model, gen_why)
    caps = _capabilities(model, gen_ok, ll, "json" in need)
    missing = _missing(list(need), gen_why, ll, caps)
    report = {
        "llm": model.describe(),
        "generate": {
            "ok": gen_ok,
            "reason": gen_why,
            "note": note,
            "text": gen.text,
            "error": gen.error,
            "latency_s": round(gen.latency_s, 3),
        },
        "loglikelihood": {
            "ok": ll.ok,
            "reason": None if ll.ok else ll.error,
            "method": ll.method,
            "logprobs": ll.logprobs,
            "error": ll.error,
            "latency_s": round(ll.latency_s, 3),  # beside generate's: what one request of each kind costs here
        },
        "capabilities": caps,
        "need": list(need),
        "missing": sorted(missing),
    }
    result = ProbeReport(model.name, report, missing)
    if check:
        result.check()
    return result


def _second_prompt(model: LLM, empty: str) -> tuple[bool, str | None, str]:
    """After an empty reply (``empty``: its note), one more prompt that invites text: ``(usable, why not, note)``.

    Text that shows a chat-template token is not usable (as on the first reply); text, another empty reply or
    a failed request leave generation usable: the server generated, the model chose to say nothing."""
    from ragrade.llm import GenerationRequest, Message, generate
    from ragrade.llm.capabilities import text_verdict

    ask = "Write one sentence about the sea."
    [again] = generate(model, [GenerationRequest(messages=(Message("user", ask),), max_tokens=24, question=ask)])
    ok, why = text_verdict(again.text, again.error)
    if ok:
        return True, None, f"the first reply was empty; a second prompt got text: {(again.text or '').strip()[:80]!r}"
    if again.error is None and again.text is not None and not again.text.strip():
        return True, None, empty
    if again.error is not None:
        return True, None, f"{empty}; a second prompt failed ({again.error})"
    return False, why, empty


def _capabilities(model: LLM, gen_ok: bool, ll: LoglikelihoodResult, check_json: bool) -> dict[str, object]:
    """Each capability of ``model``: the full probe for an OpenAI-compatible server, else what the
    generation (``gen_ok``: its verdict) and log-likelihood requests showed (and JSON output, when asked)."""
    from ragrade.llm import GenerationRequest, Message, generate, run_sync
    from ragrade.llm.openai import OpenAILLM

    if isinstance(model, OpenAILLM):
        from ragrade.llm.capabilities import probe_capabilities

        return run_sync(probe_capabilities(model))
    caps: dict[str, object] = {"generate": gen_ok}
    caps["prompt_logprobs"] = ll.method if ll.ok else "none"
    if check_json:
        from ragrade.llm.capabilities import PROBE_SCHEMA

        ask = GenerationRequest(messages=(Message("user", "Name a colour. Reply in JSON."),), json_schema=PROBE_SCHEMA)
        [reply] = generate(model, [ask])
        caps["json_schema"] = _is_json_object(reply.text)
    return caps


def _is_json_object(text: str | None) -> bool:
    import json

    try:
        return isinstance(json.loads(text or ""), dict)
    except ValueError:
        return False


def _missing(
    needs: list[str], gen_why: str | None, ll: LoglikelihoodResult, caps: Mapping[str, object]
) -> dict[str, str]:
    """What ``needs`` names that the probe did not find usable, with the reason (``gen_why``: generation's)."""
    notes = caps.get("notes")
    if not isinstance(notes, dict):  # the full probe's reasons; none from the short one
        notes = {}
    missing: dict[str, str] = {}
    if "generate" in needs and gen_why is not None:
        missing["generate"] = gen_why
    if "loglikelihood" in needs and not ll.ok:
        missing["loglikelihood"] = str(ll.error)
    if "json" in needs and not (caps.get("json_schema") or caps.get("json_object")):
        missing["json"] = notes.get("json_object") or notes.get("json_schema") or "the replies are not JSON"
    return missing


__all__ = ["CacheInfo", "ClearedCache", "ProbeReport", "cache_info", "clear_cache", "probe_llm"]
