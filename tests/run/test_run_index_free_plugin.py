"""A retriever that searches no index says so where it is registered, and a grid runs it without an index.

Two plugin retrievers are defined and registered below with :func:`register_retriever`, as a newcomer would:
``notebook`` (``needs_index=False``: its own notes, no index) and ``cribsheet`` (``needs_index=False``,
``needs_gold=True``, ``fixed_k=1``: handed each question's source passage, like the oracle). Nothing in ragrade
names them; ``take_exam`` runs both with the offline student and no ``indexes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import ragrade
from ragrade.errors import ConfigError
from ragrade.exam.files import Question, write_exam
from ragrade.io import JSONObject
from ragrade.retrieval.base import Hit, RetrieverCaps, register_retriever, retriever_caps
from ragrade.run.spec import NOT_APPLICABLE, PipelineSpec

BUILT_WITH: list[object] = []  # the index each factory was given


class Notebook:
    """Answers from its own notes: one note per question id, whatever the index."""

    name = "notebook"

    def __init__(self, notes: dict[str, tuple[str, str]]) -> None:
        self.notes = notes  # question -> (note id, note)

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return [[Hit(self.notes[q][0], "notes", 1.0, 1, self.notes[q][1])][:k] for q in queries]

    def describe(self) -> JSONObject:
        return {"retriever": self.name}


class Cribsheet:
    """Hands back the gold passage it is given, upper-cased (a gold-fed retriever of its own)."""

    name = "cribsheet"

    def retrieve(
        self, queries: Sequence[str], k: int, *, gold: Sequence[Sequence[Hit]] | None = None
    ) -> list[list[Hit]]:
        assert gold is not None and len(gold) == len(queries)
        return [[Hit(h.chunk_id, h.doc_id, 1.0, r, h.text.upper()) for r, h in enumerate(g[:k], 1)] for g in gold]

    def describe(self) -> JSONObject:
        return {"retriever": self.name}


QUESTIONS = [
    Question(
        f"q{i}",
        f"In which year did the keepers of {place} open the mill?",
        [str(1900 + 11 * ((i + j) % 4)) for j in range(4)],
        0,
        f"d{i}",
        f"c{i}",
        context=f"The keepers of {place} opened the old mill in {1900 + 11 * (i % 4)}.",
    )
    for i, place in enumerate(["Skarvikholm", "Brackenfold", "Tamsettbury", "Drummelside"])
]
NOTES = {q.question: (f"note-{q.id}", f"A note on question {q.id}.") for q in QUESTIONS}


@register_retriever("notebook", needs_index=False)
def _notebook(index: object = None, **_: object) -> Notebook:
    BUILT_WITH.append(index)
    return Notebook(NOTES)


@register_retriever("cribsheet", needs_index=False, needs_gold=True, fixed_k=1)
def _cribsheet(index: object = None, **_: object) -> Cribsheet:
    BUILT_WITH.append(index)
    return Cribsheet()


def test_capabilities_are_read_from_the_registration() -> None:
    assert retriever_caps("notebook") == RetrieverCaps(needs_index=False)
    assert retriever_caps("cribsheet") == RetrieverCaps(needs_index=False, fixed_k=1, needs_gold=True)
    assert retriever_caps("closed") == RetrieverCaps(needs_index=False, fixed_k=0)
    assert not retriever_caps("closed").retrieves and retriever_caps("oracle").retrieves
    assert retriever_caps("oracle") == RetrieverCaps(needs_index=False, fixed_k=1, needs_gold=True)
    assert retriever_caps("bm25") == retriever_caps("rerank(dense)") == RetrieverCaps()
    assert retriever_caps("external:mine") == retriever_caps("no-such-retriever") == RetrieverCaps()
    with pytest.raises(ValueError, match="fixed_k"):
        register_retriever("bad", fixed_k=-1)


def test_a_spec_with_an_index_free_plugin_is_normalised_by_its_capabilities() -> None:
    note = PipelineSpec(retriever="notebook", k=2, chunker="rec", query="hyde", post="mmr").normalised()
    assert (note.k, note.chunker, note.query, note.post) == (2, "none", "none", "none")
    assert not note.needs_index and note.retrieves
    assert note.factors()["query"] == note.factors()["post"] == NOT_APPLICABLE
    crib = PipelineSpec(retriever="cribsheet", k=5).normalised()
    assert crib.id == "llm=offline/student|retriever=cribsheet|k=1|icl=0|chunker=none"
    with pytest.raises(ConfigError, match="needs k >= 1"):
        PipelineSpec(retriever="notebook", k=0).normalised()


def test_a_grid_runs_index_free_plugin_retrievers_without_an_index(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    write_exam(exam, QUESTIONS)
    BUILT_WITH.clear()
    result = ragrade.take_exam(
        exam, tmp_path / "run", llms="offline/student", retrievers=["notebook", "cribsheet"], k=2
    )
    df = result.responses.sort_values(["retriever", "question_id"])
    assert set(df["pipeline"]) == {
        "llm=offline/student|retriever=notebook|k=2|icl=0|chunker=none",
        "llm=offline/student|retriever=cribsheet|k=1|icl=0|chunker=none",
    }
    assert df["error"].isna().all() and set(df["query"]) == set(df["post"]) == {NOT_APPLICABLE}
    assert BUILT_WITH and all(index is None for index in BUILT_WITH)
    notes = df[df["retriever"] == "notebook"]
    assert [list(r) for r in notes["retrieved"]] == [[f"note-{q.id}"] for q in QUESTIONS]
    assert not notes["gold_doc_retrieved"].any()
    crib = df[df["retriever"] == "cribsheet"]  # handed each question's own source passage
    assert [list(r) for r in crib["retrieved"]] == [[q.chunk_id] for q in QUESTIONS]
    assert [list(r) for r in crib["retrieved_docs"]] == [[q.doc_id] for q in QUESTIONS]
    assert crib["gold_doc_retrieved"].all()
