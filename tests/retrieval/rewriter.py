"""A transform LLM for the tests of shared query work (named ``py/tests.retrieval.rewriter:make_rewriter``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragrade.llm.base import Completion, GenerationRequest, Usage

PROMPTS: list[str] = []  # what the rewriters of this process were asked: "task\0question"


class Rewriter:
    """A transform LLM: a passage for HyDE, two rephrasings for multi-query; fails on site 5."""

    name = "fake/rewriter"

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        out = []
        for r in requests:
            q = r.question or ""
            PROMPTS.append(f"{r.task}\0{q}")
            if "site 5 " in q:
                out.append(Completion(text=None, error="HTTP 500: upstream failure"))
            elif r.task == "hyde":
                out.append(Completion(text=f"Record: {q.replace('____', '')} samples to the lab.", usage=Usage(9, 9)))
            else:
                out.append(Completion(text=f"keeper {q[-12:]}\nwhat is carried at {q[:30]}", usage=Usage(9, 9)))
        return out

    def describe(self) -> dict[str, Any]:
        return {"kind": "fake-rewriter"}


def make_rewriter() -> Rewriter:
    return Rewriter()
