"""The OpenAI-compatible client against the shapes of real servers, played by the local test server:
llama-cpp-python (lists of prompts and json_schema answered with HTTP 500), a one-slot server under
the default concurrency, and ``llm probe`` saying what is missing."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from typing import Any

import pytest
from tests.llm.options_given import given
from tests.support.openai_server import Faults, OpenAIServer, always, token_logprob
from tests.support.typed import narrow

from ragrade.cli.main import main
from ragrade.llm import GenerationRequest, LoglikelihoodRequest, Message, create_llm, generate, loglikelihood
from ragrade.llm.limits import LimitConfig, Limiter
from ragrade.llm.openai import OpenAILLM
from ragrade.llm.options import LLMOptions

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}
JSON_REPLY = '{"a": "blue"}'


def _llm(
    url: str,
    *,
    concurrency: int = 1,
    max_retries: int | None = None,
    timeout: float | None = None,
    loglikelihood_mode: str = "auto",
) -> OpenAILLM:
    llm = create_llm(
        "openai/test-model",
        LLMOptions(
            base_url=url,
            cache=False,
            backoff_s=0.01,
            concurrency=concurrency,
            loglikelihood_mode=loglikelihood_mode,
            **given(max_retries, None, timeout),
        ),
        api_key="sk-test",
    )
    return narrow(llm, OpenAILLM)


def _json_request(text: str = "q") -> GenerationRequest:
    return GenerationRequest(messages=(Message("user", text),), json_schema=SCHEMA)


def _formats(log: list[dict[str, Any]]) -> list[str | None]:
    return [(b.get("response_format") or {}).get("type") for b in log if "messages" in b]


def _formats_per_request(log: list[dict[str, Any]]) -> dict[str, list[str | None]]:
    """The response formats each chat request (by its message) was sent with, in order."""
    sent: dict[str, list[str | None]] = {}
    for body in log:
        if "messages" in body:
            fmt = (body.get("response_format") or {}).get("type")
            sent.setdefault(body["messages"][0]["content"], []).append(fmt)
    return sent


def _assert_no_format_skipped(sent: dict[str, list[str | None]], final: str | None) -> None:
    """Each request's attempts ask with the same format again or the next one down, and end with ``final``."""
    order: list[str | None] = ["json_schema", "json_object", None]
    for formats in sent.values():
        steps = [order.index(b) - order.index(a) for a, b in itertools.pairwise(formats)]
        assert all(step in (0, 1) for step in steps) and formats[-1] == final, formats


def test_echo_lists_refused_with_500_go_one_prompt_per_request(caplog: pytest.LogCaptureFixture) -> None:
    ctx = "The capital of France is"
    reqs = [LoglikelihoodRequest(ctx, (" Paris", " Rome city")), LoglikelihoodRequest("Pick:", (" yes", " no"))]
    with caplog.at_level(logging.WARNING), OpenAIServer(reject=("prompt-list",)) as srv:
        llm = _llm(srv.base_url)
        out = loglikelihood(llm, reqs)
        # the probe's list once (HTTP 500, not retried), its prompts one by one, then one prompt per request
        assert srv.requests_by_path["/v1/completions"] == 1 + 2 + 4
        assert [type(b["prompt"]).__name__ for b in srv.log] == ["list"] + ["str"] * 6
    assert all(r.ok and r.method == "echo-logprobs" for r in out)
    assert out[0].logprobs == pytest.approx(
        [token_logprob(" is", " Paris"), token_logprob(" is", " Rome") + token_logprob(" Rome", " city")]
    )
    assert out[0].token_counts == [1, 2]
    assert llm.loglikelihood_mode == "echo" and llm.echo_batched is False
    assert llm.describe()["echo_batched"] is False
    assert caplog.text.count("refuses a list of prompts") == 1
    with OpenAIServer() as srv:  # a server that takes lists keeps one request per question
        llm = _llm(srv.base_url)
        assert all(r.ok for r in loglikelihood(llm, reqs)) and srv.requests_by_path["/v1/completions"] == 1 + 2
        assert llm.echo_batched is True


