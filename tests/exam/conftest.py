"""Fixtures of the exam tests: a fast hashing embedder and a synthetic chunk set."""

from __future__ import annotations

import pytest
from tests.exam.exam_helpers import HashEmbedder, synthetic_chunks

from ragrade.corpus.types import Chunk


@pytest.fixture(scope="session")
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture(scope="session")
def synth_chunks() -> list[Chunk]:
    return synthetic_chunks(60)
