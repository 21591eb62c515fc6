"""Fakes of tests/run/test_run_warm_progress.py: a plugin retriever and a prefetching LLM that record the progress
display's line while they work (imported once, by the test and by the ``py/`` LLM spec)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tests.run.fakes import FakeLLM

from ragrade.io import JSONObject
from ragrade.progress import Progress
from ragrade.progress_phases import current_phase
from ragrade.retrieval.base import Hit, register_retriever

SEEN: list[tuple[str, str]] = []  # (who, the display's line) recorded while the fakes work
DISPLAY: list[Progress] = []
PAUSE = {"s": 0.0}  # seconds each prefetch slice and retrieval batch takes (the CLI test lets lines be printed)
LLM = "py/tests.run.warm_fakes:make_prefetching_llm"


def _line() -> str:
    if DISPLAY:
        return str(DISPLAY[-1].status_line())
    running = current_phase()
    return running.line() if running is not None else ""


class Watcher:
    """An index-free plugin retriever: the passage stating each question's answer, recording the display."""

    name = "watcher"

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        SEEN.append(("retrieve", _line()))
        time.sleep(PAUSE["s"])
        return [[Hit(f"c{q}", "d", 1.0, 1, f"A note about {q}")][:k] for q in queries]

    def describe(self) -> JSONObject:
        return {"retriever": self.name}


@register_retriever("watcher", needs_index=False)
def _watcher(index: object = None, **_: object) -> Watcher:
    SEEN.append(("build", _line()))
    return Watcher()


class PrefetchingLLM(FakeLLM):
    """The overlap fake with a ``prefetch`` (as the offline baselines have), recording the display."""

    name = "fake/prefetching"

    def prefetch(self, items: Sequence[tuple[str, Sequence[str], Sequence[str]]]) -> None:
        SEEN.append(("prefetch", _line()))
        time.sleep(PAUSE["s"])


def make_prefetching_llm() -> PrefetchingLLM:
    SEEN.append(("llm", _line()))
    return PrefetchingLLM(True)
