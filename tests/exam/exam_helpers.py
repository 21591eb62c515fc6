"""Test helpers of the exam area: a fast hashing embedder and a synthetic corpus with facts to ask about."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragrade.corpus.types import Chunk

_WORD = re.compile(r"[a-z0-9_]+")


class HashEmbedder:
    """Bag-of-words hashing embedder (with character trigrams of each word): fast, deterministic, offline."""

    name = "hash"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float64)
        for w in _WORD.findall(text.lower()):
            feats = [w] + [w[i : i + 3] for i in range(max(1, len(w) - 2))]
            for f in feats:
                h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "big")
                v[h % self.dim] += 1.0 if f == w else 0.3
        n = np.linalg.norm(v)
        return v / n if n else v

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vec(t) for t in texts]).astype(np.float32)

    def describe(self) -> dict[str, Any]:
        return {"kind": "hash", "dim": self.dim}


_PRODUCTS = [
    "Kestrel",
    "Marlin",
    "Osprey",
    "Heron",
    "Falcon",
    "Condor",
    "Pelican",
    "Puffin",
    "Albatross",
    "Kingfisher",
    "Sparrow",
    "Warbler",
    "Finch",
    "Swift",
    "Tern",
    "Gannet",
    "Plover",
    "Curlew",
]
_PEOPLE = [
    "Ada Lovelace",
    "Grace Hopper",
    "Alan Turing",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Margaret Hamilton",
    "Ken Thompson",
    "Dennis Ritchie",
    "Frances Allen",
    "John Backus",
    "Leslie Lamport",
]
_FUNCS = [
    "open_session",
    "flush_buffer",
    "load_config",
    "parse_header",
    "close_pool",
    "read_batch",
    "write_index",
    "sync_replica",
    "drop_cache",
    "merge_segments",
    "rotate_logs",
    "check_quota",
]


def synthetic_chunks(
    n_docs: int = 40, seed: int = 0, topics: Sequence[str] = ("storage", "network", "compute")
) -> list[Chunk]:
    """Chunks of made-up product documentation, each with years, numbers, names and identifiers."""
    rng = random.Random(seed)
    chunks: list[Chunk] = []
    for d in range(n_docs):
        product = f"{_PRODUCTS[d % len(_PRODUCTS)]}{'' if d < len(_PRODUCTS) else ' ' + str(d // len(_PRODUCTS) + 1)}"
        topic = topics[d % len(topics)]
        for part in range(2):
            year = rng.randint(1985, 2023)
            port = rng.randint(1024, 9999)
            limit = rng.choice([16, 32, 64, 128, 256, 512, 1024, 2048])
            pct = rng.randint(5, 95)
            person = rng.choice(_PEOPLE)
            func = rng.choice(_FUNCS)
            timeout = rng.randint(10, 600)
            text = (
                f"The {product} {topic} service was first released in {year} by a small team. "
                f"Its original design was led by {person}, who wrote the first scheduler for the project. "
                f"By default the {topic} daemon listens on port {port} and accepts at most {limit} clients. "
                f"Calling {func}() releases the resources held by a worker before it stops. "
                f"In production tests the cache served {pct}% of reads without touching the disk. "
                f"Idle connections are closed after {timeout} seconds unless keepalive is enabled."
            )
            if part == 1:
                text = text.replace("was first released", "gained its second major version").replace(
                    "original design", "redesign"
                )
            cid = f"c{d:03d}-{part}"
            chunks.append(
                Chunk(
                    id=cid,
                    doc_id=f"d{d:03d}",
                    text=text,
                    start=part * 1000,
                    end=part * 1000 + len(text),
                    strategy="test",
                    source=f"docs/{product}.md",
                    metadata={"topic": topic, "title": f"{product} {topic} guide"},
                )
            )
    return chunks
