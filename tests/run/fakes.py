"""Deterministic fakes for the run tests: a tiny exam, a word-overlap LLM, an external RAG system."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragrade.exam.files import Question, write_exam
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage

_WORDS = [
    "amber",
    "basalt",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "jasper",
    "kelp",
    "lagoon",
    "marble",
    "nectar",
    "onyx",
    "pebble",
    "quartz",
    "reef",
    "slate",
    "tundra",
]
TOPICS = ["geology", "oceans", "colours"]


def _h(*parts: str) -> float:
    return int(hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8], 16) / 2**32


def make_exam(path: Path, n: int = 40) -> list[Question]:
    """n cloze questions; the source context states the answer word."""
    qs = []
    for i in range(n):
        words = [_WORDS[(i * 3 + j * 7) % len(_WORDS)] for j in range(4)]
        answer = i % 4
        context = f"Record {i}: the keeper of site {i} always carries {words[answer]} samples to the lab."
        qs.append(
            Question(
                id=f"q{i:03d}",
                question=f"What does the keeper of site {i} carry? ____",
                choices=words,
                answer=answer,
                doc_id=f"d{i % 7}",
                chunk_id=f"c{i}",
                source="fake.txt",
                tags={
                    "bloom": ["remember"] if i % 2 else ["remember", "understand"],
                    "qword": "what",
                    "topic": TOPICS[i % 3],
                },
                generator={"name": "fake"},
                context=context,
                span=(0, len(context)),
            )
        )
    write_exam(path, qs)
    return qs


def _overlap(choice: str, passages: Sequence[str]) -> float:
    text = " ".join(passages).lower()
    return float(len(re.findall(rf"\b{re.escape(choice.strip().lower())}\b", text)))


class FakeLLM:
    """Scores a candidate by its occurrences in the passages plus a hashed tie-breaker.

    Generation answers with the best letter, except: a question containing 'site 13' gets a garbled
    reply (parse failure) and one containing 'site 17' fails (error).
    """

    name = "fake/overlap"
    is_baseline = True

    def __init__(self, loglikelihood: bool = True, delay_s: float = 0.0) -> None:
        self.supports_loglikelihood = loglikelihood
        self.delay_s = delay_s
        self.calls = 0

    def _scores(self, question: str, choices: Sequence[str], passages: Sequence[str]) -> list[float]:
        return [_overlap(c, passages) + 0.5 * _h(question, c) for c in choices]

    async def aloglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        self.calls += len(requests)
        if self.delay_s:
            await asyncio.sleep(self.delay_s * len(requests))
        out = []
        for r in requests:
            s = self._scores(r.question or "", r.continuations, r.passages)
            # per-character log-likelihood = overlap + tie-breaker - 2, like a real model's length scaling
            out.append(
                LoglikelihoodResult(
                    logprobs=[(v - 2.0) * len(c.strip()) for v, c in zip(s, r.continuations, strict=True)],
                    token_counts=[max(1, len(c.split())) for c in r.continuations],
                    method=self._method(),
                    prompt_tokens=len(r.context.split()),
                )
            )
        return out

    def _method(self) -> str:
        return "echo-logprobs"

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.calls += len(requests)
        out = []
        for r in requests:
            q = r.question or ""
            if "site 17 " in q:
                out.append(Completion(text=None, error="HTTP 500: upstream failure"))
                continue
            if "site 13 " in q:
                out.append(Completion(text="I am not sure about this one.", usage=Usage(10, 7)))
                continue
            s = self._scores(q, r.choices, r.passages)
            out.append(Completion(text=f"{'ABCD'[s.index(max(s))]}.", usage=Usage(20, 2)))
        return out

    def describe(self) -> dict[str, Any]:
        return {"kind": "fake", "loglikelihood": self.supports_loglikelihood}


class SwitchingLLM(FakeLLM):
    """Scores its first ``first`` candidates' sets by echoed prompt log-probabilities, later ones by forced tokens
    (a server that stopped echoing prompt log-probabilities part-way)."""

    def __init__(self, first: int) -> None:
        super().__init__(True)
        self.first = first
        self.scored = 0

    def _method(self) -> str:
        self.scored += 1
        return "echo-logprobs" if self.scored <= self.first else "forced-token"


def make_switching_llm() -> FakeLLM:
    return SwitchingLLM(first=5)


class BlockingLLM(FakeLLM):
    """Holds its thread (and so the event loop) for ``block_s`` per batch, as a model computing in-process does."""

    def __init__(self, block_s: float) -> None:
        super().__init__(True)
        self.block_s = block_s

    async def aloglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        import time

        await asyncio.sleep(0)  # lets the loop turn between batches, as a real backend does
        mark = os.environ.get("RAGRADE_TEST_BLOCK_MARK")
        if mark:  # tell the test when a call begins
            with open(mark, "a", encoding="utf-8") as fh:
                fh.write(f"{len(requests)}\n")
        time.sleep(self.block_s)
        return await super().aloglikelihood(requests)


def make_blocking_llm() -> FakeLLM:
    return BlockingLLM(block_s=2.0)


def make_llm() -> FakeLLM:
    return FakeLLM(True)


def make_slow_llm() -> FakeLLM:
    return FakeLLM(True, delay_s=0.05)


def make_generating_llm() -> FakeLLM:
    return FakeLLM(False)


def external_answer(request: dict[str, Any]) -> dict[str, Any]:
    """An external RAG system: returns a context for even sites, a direct answer for odd ones."""
    site = int(re.search(r"site (\d+)", request["question"]).group(1))  # type: ignore[union-attr]
    context = f"Record {site}: the keeper of site {site} always carries"
    words = request["choices"]
    answer = site % 4
    if site % 2 == 0:
        return {"contexts": [{"text": f"{context} {words[answer]} samples.", "id": f"ext-{site}", "doc_id": "x"}]}
    return {"contexts": [], "answer": "ABCD"[answer]}


def repo_env() -> dict[str, str]:
    """The environment for a child `python -m ragrade` that must import this repository's tests (fake LLMs)."""
    import os
    from pathlib import Path

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    return env
