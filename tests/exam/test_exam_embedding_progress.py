"""The embedding phase moves within a small step: its count advances slice by slice, not once at the end."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragrade.exam.embedding import SLICE, MemoEmbedder, slice_size
from ragrade.io import JSONObject
from ragrade.progress_phases import current_phase


class _Watching:
    """An embedder that notes what the progress display shows each time it is called."""

    name = "watching"
    dim = 4

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        now = current_phase()
        self.seen.append(now.line() if now is not None else "")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out

    def describe(self) -> JSONObject:
        return {"name": self.name}


def test_slice_size_is_a_twentieth_in_whole_batches() -> None:
    assert slice_size(92) == 16 and slice_size(3000) == 160 and slice_size(1_000_000) == SLICE
    assert slice_size(1) == 16


def test_ninety_two_texts_move_the_count_several_times() -> None:
    inner = _Watching()
    memo = MemoEmbedder(inner, persistent=False)
    vecs = memo.embed([f"text number {i}" for i in range(92)])
    assert vecs.shape == (92, 4)
    assert len(inner.seen) == 6  # 16 texts a call
    assert inner.seen[0].startswith("embedding 92 texts with watching: 0/92 (0%)")
    assert inner.seen[3].startswith("embedding 92 texts with watching: 48/92 (52%)")
