"""The OpenAI-compatible client against the real llama.cpp ``llama-server`` on Gemma 3 270M (one slot).

The server ignores ``echo``: log-likelihoods come from forced-token scoring, checked here against a
reference computed in the test from the same server: for each context, the greedy continuation's
tokens, one request per position without prompt cache, whose generated (argmax) token's log-prob is
log P(token | context + earlier tokens). Measured on this build (2 threads): forced-token scoring with
the prompt cache off equals the reference to < 1e-3 nats; with the cache on (the default) the first
token still does (its request computes the context afresh) and later tokens differ by up to 0.19
nats (llama.cpp's numbers depend on how a prompt is split into batches), hence 0.25 below. The
in-process backend (``llamacpp/gemma-3-270m``, another build of llama.cpp on the same file) differed
by up to 0.23 nats per continuation, hence 0.35.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from tests.support.llama_server import LlamaServer

from ragrade.cli.main import main
from ragrade.llm import GenerationRequest, LoglikelihoodRequest, Message, create_llm, generate, loglikelihood

pytestmark = pytest.mark.llamacpp

CONTEXTS = (
    "The capital of France is",
    "Water boils at a temperature of",
    "Once upon a time, there was a little",
    "In 1492, Christopher Columbus sailed across the",
)
CACHED_TOLERANCE = 0.25
IN_PROCESS_TOLERANCE = 0.35


def _llm(srv: LlamaServer, **kw: Any) -> Any:
    return create_llm("openai/gemma-3-270m", base_url=srv.base_url, cache=False, **kw)


def _greedy_reference(srv: LlamaServer, context: str, n: int = 3) -> tuple[list[str], list[float], int]:
    """The greedy continuation's token texts and their log-probs, one uncached request per position."""
    ids = srv.post("/tokenize", {"content": context, "add_special": True})["tokens"]
    toks: list[int] = []
    texts: list[str] = []
    lps: list[float] = []
    for _ in range(n):
        body = {"prompt": ids + toks, "max_tokens": 1, "logprobs": 1, "temperature": 0, "cache_prompt": False}
        entry = srv.post("/v1/completions", body)["choices"][0]["logprobs"]["content"][0]
        toks.append(entry["id"])
        texts.append(entry["token"])
        lps.append(entry["logprob"])
    assert srv.post("/tokenize", {"content": "".join(texts), "add_special": False})["tokens"] == toks
    return texts, lps, len(ids)


@pytest.mark.slow
def test_forced_token_loglikelihoods_equal_a_reference_from_the_same_server(llama_server: LlamaServer) -> None:
    refs = [_greedy_reference(llama_server, c) for c in CONTEXTS]
    reqs = [
        LoglikelihoodRequest(c, (texts[0], "".join(texts))) for c, (texts, _, _) in zip(CONTEXTS, refs, strict=True)
    ]
    exact = loglikelihood(_llm(llama_server, extra_body={"cache_prompt": False}), reqs)
    cached = loglikelihood(llm := _llm(llama_server), reqs)
    assert llm.loglikelihood_mode == "forced-token"
    for (_texts, lps, n_ctx), e, c in zip(refs, exact, cached, strict=True):
        assert e.ok and c.ok and e.method == c.method == "forced-token"
        assert e.token_counts == c.token_counts == [1, 3] and e.prompt_tokens == c.prompt_tokens == n_ctx
        assert e.logprobs == pytest.approx([lps[0], sum(lps)], abs=1e-3)
        assert c.logprobs is not None and c.logprobs[0] == pytest.approx(lps[0], abs=1e-3)
        assert c.logprobs[1] == pytest.approx(sum(lps), abs=CACHED_TOLERANCE)
    # the same question scored again, after other requests, gets the same numbers
    again = loglikelihood(_llm(llama_server), reqs[::-1])[::-1]
    flat = [x for r in again for x in r.logprobs or []]
    assert flat == pytest.approx([x for r in cached for x in r.logprobs or []], abs=1e-4) and len(flat) == 8


def test_forced_token_agrees_with_the_in_process_backend(llama_server: LlamaServer) -> None:
    from ragrade.errors import RagradeError

    try:
        local = create_llm("llamacpp/gemma-3-270m", cache=False)
    except (RagradeError, ImportError) as exc:
        pytest.skip(f"the in-process llamacpp backend is not available: {exc}")
    reqs = [
        LoglikelihoodRequest("The capital of France is", (" Paris", " London", " the capital of")),
        LoglikelihoodRequest("Once upon a time, there was a little", (" girl named Lily", " dog")),
    ]
    served, ours = loglikelihood(_llm(llama_server), reqs), loglikelihood(local, reqs)
    for s, o in zip(served, ours, strict=True):
        assert s.ok and o.ok and s.token_counts == o.token_counts
        assert s.logprobs == pytest.approx(o.logprobs, abs=IN_PROCESS_TOLERANCE)


