"""A deterministic free-text LLM for the QA tests: answers with the fourth-last word of the first passage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ragrade.llm.base import Completion, GenerationRequest, Usage


class EchoLLM:
    """Answers with the colour word of the first passage (or a refusal without passages)."""

    name = "fake/echo"
    is_baseline = True
    supports_loglikelihood = False

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        out = []
        for r in requests:
            words = r.passages[0].split() if r.passages else []
            text = words[-4] if len(words) >= 4 else "I cannot tell."
            out.append(Completion(text=text, usage=Usage(12, 1)))
        return out

    async def aloglikelihood(self, requests: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"kind": "echo"}


def make_echo_llm() -> EchoLLM:
    """Factory named by ``py/tests.qa.qa_fakes:make_echo_llm``."""
    return EchoLLM()


class CountingLLM:
    """An in-process backend that wants 64 requests in flight and counts how they arrive."""

    name = "fake/counting"
    is_baseline = True
    supports_loglikelihood = False
    requests_in_flight = 64
    calls: ClassVar[list[int]] = []
    in_flight = 0
    peak = 0

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        import asyncio

        cls = type(self)
        cls.calls.append(len(requests))
        cls.in_flight += len(requests)
        cls.peak = max(cls.peak, cls.in_flight)
        await asyncio.sleep(0.05)
        cls.in_flight -= len(requests)
        return [Completion(text="blue", usage=Usage(3, 1)) for _ in requests]

    def describe(self) -> dict[str, Any]:
        return {"kind": "counting"}


def make_counting_llm() -> CountingLLM:
    """Factory named by ``py/tests.qa.qa_fakes:make_counting_llm``."""
    return CountingLLM()
