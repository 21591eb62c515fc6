from __future__ import annotations

from typing import Any

import pytest

from ragrade.corpus.types import Chunk
from ragrade.exam.config import ExamConfig
from ragrade.exam.generate import generate_exam_full
from ragrade.exam.taxonomy import BLOOM_LEVELS, bloom_levels, lemmatize, question_word, tag_question


@pytest.mark.parametrize(
    ("word", "lemma"),
    [
        ("described", "describe"),
        ("compared", "compare"),
        ("evaluated", "evaluate"),
        ("listing", "list"),
        ("running", "run"),
        ("planned", "plan"),
        ("hoping", "hope"),
        ("hopping", "hop"),
        ("studies", "study"),
        ("identifies", "identify"),
        ("chose", "choose"),
        ("written", "write"),
        ("shows", "show"),
        ("analyses", "analyse"),
        ("troubleshooting", "troubleshoot"),
        ("configured", "configure"),
        ("summarized", "summarize"),
        ("need", "need"),
        ("bring", "bring"),
        ("used", "use"),
        ("taken", "take"),
        ("opened", "open"),
        ("boxes", "box"),
        ("designs", "design"),
        ("Explained", "explain"),
    ],
)
def test_lemmatizer_rules(word: str, lemma: str) -> None:
    assert lemmatize(word) == lemma


def test_lemmatizer_prefers_vocabulary() -> None:
    assert lemmatize("visited") == "visite" or lemmatize("visited") == "visit"
    assert lemmatize("visited", vocabulary={"visit"}) == "visit"


@pytest.mark.parametrize(
    ("text", "qword"),
    [
        ("What is the default port of Redis?", "what"),
        ("Which of the following commands lists containers?", "which"),
        ("How many replicas does the cluster keep?", "how"),
        ("When was the feature released?", "when"),
        ("Why does the build fail on Windows?", "why"),
        ("Where are the logs stored?", "where"),
        ("Who wrote the scheduler?", "who"),
        ("Whose key signs the release?", "who"),
        ("Show the steps to configure the proxy.", "other"),  # "show" is not "how"
        ("The result is somewhat unexpected; explain it.", "other"),  # "somewhat" is not "what"
        ("Somehow the cache misses. Elsewhere it works.", "other"),
        ("However, the job fails. Identify the cause.", "other"),  # "however" is a connective
        ("You run a service which stores data. What should you do first?", "what"),  # the asking sentence wins
        ("Complete the statement: the limit is ____ items.", "other"),
    ],
)
def test_question_word_by_token(text: str, qword: str) -> None:
    assert question_word(text) == qword


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("List the available formats.", ["remember"]),
        ("Which statement best describes the scheduler?", ["understand"]),
        ("Which command would you use to restart the service?", ["apply"]),
        ("Compare the two storage classes. Which is cheaper?", ["analyze"]),
        ("Which option would you recommend for a small team?", ["evaluate"]),
        ("Design a retry policy that survives a zone outage.", ["create"]),
        (
            "After troubleshooting the outage, which fix would you choose and implement?",
            ["apply", "analyze", "evaluate"],
        ),
        ("How would you develop a plugin that implements the hook?", ["apply", "create"]),
    ],
)
def test_bloom_levels_by_lemmatised_keywords(text: str, expected: list[str]) -> None:
    assert bloom_levels(text) == expected


def test_bloom_levels_are_ordered_and_known() -> None:
    levels = bloom_levels("Evaluate and explain, then list them.")
    assert levels == ["remember", "understand", "evaluate"]
    assert set(levels) <= set(BLOOM_LEVELS)


def test_tag_question_defaults_factual_wh_questions_to_remember() -> None:
    assert tag_question("What is the default port of Redis?") == {"bloom": ["remember"], "qword": "what"}
    assert tag_question("Why is the sky blue?") == {"bloom": [], "qword": "why"}
    assert tag_question("Explain why the deployment fails.")["bloom"] == ["understand"]


@pytest.mark.parametrize(
    "stem",
    [
        "About Plugins, which name correctly fills the blank? Create a plugin that implements the ____ hook.",
        "Which identifier correctly fills the blank? Design and evaluate `____` before you build the index.",
        "About Tuning (Guide), which number correctly fills the blank? Analyze the ____ slowest queries first.",
    ],
)
def test_cloze_questions_are_remember_only(stem: str) -> None:
    """A blanked sentence recalls a stated fact: its verbs (create, evaluate, analyze) name no level it tests."""
    assert bloom_levels(stem) != ["remember"]  # the verbs alone would say otherwise
    assert tag_question(stem) == {"bloom": ["remember"], "qword": "which"}


def test_offline_exam_has_no_level_a_cloze_cannot_test(synth_chunks: list[Chunk], hash_embedder: Any) -> None:
    res = generate_exam_full(synth_chunks, None, ExamConfig(n=40, seed=1, min_chunk_chars=0), embedder=hash_embedder)
    assert res.questions and all(q.tags["bloom"] == ["remember"] for q in res.questions)