def test_forced_token_scoring_where_echo_is_ignored() -> None:
    ctx = "The capital of France is "  # the trailing space moves to the continuations
    reqs = [LoglikelihoodRequest(ctx, ("Paris", "Rome city")), LoglikelihoodRequest("Pick:", (" yes", " yes"))]
    with OpenAIServer(prompt_logprobs=False) as srv:
        out = loglikelihood(llm := _llm(srv.base_url, concurrency=4), reqs)
        scoring = [b for b in srv.log if isinstance(b.get("prompt"), list) and b.get("logit_bias")]
        tokenized = [b for b in srv.log if "content" in b]
        ids = {t: srv.vocab.id(t) for t in (" Paris", " Rome", " city", " yes")}
    assert llm.loglikelihood_mode == "forced-token" and all(r.ok and r.method == "forced-token" for r in out)
    paris = token_logprob(" is", " Paris")
    assert out[0].logprobs == pytest.approx([paris, token_logprob(" is", " Rome") + token_logprob(" Rome", " city")])
    assert out[0].token_counts == [1, 2] and out[0].prompt_tokens == 1 + 5  # the start token and five words
    assert out[1].logprobs == pytest.approx([token_logprob(":", " yes")] * 2)
    # three tokens for the first question, one for the second (the same token twice is asked once)
    mine = scoring[-4:]
    assert sorted(int(next(iter(b["logit_bias"]))) for b in mine) == sorted([*ids.values()])
    assert [b["cache_prompt"] for b in mine if int(next(iter(b["logit_bias"]))) != ids[" yes"]] == [False, True, True]
    assert len(tokenized) == 3 + 3 + 2  # the probe's, then context and continuations (" yes" is remembered)
    with OpenAIServer(prompt_logprobs=False, logit_bias=False) as srv:  # a server that ignores the bias
        [r] = loglikelihood(llm := _llm(srv.base_url, loglikelihood_mode="forced-token"), reqs[:1])
    assert not r.ok and "ignored logit_bias" in str(r.error)


def test_a_json_schema_500_degrades_only_when_the_request_one_format_down_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    schema_500 = OpenAIServer(reject=("json_schema",), responder=lambda b: JSON_REPLY)
    with caplog.at_level(logging.WARNING), schema_500 as srv:
        out = generate(llm := _llm(srv.base_url), [_json_request(f"q{i}") for i in range(3)])
        # json_schema twice (HTTP 500), the retry one format down (200), then json_object for the others
        assert _formats(srv.log) == ["json_schema", "json_schema", "json_object", "json_object", "json_object"]
    assert all(c.ok and json.loads(str(c.text)) == {"a": "blue"} for c in out)
    assert [c.response_format for c in out] == ["json_object"] * 3
    assert llm._json_mode == "json_object" and llm.describe()["json_mode"] == "json_object"
    assert caplog.text.count("refused response_format=json_schema") == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING), OpenAIServer(reject=("json_schema", "json_object")) as srv:
        out = generate(llm := _llm(srv.base_url), [_json_request(f"q{i}") for i in range(3)])
        per_request = _formats_per_request(srv.log)
    # one format at a time: json_object only after json_schema was refused, plain text last
    assert per_request["q0"][0] == "json_schema" and "json_object" in per_request["q0"]
    _assert_no_format_skipped(per_request, None)
    assert all(c.ok for c in out) and [c.response_format for c in out] == ["text", "text", "text"]
    assert llm._json_mode == "none" and caplog.text.count("refused response_format") == 2
    for retries, sent in ((2, 3), (0, 1)):  # every request fails: the format is not to blame
        with OpenAIServer(faults=always("500")) as srv:
            [c] = generate(llm := _llm(srv.base_url, max_retries=retries), [_json_request()])
            assert srv.requests_total == sent
            assert _formats(srv.log) == (["json_schema", "json_schema", "json_object"] if retries else ["json_schema"])
        assert not c.ok and "HTTP 500" in str(c.error) and llm._json_mode == "json_schema"
    with OpenAIServer(faults=Faults(script=["500"]), responder=lambda b: JSON_REPLY) as srv:  # a passing 500
        [c] = generate(llm := _llm(srv.base_url), [_json_request()])
    assert c.ok and c.response_format == "json_schema" and llm._json_mode == "json_schema"


