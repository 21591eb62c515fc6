"""Batched greedy generation in the hf backend equals generating each request alone.

A tiny random Llama (built here, no download) in float32: prompts of mixed lengths, mixed new-token budgets
and stop strings, decoded in left-padded groups, must give the very tokens of one ``generate`` call per
request; a group that runs out of memory is split and retried; concurrent callers are merged.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.llm.test_llm_hf import TEXT, build_tiny_model
from tests.support.typed import narrow

from ragrade.llm import GenerationRequest, Message, create_llm, generate
from ragrade.llm.hf import HFLLM
from ragrade.llm.hf_generate import BatchGenerator, GenItem, plan_groups


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama-gen"))


def _requests() -> list[GenerationRequest]:
    reqs = [
        GenerationRequest(prompt=" ".join(TEXT[: 1 + n % 4]) + f" item {n}", max_tokens=3 + n % 5) for n in range(9)
    ]
    reqs.append(GenerationRequest(messages=(Message("user", "Water boils at"),), max_tokens=6))
    reqs.append(GenerationRequest(prompt="The", max_tokens=1))
    return reqs


def _alone(llm: HFLLM, req: GenerationRequest) -> list[int]:
    """The reference: one unpadded ``generate`` call of the model itself for this request."""
    torch = llm._torch
    ids = llm._prompt_ids(req)
    x = torch.tensor([ids])
    with torch.no_grad():
        gen = llm.lm.generate(
            x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=req.max_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            pad_token_id=llm.generator.pad_id,
        )
    return [int(t) for t in gen[0, len(ids) :]]


def test_batched_greedy_equals_one_request_at_a_time(tiny_model: str) -> None:
    llm = narrow(create_llm(f"hf/{tiny_model}", cache=False, max_batch=4), HFLLM)
    reqs = _requests()
    out = generate(llm, reqs)
    assert all(c.ok for c in out), [c.error for c in out]
    for req, got in zip(reqs, out, strict=True):
        want = _alone(llm, req)
        assert got.text == llm.tokenizer.decode(want, skip_special_tokens=True)
        assert got.usage.completion_tokens == len(want) <= req.max_tokens
        assert got.finish_reason == ("length" if len(want) == req.max_tokens else "stop")
    stats = llm.generator.stats
    assert stats.requests == len(reqs) and stats.groups == 3 and max(stats.sizes) == 4  # batches of at most 4


def test_a_stop_string_cuts_the_text_as_alone(tiny_model: str) -> None:
    llm = narrow(create_llm(f"hf/{tiny_model}", cache=False), HFLLM)
    base = _requests()[0]
    full = generate(llm, [base])[0].text or ""
    assert len(full) > 2
    stop = full[1:3]
    got = generate(llm, [GenerationRequest(prompt=base.prompt, max_tokens=base.max_tokens, stop=(stop,))])[0]
    assert got.text == full[: full.index(stop)] and got.finish_reason == "stop"


class OutOfMemoryError(RuntimeError):
    """What torch raises when a device runs out of memory (is_oom matches the class name)."""


def test_out_of_memory_splits_the_group_and_loses_nothing(tiny_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = narrow(create_llm(f"hf/{tiny_model}", cache=False, max_batch=16), HFLLM)
    reqs = _requests()
    want = [c.text for c in generate(llm, reqs)]
    real = llm.lm.generate
    sizes: list[int] = []

    def small_batches_only(x: Any, **kw: Any) -> Any:
        sizes.append(int(x.shape[0]))
        if x.shape[0] > 3:
            raise OutOfMemoryError("CUDA out of memory (simulated)")
        return real(x, **kw)

    monkeypatch.setattr(llm.lm, "generate", small_batches_only)
    before = llm.generator.stats.oom_splits
    got = generate(llm, reqs)
    assert [c.text for c in got] == want
    assert llm.generator.stats.oom_splits > before and max(s for s in sizes if s <= 3) <= 3


def test_a_request_that_never_fits_is_missing_not_wrong(tiny_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = narrow(create_llm(f"hf/{tiny_model}", cache=False), HFLLM)
    reqs = [GenerationRequest(prompt="The", max_tokens=2), GenerationRequest(prompt=" ".join(TEXT), max_tokens=2)]
    long_ids = len(llm._prompt_ids(reqs[1]))
    real = llm.lm.generate

    def no_room_for_long(x: Any, **kw: Any) -> Any:
        if x.shape[1] >= long_ids:
            raise OutOfMemoryError("out of memory (simulated)")
        return real(x, **kw)

    monkeypatch.setattr(llm.lm, "generate", no_room_for_long)
    out = generate(llm, reqs)
    assert out[0].ok and out[0].text == llm.tokenizer.decode(_alone(llm, reqs[0]), skip_special_tokens=True)
    assert not out[1].ok and out[1].text is None and "out of memory" in (out[1].error or "")


def test_concurrent_callers_are_decoded_together(tiny_model: str) -> None:
    llm = narrow(create_llm(f"hf/{tiny_model}", cache=False, max_batch=64), HFLLM)
    reqs = _requests()

    async def many() -> list[Any]:
        return list(await asyncio.gather(*(llm.agenerate([r]) for r in reqs)))

    out = asyncio.run(many())
    assert all(c[0].ok for c in out)
    assert llm.generator.stats.groups < len(reqs)  # merged by the batcher, not one group per caller


def test_plan_groups_by_hand() -> None:
    items = [GenItem(0, [1] * 10, 5), GenItem(1, [1] * 2, 5), GenItem(2, [1] * 3, 1), GenItem(3, [1] * 50, 5)]
    # sorted by prompt length: 1 (2), 2 (3), 0 (10), 3 (50); budget 40 positions, at most 3 rows
    groups = plan_groups(items, max_batch=3, budget=40)
    assert [[it.index for it in g] for g in groups] == [[1, 2], [0], [3]]
    # (2 rows x (3 + 5) = 16 fits; adding item 0 makes 3 x (10 + 5) = 45 > 40; item 3 alone exceeds, still runs)


def test_a_row_ends_at_its_first_end_token() -> None:
    gen = BatchGenerator(None, None, "cpu", pad_id=0, eos_ids=[2, 7], empty_cache=lambda: None)
    assert gen._cut([5, 6, 7, 0, 0], max_new=5) == [5, 6, 7]
    assert gen._cut([5, 2, 9], max_new=5) == [5, 2]
    assert gen._cut([5, 6, 8, 9], max_new=2) == [5, 6]


def test_a_request_that_breaks_generation_fails_alone(tiny_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = narrow(create_llm(f"hf/{tiny_model}", cache=False), HFLLM)
    reqs = _requests()
    want = [c.text for c in generate(llm, reqs)]
    lengths = [len(llm._prompt_ids(r)) for r in reqs]
    n_bad = next(n for n, k in enumerate(lengths) if lengths.count(k) == 1)  # a prompt length no other has
    bad = lengths[n_bad]
    real = llm.lm.generate

    def breaks_on_one_length(x: Any, **kw: Any) -> Any:
        if x.shape[1] == bad:  # the request alone (in a group it is padded to the group's longest)
            raise ValueError("position ids out of range (simulated)")
        if x.shape[0] > 1:
            raise ValueError("a group holding the bad request (simulated)")
        return real(x, **kw)

    monkeypatch.setattr(llm.lm, "generate", breaks_on_one_length)
    got = generate(llm, reqs)
    assert not got[n_bad].ok and "position ids out of range" in (got[n_bad].error or "")
    assert [c.text for n, c in enumerate(got) if n != n_bad] == [w for n, w in enumerate(want) if n != n_bad]
