"""The driver's shared retrieval for workers in other processes (Ray) is a counted phase, as the local warm step.

Before this, ``precompute`` retrieved every distinct batch of a Ray grid in silence: the display showed
``loading ...`` for as long as the retrieval took. Resources defined here record the display's phase while
each batch is retrieved.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ragrade.exam.files import Question
from ragrade.progress_phases import current_phase
from ragrade.run.contexts import Contexts
from ragrade.run.shared import SHARED_FILE, precompute
from ragrade.run.spec import PipelineSpec


class _Recording:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.questions = {
            f"q{i}": Question(
                id=f"q{i}", question=f"what is {i}?", choices=["a", "b"], answer=0, doc_id="d", chunk_id="c"
            )
            for i in range(30)
        }

    def select(self, ids: Sequence[str]) -> list[Question]:
        return [self.questions[i] for i in ids]

    async def contexts(self, spec: PipelineSpec, questions: Sequence[Question]) -> list[Contexts]:
        shown = current_phase()
        self.lines.append(shown.line() if shown is not None else "(no phase)")
        return [Contexts(passages=[f"{spec.retriever} {q.id}"]) for q in questions]


def test_precompute_announces_a_counted_phase(tmp_path: Path) -> None:
    res = _Recording()
    specs = {
        "a": PipelineSpec(llm="x/1", retriever="bm25", k=2, chunker="c").model_dump(),
        "b": PipelineSpec(llm="x/2", retriever="bm25", k=2, chunker="c").model_dump(),  # same retrieval as a
        "c": PipelineSpec(llm="x/1", retriever="closed", k=0).model_dump(),  # retrieves nothing
    }
    ids = [f"q{i}" for i in range(30)]
    batches = [(pid, ids[s : s + 10]) for pid in specs for s in range(0, 30, 10)]
    written = precompute(res, specs, batches, tmp_path / SHARED_FILE)
    assert written == 3  # three batches of one retrieval setting, shared by a and b
    assert len(res.lines) == 3
    assert all(line.startswith("retrieving passages for 30 questions x 1 retrieval setting: ") for line in res.lines)
    assert sorted(line.split(": ")[1].split(" (")[0] for line in res.lines) == ["0/30", "10/30", "20/30"]
    assert current_phase() is None
    doc = json.loads((tmp_path / SHARED_FILE).read_text())
    assert len(doc["batches"]) == 3
