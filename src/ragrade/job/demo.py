"""``ragrade demo``: the whole method on the Python standard library's docstrings, offline, in minutes.

Offline baselines throughout: the docstrings of eight related standard-library
packages (:data:`~ragrade.corpus.demo.DEMO_TOPICS`), the cloze exam generator
with short stems (six words each side of the blank, the topic as subject), the
embedding-similarity student (``offline/student``) with ICL 0/1/2 (it cannot
read examples, so the ICL effect it shows is the honest zero), closed-book /
BM25 / dense / hybrid retrieval at k=1 and k=3 over two chunkings and the
oracle passage, hierarchical IRT over (retriever, chunker, icl), robustness
testbeds built from the corpus answered by the extractive reader, the free-text
path (offline QA triplets from the corpus, answered by closed-book / BM25 /
dense / oracle at k=3 over one chunking with the extractive reader, judged by
exact match and by the offline claims baseline ``offline/judge``), and the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ragrade.config import deep_merge
from ragrade.job.config import DEMO_CONFIG, JobConfig, load_job_config

#: a reduced demo for tests and quick looks (same stages, fewer documents and questions)
SMALL_OVERRIDES: dict[str, object] = {
    "corpus": {"demo_limit": 120},
    "chunkers": [
        {"strategy": "recursive", "size": 200, "overlap": 20},
        {"strategy": "sentence", "size": 120, "overlap": 0},
    ],
    "exam": {"n": 45},
    "irt": {"improve_steps": 2},
    "robust": {"limit": 20, "noise_ratios": [0.0, 0.4, 0.8]},
    "judge": {"n": 12},
}


def demo_config(*, small: bool = False, overrides: Mapping[str, object] | None = None) -> JobConfig:
    """The demo's job config (``small``: the reduced variant)."""
    base = deep_merge(DEMO_CONFIG, SMALL_OVERRIDES) if small else dict(DEMO_CONFIG)
    return load_job_config(None, overrides, base=base)


def default_out() -> Path:
    """Where ``ragrade demo`` writes without ``--out``."""
    return Path(str(DEMO_CONFIG["out"]))


__all__ = ["SMALL_OVERRIDES", "default_out", "demo_config"]
