from __future__ import annotations

import pytest

from ragrade.exam.parse import PARSE_REASONS, ParsedQuestion, ParseFailure, parse_question

LAYOUT = """Question: What is the default port used by the Redis server?
A) 6379
B) 5432
C) 27017
D) 3306
Correct Answer: A) 6379
Explanation: Redis listens on 6379 unless configured otherwise."""


def test_text_layout_with_explanation() -> None:
    got = parse_question(LAYOUT)
    assert got == ParsedQuestion(
        "What is the default port used by the Redis server?", ("6379", "5432", "27017", "3306"), 0, "text"
    )


def test_markdown_layout_and_lead_in() -> None:
    text = (
        "Here is a question for you:\n**Question 1:** Which planet is the largest in the solar system?\n"
        "**A)** Mars\n**B)** Jupiter\n**C)** Venus\n**D)** Earth\n\n**Correct Answer:** **B**"
    )
    got = parse_question(text)
    assert isinstance(got, ParsedQuestion)
    assert got.question == "Which planet is the largest in the solar system?"
    assert got.choices[got.answer] == "Jupiter"


def test_lowercase_parenthesised_letters_and_answer_sentence() -> None:
    text = "Which of these is a prime number?\n(a) 4\n(b) 6\n(c) 7\n(d) 9\nThe correct answer is (c)."
    got = parse_question(text)
    assert isinstance(got, ParsedQuestion) and got.answer == 2


def test_multiline_choice_is_joined() -> None:
    text = (
        "Question: Which statement about the scheduler is true?\nA) It runs jobs\nin parallel\nB) It is single "
        "threaded\nC) It needs root\nD) It has no queue\nAnswer: A"
    )
    got = parse_question(text)
    assert isinstance(got, ParsedQuestion) and got.choices[0] == "It runs jobs in parallel"


@pytest.mark.parametrize(
    "text",
    [
        '{"question": "Which command lists running containers?", "choices": ["docker ps", "docker ls", '
        '"docker run", "docker images"], "answer": "A"}',
        '```json\n{"question": "Which command lists running containers?", "choices": ["A) docker ps", '
        '"B) docker ls", "C) docker run", "D) docker images"], "correct_answer": "A) docker ps"}\n```',
        '{"question": "Which command lists running containers?", "options": {"A": "docker ps", "B": "docker ls", '
        '"C": "docker run", "D": "docker images"}, "correct_answer": "A"}',
        '{"question": "Which command lists running containers?", "choices": ["docker ps", "docker ls", '
        '"docker run", "docker images"], "answer": 0}',
        'Sure! {"question": "Which command lists running containers?", "choices": ["docker ps", "docker ls", '
        '"docker run", "docker images"], "answer": "docker ps"}',
    ],
)
def test_json_variants(text: str) -> None:
    got = parse_question(text)
    assert isinstance(got, ParsedQuestion)
    assert got.format == "json"
    assert got.choices == ("docker ps", "docker ls", "docker run", "docker images") and got.answer == 0


Q = "Question: Which planet is the largest in the solar system?\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty_output"),
        ("   \n", "empty_output"),
        (
            '{"question": "Which command lists running containers?", "choices": ["docker ps", "docker ls"',
            "truncated",
        ),
        (
            '{"question": "Which command lists containers?", "choices": ["a", "b", "c", "d"], "answer": "A"',
            "truncated",
        ),
        (
            '{"question": "Which command lists running containers?", "choices": ["docker ps", "docker ls",]}',
            "invalid_json",
        ),
        (
            '{"question": "...", "choices": ["...", "...", "...", "..."], "answer": "A"}',
            "echoed_template",
        ),
        ("A) Mars\nB) Jupiter\nC) Venus\nD) Earth\nCorrect Answer: B", "no_question"),
        (Q + "A) Mars\nB) Jupiter\nC) Venus\nCorrect Answer: B", "too_few_choices"),
        ("I am sorry, I cannot write a question about this.", "too_few_choices"),
        (Q + "A) Mars\nB) Jupiter\nC) Venus\nD) Earth\nE) Pluto\nCorrect Answer: B", "too_many_choices"),
        (
            '{"question": "Which planet is the largest one?", "choices": ["Mars", "", "Venus", "Earth"], '
            '"answer": "A"}',
            "empty_choice",
        ),
        (Q + "A) Mars\nB) Jupiter\nC) mars.\nD) Earth\nCorrect Answer: B", "duplicate_choices"),
        (Q + "A) Mars\nB) Jupiter\nC) Venus\nD) Earth", "no_answer"),
        (Q + "A) Mars\nB) Jupiter\nC) Venus\nD) Earth\nCorrect Answer: B and C", "multiple_answers"),
        (Q + "A) Mars\nB) Jupiter\nC) Venus\nD) Earth\nCorrect Answer: Saturn", "answer_not_among_choices"),
        (Q + "A) Mars\nB) Jupiter\nC) Venus\nD) Earth\nCorrect Answer: E", "answer_not_among_choices"),
        ("Question: Why?\nA) Mars\nB) Jupiter\nC) Venus\nD) Earth\nAnswer: B", "question_too_short"),
        (
            "Question: Planets are big and round and far away from us.\nA) Mars\nB) Jupiter\nC) Venus\nD) Earth\n"
            "Answer: B",
            "not_a_question",
        ),
    ],
)
def test_each_failure_has_one_reason(text: str, reason: str) -> None:
    got = parse_question(text)
    assert isinstance(got, ParseFailure), got
    assert got.reason == reason
    assert got.reason in PARSE_REASONS


def test_cloze_blank_counts_as_question_form() -> None:
    text = (
        "Question: Fill in: the Redis server listens on port ____ by default.\nA) 6379\nB) 5432\nC) 27017\n"
        "D) 3306\nAnswer: A"
    )
    assert isinstance(parse_question(text), ParsedQuestion)
