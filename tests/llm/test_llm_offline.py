"""Offline baselines: the cloze student (closed book ~ chance, oracle high) and the extractive reader."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypedDict

import pytest
from tests.support.typed import some

from ragrade.errors import ConfigError
from ragrade.llm import GenerationRequest, LoglikelihoodRequest, create_llm, generate, loglikelihood
from ragrade.llm.base import LLM
from ragrade.llm.offline import key_term, sentences
from ragrade.llm.options import LLMOptions
from ragrade.llm.phrases import REJECTION_SENTENCE

FIRST = [
    "Harlow",
    "Mendip",
    "Calder",
    "Brenna",
    "Ostra",
    "Velden",
    "Quarry",
    "Linwood",
    "Paxton",
    "Ruelle",
    "Sorrel",
    "Tamsin",
    "Ulric",
    "Wexford",
    "Yarrow",
    "Zelda",
    "Arden",
    "Bexley",
    "Corwin",
    "Dunmore",
]
THINGS = ["bridge", "library", "observatory", "harbour", "mill", "tower", "museum", "canal", "station", "school"]
TEMPLATES = [
    ("The {name} {thing} was completed in {num}.", "num"),
    ("The {name} {thing} was designed by the architect {person}.", "person"),
    ("Visitors to the {name} {thing} pay a fee of {num} euros per day.", "num"),
    ("The {name} {thing} lies next to the village of {place}.", "place"),
]
FILLER = [
    "Local records describe the area as quiet for most of the year.",
    "Several renovations took place over the following decades.",
    "The site is open to the public on weekdays.",
]


class Item(TypedDict):
    q: str
    choices: list[str]
    answer: int
    passage: str


def make_exam(n: int, seed: int = 0) -> list[Item]:
    rng = random.Random(seed)
    items: list[Item] = []
    for i in range(n):
        tmpl, kind = TEMPLATES[i % len(TEMPLATES)]
        name, thing = rng.choice(FIRST), rng.choice(THINGS)
        pool = {
            "num": [str(rng.randint(1200, 2020)) for _ in range(8)],
            "person": [rng.choice(FIRST) + " " + rng.choice(FIRST) for _ in range(8)],
            "place": [rng.choice(FIRST) + "ton" for _ in range(8)],
        }[kind]
        cands = list(dict.fromkeys(pool))[:4]
        if len(cands) < 4:
            continue
        answer = rng.randrange(4)
        fact = tmpl.format(name=name, thing=thing, num=cands[answer], person=cands[answer], place=cands[answer])
        blank = tmpl.format(name=name, thing=thing, num="____", person="____", place="____")
        passage = " ".join([rng.choice(FILLER), fact, rng.choice(FILLER)])
        items.append({"q": blank, "choices": cands, "answer": answer, "passage": passage})
    return items


@pytest.fixture(scope="module")
def exam() -> list[Item]:
    return make_exam(80)


def accuracy(llm: LLM, exam: list[Item], passages_for: Callable[[int, Item], list[str]]) -> float:
    reqs = [
        LoglikelihoodRequest(
            context=it["q"],
            continuations=tuple(" " + c for c in it["choices"]),
            question=it["q"],
            passages=tuple(passages_for(i, it)),
        )
        for i, it in enumerate(exam)
    ]
    out = loglikelihood(llm, reqs)
    assert all(r.ok and r.method == "baseline" for r in out)
    return sum(
        max(range(4), key=lambda k: some(r.logprobs)[k]) == it["answer"] for r, it in zip(out, exam, strict=True)
    ) / len(exam)


def test_student_closed_book_is_chance_and_oracle_is_high(exam: list[Item]) -> None:
    llm = create_llm("offline/student", LLMOptions(cache=False))
    assert llm.is_baseline and llm.describe()["baseline"] is True
    closed = accuracy(llm, exam, lambda i, it: [])
    oracle = accuracy(llm, exam, lambda i, it: [it["passage"]])
    wrong = accuracy(llm, exam, lambda i, it: [exam[(i + 7) % len(exam)]["passage"]])
    assert 0.15 <= closed <= 0.35
    assert oracle > 0.85
    assert wrong < oracle - 0.3


def test_student_scores_are_log_softmax_and_uninformative_without_passages() -> None:
    llm = create_llm("offline/student", LLMOptions(cache=False))
    [r] = loglikelihood(
        llm,
        [
            LoglikelihoodRequest(
                "The mill opened in ____.", (" 1801", " 1802", " 1900"), question="The mill opened in ____."
            )
        ],
    )
    assert r.logprobs is not None and sum(2.718281828**x for x in r.logprobs) == pytest.approx(1.0)
    assert max(r.logprobs) - min(r.logprobs) < 1e-2
    assert r.token_counts == [1, 1, 1]


def test_student_mcq_letter_and_open_question() -> None:
    llm = create_llm("offline/student", LLMOptions(cache=False))
    passage = "The treaty was signed in Vienna in 1815. Delegates from five countries attended."
    out = generate(
        llm,
        [
            GenerationRequest(
                question="The treaty was signed in ____ in 1815.",
                passages=(passage,),
                choices=("Paris", "Vienna", "London", "Rome"),
                task="mcq",
            ),
            GenerationRequest(
                question="Where was the treaty signed?",
                passages=(passage,),
                choices=("London", "Rome", "Vienna", "Paris"),
                task="mcq",
            ),
            GenerationRequest(prompt="free text"),
        ],
    )
    assert out[0].text == "B" and out[1].text == "C"
    assert not out[2].ok and "multiple-choice" in (out[2].error or "")


def test_extractive_reader_answers_or_refuses() -> None:
    llm = create_llm("offline/extractive", LLMOptions(cache=False))
    passages = ("The Calder bridge was completed in 1887. It spans the river Tarn.", "Bananas are rich in potassium.")
    out = generate(
        llm,
        [
            GenerationRequest(question="When was the Calder bridge completed?", passages=passages, task="answer"),
            GenerationRequest(question="When was the Calder bridge completed?", passages=(), task="answer"),
            GenerationRequest(question="Who won the 1998 chess olympiad?", passages=passages, task="answer"),
        ],
    )
    assert out[0].text == "The Calder bridge was completed in 1887."
    assert out[1].text == REJECTION_SENTENCE and out[2].text == REJECTION_SENTENCE
    short = create_llm("offline/extractive", LLMOptions(cache=False), span="short")
    [a] = generate(short, [GenerationRequest(question="When was the Calder bridge completed?", passages=passages)])
    assert a.text == "1887"


def test_key_term_and_sentences() -> None:
    assert key_term("Who designed the tower?", "The tower was designed by Anna Berg in 1901.") == "Anna Berg"
    assert key_term("How many floors does it have?", "The tower has 12 floors.") == "12"
    assert sentences("One. Two? Three!\n\nFour") == ["One.", "Two?", "Three!", "Four"]


def test_unknown_offline_model() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'student'"):
        create_llm("offline/studnet")