@pytest.mark.parametrize("reject", [("json_schema",), ("json_schema", "json_object")])
def test_requests_in_flight_retry_one_format_down_after_a_refusal(
    reject: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    # several requests in flight meet the refusal together: none of their retries skips a format
    # (8 advertised slots: eight in flight from the start, without the slow start of a server that says nothing)
    server = OpenAIServer(reject=reject, responder=lambda b: JSON_REPLY, latency_s=0.05, slots=8, advertise_slots=True)
    with caplog.at_level(logging.WARNING), server as srv:
        reqs = [_json_request(f"question {i}") for i in range(8)]
        out = generate(_llm(srv.base_url, concurrency=8), reqs)
        assert srv.max_in_flight >= 4
        sent = _formats_per_request(srv.log)
    final = "json_object" if reject == ("json_schema",) else "text"
    assert all(c.ok for c in out) and [c.response_format for c in out] == [final] * 8
    assert len(sent) == 8
    _assert_no_format_skipped(sent, None if final == "text" else final)
    retried = [f for f in sent.values() if f[0] == "json_schema" and len(f) > 1]
    assert len(retried) >= 4 and all(f[1] in ("json_schema", "json_object") for f in retried)
    assert caplog.text.count("refused response_format") == len(reject)


def test_a_400_naming_the_format_degrades_at_once_and_no_format_on_plain_requests() -> None:
    with OpenAIServer(reject=("json_schema",), reject_status=400, responder=lambda b: JSON_REPLY) as srv:
        [c] = generate(_llm(srv.base_url), [_json_request()])
        assert _formats(srv.log) == ["json_schema", "json_object"]  # "cannot handle json_schema": no check needed
    assert c.ok and c.response_format == "json_object"
    with OpenAIServer() as srv:
        [c] = generate(_llm(srv.base_url), [GenerationRequest(messages=(Message("user", "q"),))])
    assert c.ok and c.response_format is None and _formats(srv.log) == [None]


@pytest.mark.parametrize("fault", ["401", "429", "hang"])
def test_auth_rate_limits_and_timeouts_never_degrade_the_format(fault: str, caplog: pytest.LogCaptureFixture) -> None:
    faults = Faults(script=[fault], retry_after_s=0.01, hang_s=2.0)
    with caplog.at_level(logging.WARNING), OpenAIServer(faults=faults, responder=lambda b: JSON_REPLY) as srv:
        llm = _llm(srv.base_url, timeout=0.5)
        [c] = generate(llm, [_json_request()])
        assert set(_formats(srv.log)) == {"json_schema"}
    assert llm._json_mode == "json_schema" and "refused response_format" not in caplog.text
    if fault == "401":
        assert not c.ok and "rejected the API key" in str(c.error)
    else:  # retried with the same format
        assert c.ok and c.response_format == "json_schema" and c.attempts == 2


def test_a_one_slot_server_finishes_a_batch_under_the_default_concurrency() -> None:
    # up to the default 16 in flight against a server that handles one request at a time and advertises no
    # slots: slow start from one, and growth stops where the queue would no longer be answered well within
    # the timeout (0.4 s / (2 x 0.04 s) = 5), instead of a queue of 16 whose tail times out
    reqs = [GenerationRequest(messages=(Message("user", f"question {i}"),)) for i in range(60)]
    with OpenAIServer(slots=1, latency_s=0.04) as srv:
        llm = create_llm(
            "openai/test-model", LLMOptions(base_url=srv.base_url, cache=False, timeout=0.4), api_key="sk-test"
        )
        t0 = time.monotonic()
        out = generate(llm, reqs)
        elapsed = time.monotonic() - t0
        assert srv.probes["/props"] == 1 and srv.max_in_flight <= 5
        assert srv.dropped + srv.abandoned < 5  # (a loaded machine may still time one out now and then)
    limiter = llm.limiter  # type: ignore[attr-defined]
    assert all(c.ok for c in out), [c.error for c in out if not c.ok][:3]
    assert limiter.adaptive.lowest == 1 and 2 <= limiter.cap <= 5 and limiter.fatal is None
    assert elapsed < 30
    # advertised slots start the cap there: no timeout at all
    with OpenAIServer(slots=1, advertise_slots=True, latency_s=0.02) as srv:
        llm = create_llm(
            "openai/test-model", LLMOptions(base_url=srv.base_url, cache=False, timeout=0.4), api_key="sk-test"
        )
        out = generate(llm, reqs[:20])
        assert srv.max_in_flight == 1 and srv.dropped == 0
    assert all(c.ok and c.attempts == 1 for c in out)
    assert llm.limiter.cap == 1 and llm.limiter.adaptive.cuts == 0 and llm.describe()["server_slots"] == 1  # type: ignore[attr-defined]


def test_the_cap_grows_back_after_a_window_of_successes_but_never_above_concurrency() -> None:
    limiter = Limiter(LimitConfig(concurrency=4, timeout=1.0), seed=0)
    cap = limiter.adaptive
    assert cap.congestion(cap.epoch) and cap.cap == 2
    assert not cap.congestion(cap.epoch - 1) and cap.cap == 2  # sent before the cut: no second cut
    grown = [cap.success() for _ in range(2 + 3 + 4)]
    assert grown == [False, True, False, False, True, False, False, False, False] and cap.cap == 4
    fixed = Limiter(LimitConfig(concurrency=4, adaptive=False)).adaptive
    assert not fixed.congestion(fixed.epoch) and fixed.cap == 4


def test_queued_timeouts_do_not_declare_the_server_unreachable() -> None:
    async def stuck() -> str:
        await asyncio.sleep(1.0)
        return "never"

    async def batch(limiter: Limiter, n: int) -> list[str | None]:
        return [o.error for o in await asyncio.gather(*(limiter.call(stuck) for _ in range(n)))]

    cfg = LimitConfig(concurrency=8, timeout=0.1, max_retries=0, unreachable_after=2)
    queued = Limiter(cfg)
    errors = asyncio.run(batch(queued, 8))  # eight at once: only the one sent alone proves anything
    assert all("timed out" in str(e) for e in errors) and queued.fatal is None and queued.failed_in_a_row == 1
    assert queued.cap == 4
    alone = Limiter(LimitConfig(concurrency=1, timeout=0.1, max_retries=0, unreachable_after=2))
    errors = asyncio.run(batch(alone, 3))
    assert alone.fatal is not None and "server unreachable" in str(errors[-1])


def test_the_probe_exits_2_when_a_needed_capability_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    def probe(url: str, *need: str) -> tuple[int, dict[str, Any], str]:
        args = ["llm", "probe", "--llm", "openai/test-model", "--llm-base-url", url, "--max-retries", "0"]
        code = main([*args, "--need", ",".join(need)] if need else args)
        out = capsys.readouterr()
        return code, json.loads(out.out), out.err

    with OpenAIServer(prompt_logprobs=False, logit_bias=False) as srv:
        code, report, err = probe(srv.base_url)
        assert code == 0 and report["need"] == ["generate"] and not err
        code, report, err = probe(srv.base_url, "generate", "loglikelihood")
    assert code == 2 and report["missing"] == ["loglikelihood"]
    assert err.startswith("ragrade: error:") and err.count("\n") == 1 and "cannot score log-likelihoods" in err
    caps = report["capabilities"]
    assert caps["chat"] and caps["completions"] and caps["prompt_logprobs"] == "none"
    assert caps["logit_bias"] is False and caps["slots"] is None and "loglikelihood" in report["missing"]
    with OpenAIServer(responder=lambda b: JSON_REPLY, slots=2, advertise_slots=True) as srv:
        code, report, err = probe(srv.base_url, "generate", "loglikelihood", "json")
    assert code == 0 and report["missing"] == [] and report["loglikelihood"]["method"] == "echo-logprobs"
    caps = report["capabilities"]
    assert (
        caps["prompt_logprobs"] == "echo-batched" and caps["json_schema"] and caps["json_object"] and caps["slots"] == 2
    )
    with OpenAIServer(reject=("json_schema", "json_object")) as srv:
        code, report, err = probe(srv.base_url, "json")
    assert code == 2 and report["missing"] == ["json"] and "json" in err
    with OpenAIServer(responder=lambda b: "  ") as srv:  # an empty reply is the model's answer (issue 52, item 6)
        code, report, err = probe(srv.base_url)
    assert code == 0 and report["missing"] == [] and "the model ended its reply at once" in report["generate"]["note"]
    code = main(
        ["llm", "probe", "--llm", "openai/test-model", "--llm-base-url", "http://127.0.0.1:9/v1", "--need", "x"]
    )
    assert code == 2 and "--need takes a comma list" in capsys.readouterr().err


EMPTY = "the model ended its reply at once"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("ready", None),
        ("", None),  # an empty reply is the model's answer, noted (issue 52, item 6: it was "the reply is empty")
        ("   \n", None),
        ("ready.<|im", "chat-template token '<|im'"),  # cut off inside the token
        ("ready<end_of_turn>\n<start_of_turn>user", "chat-template token '<end_of_turn>'"),
        ("ready</s>", "chat-template token '</s>'"),
        ("ready<|eot_id|>", "chat-template token '<|eot_id|>'"),
    ],
)
def test_the_probe_exit_code_equals_its_table(
    reply: str, reason: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    with OpenAIServer(responder=lambda b: reply) as srv:
        code = main(
            ["llm", "probe", "--llm", "openai/test-model", "--llm-base-url", srv.base_url, "--max-retries", "0"]
        )
    out = capsys.readouterr()
    report = json.loads(out.out)
    gen, caps = report["generate"], report["capabilities"]
    assert code == (2 if report["missing"] else 0)  # the exit code says what the table says
    assert gen["ok"] is (reason is None) and (gen["reason"] is None) is (reason is None)
    assert report["missing"] == ([] if reason is None else ["generate"])
    # the chat capability (four tokens of the same reply) is judged by the same rule
    assert caps["chat"] is (reason is None)
    if reason is not None:
        assert reason in gen["reason"] and reason.split(" '")[0] in caps["notes"]["chat"]
        assert out.err.startswith("ragrade: error:") and out.err.count("\n") == 1 and reason in out.err
    elif reply.strip():
        assert not out.err and gen["text"] == "ready" and gen["note"] is None
    else:  # both prompts got an empty reply: generation works, the note says what the model did
        assert not out.err and gen["text"] == reply and EMPTY in gen["note"] and EMPTY in caps["notes"]["chat"]


def test_an_empty_reply_is_asked_once_more(capsys: pytest.CaptureFixture[str]) -> None:
    def sea(body: dict[str, Any]) -> str:
        return "The sea is wide." if "sea" in json.dumps(body) else ""

    args = ["llm", "probe", "--llm", "openai/test-model", "--max-retries", "0", "--llm-base-url"]
    with OpenAIServer(responder=sea) as srv:
        assert main([*args, srv.base_url]) == 0
    gen = json.loads(capsys.readouterr().out)["generate"]
    assert gen["ok"] and gen["note"] == "the first reply was empty; a second prompt got text: 'The sea is wide.'"
    with OpenAIServer(responder=lambda b: "waves<|im_end|>" if "sea" in json.dumps(b) else "") as srv:
        assert main([*args, srv.base_url]) == 2  # the second reply shows the server's template problem
    out = capsys.readouterr()
    assert json.loads(out.out)["missing"] == ["generate"] and "chat-template token '<|im_end|>'" in out.err
