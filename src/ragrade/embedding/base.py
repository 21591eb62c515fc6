"""The Embedder protocol: what every sentence embedder offers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """An array of shape ``(len(texts), dim)``, rows L2-normalised."""
        ...

    def describe(self) -> dict[str, Any]:
        """Arguments for the run manifest."""
        ...


__all__ = ["Embedder"]