@pytest.mark.slow
def test_the_probe_finds_forced_token_json_output_and_the_leaked_template_token(
    llama_server: LlamaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["llm", "probe", "--llm", "openai/gemma-3-270m", "--llm-base-url", llama_server.base_url, "--timeout", "300"]
    code = main([*args, "--need", "generate,loglikelihood,json"])
    out = capsys.readouterr()
    report = json.loads(out.out)
    caps = report["capabilities"]
    assert caps["prompt_logprobs"] == "forced-token" and report["loglikelihood"]["method"] == "forced-token"
    assert caps["completions"] and caps["logit_bias"] is True and caps["slots"] == 1
    assert caps["json_schema"] is True and report["loglikelihood"]["ok"]
    assert report["llm"]["loglikelihood_mode"] == "forced-token" and report["llm"]["server_slots"] == 1
    # the base model has no chat template: the server's fallback lets the model run past its turn and the
    # reply ends in a template token ("Reply with the word ready.<|im"): not usable, and the exit code says so
    gen = report["generate"]
    assert gen["ok"] is False and "chat-template token" in gen["reason"] and gen["text"]
    assert caps["chat"] is False and "chat-template token" in caps["notes"]["chat"]
    assert report["missing"] == ["generate"] and code == 2 and "chat-template token" in out.err


def test_json_schema_generation_and_the_slot_cap(llama_server: LlamaServer) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    llm = _llm(llama_server)  # the default 16 in flight
    asks = [f"What is the capital of {c}? Reply in JSON." for c in ("France", "Italy", "Spain")]
    out = generate(
        llm, [GenerationRequest(messages=(Message("user", a),), json_schema=schema, max_tokens=40) for a in asks]
    )
    for c in out:
        assert c.ok and c.response_format == "json_schema", c.error
        assert isinstance(json.loads(str(c.text)).get("answer"), str)
    assert llm.limiter.cap == 1 and llm.limiter.adaptive.cuts == 0  # one slot: one request at a time


def test_letter_picking_is_never_used_unless_allowed(llama_server: LlamaServer) -> None:
    req = LoglikelihoodRequest("Question: what colour is the sky?\nAnswer:", (" A", " B", " C", " D"))
    [echo] = loglikelihood(_llm(llama_server, loglikelihood_mode="echo"), [req])
    assert not echo.ok and "echo ignored" in str(echo.error)  # the server's reply does not pass for the prompt's
    for allowed in (False, True):
        llm = _llm(llama_server, letter_fallback=allowed)
        [r] = loglikelihood(llm, [req])
        assert r.ok and r.method == "forced-token" and llm.loglikelihood_mode == "forced-token"
        assert r.logprobs is not None and all(-30 < x < 0 for x in r.logprobs)


@pytest.mark.slow
def test_cost_of_a_four_option_question(llama_server: LlamaServer, capsys: pytest.CaptureFixture[str]) -> None:
    passage = " ".join(f"Sentence {i} of the passage says that item {i} costs {i * 3} euros." for i in range(25))
    reqs = [
        LoglikelihoodRequest(
            f"Passage: {passage}\nQuestion {q}: how much does item {q} cost?\n"
            f"A. {q} euros\nB. {q * 3} euros\nC. {q * 5} euros\nD. {q * 7} euros\nAnswer:",
            (" A", " B", " C", " D"),
        )
        for q in range(1, 6)
    ]
    llm = _llm(llama_server)
    posts: list[str] = []
    real_post = llm.post_json

    async def counting_post(path: str, body: dict[str, Any], extra: bool = True) -> dict[str, Any]:
        posts.append(path.rsplit("/", 1)[-1])
        result: dict[str, Any] = await real_post(path, body, extra)
        return result

    llm.post_json = counting_post
    loglikelihood(llm, reqs[:1])  # detection (an echo request first)
    posts.clear()
    t0 = time.perf_counter()
    out = loglikelihood(llm, reqs[1:])
    per_question = (time.perf_counter() - t0) / len(reqs[1:])
    assert all(r.ok and r.method == "forced-token" for r in out)
    n = len(reqs[1:])
    with capsys.disabled():
        print(
            f"\nforced-token, 4 options, {out[0].prompt_tokens}-token context, 1 slot, {llama_server.threads} threads: "
            f"{per_question:.2f} s per question, {posts.count('completions') / n:.1f} scoring + "
            f"{posts.count('tokenize') / n:.1f} tokenize requests per question (load {os.getloadavg()[0]:.1f})"
        )
    # the context's tokens per question; the options' were asked once, before
    assert posts.count("completions") <= 4 * n and posts.count("tokenize") == n


def test_a_server_that_recomputes_cached_prompts_is_named_once_with_the_fix(
    llama_server: LlamaServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Gemma 3 has sliding-window layers: llama-server's default SWA cache recomputes ~5 tokens of a cached
    # prompt per request (timings.prompt_n), --swa-full only the new one (measured: 35-50 ms against 15-20 ms)
    options = (" a small red house", " the river bank", " nine", " Spain")
    reqs = [LoglikelihoodRequest(c, options) for c in CONTEXTS[:2]]
    with caplog.at_level("WARNING", logger="ragrade"):
        loglikelihood(_llm(llama_server), reqs)
    told = [r.getMessage() for r in caplog.records if "recomputes" in r.getMessage()]
    assert len(told) == 1 and "--swa-full" in told[0]
    caplog.clear()
    with LlamaServer(args=("--swa-full",)) as full, caplog.at_level("WARNING", logger="ragrade"):
        llm = _llm(full)
        loglikelihood(llm, reqs)
        assert llm.cache_watch.replies >= 8 and llm.cache_watch.recomputing == 0
    assert not [r for r in caplog.records if "recomputes" in r.getMessage()]
