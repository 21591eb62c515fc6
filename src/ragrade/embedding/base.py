"""The Embedder protocol: what every sentence embedder offers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragrade.io import JSONObject


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors."""

    name: str

    @property
    def dim(self) -> int:
        """The vector length."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """An array of shape ``(len(texts), dim)``, rows L2-normalised."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        ...


__all__ = ["Embedder"]
