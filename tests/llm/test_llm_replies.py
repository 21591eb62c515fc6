"""The one rule for replies that are not the model's answer, and every reader that applies it: judge scores
and verdicts, claim lists and claim verdicts, exam questions and QA triplets refuse a reply that was cut off
or that repeats the prompt's placeholders, with the same outcome for every judge."""

from __future__ import annotations

import pytest

from ragrade.exam.parse import PARSE_REASONS, ParsedQuestion, ParseFailure, parse_question
from ragrade.exam.prompts import SYSTEM_PROMPT, USER_PROMPT
from ragrade.judge.claims import load_claims_prompt
from ragrade.judge.claims_parse import parse_claims, parse_verdicts
from ragrade.judge.llm_judges import default_prompt
from ragrade.judge.parse import parse_score, parse_verdict
from ragrade.llm.replies import leaked_template_token, reply_problem, unclosed_json
from ragrade.qa.generate import load_generation_prompt, parse_generation

CORRECTNESS = default_prompt("correctness")
FAITHFULNESS = default_prompt("faithfulness")
EXAM = f"{SYSTEM_PROMPT}\n{USER_PROMPT}"
QA = load_generation_prompt(None)
GOOD_QUESTION = (
    '{"question": "Which command lists the running containers?", '
    '"choices": ["docker ps", "docker ls", "docker show", "docker top"], "answer": "A"}'
)


@pytest.mark.parametrize(
    ("text", "template", "kind"),
    [
        ('{"verdict": "yes", "reason": "<one short sentence>"}', FAITHFULNESS, "echoed_template"),
        ('{"verdict": "yes", "reason": "<one short sentence>"}', None, "echoed_template"),  # generic description
        ('{"verdict": "yes" or "no", "reason": "It is in [1]."}', FAITHFULNESS, "echoed_template"),
        ('{"score": <integer from 1 to 5>, "reason": "close"}', CORRECTNESS, "echoed_template"),
        ('{"question": "...", "answer": "..."}', None, "echoed_template"),
        ('{"question": "When was it built?", "answer": "…"}', QA, "echoed_template"),
        ("Question: <the question>\nA) <option>\nB) <option>", EXAM, "echoed_template"),
        ("A) Mars\nB) <option>", EXAM, "echoed_template"),  # one-word placeholder as a whole value
        ('{"claims": ["<claim>", "<claim>"]}', load_claims_prompt("claims_extract", None), "echoed_template"),
        ('{"verdict": "yes", "reason": "The answer is in', None, "truncated"),
        ('```json\n{\n  "score": 1,\n  "reason": "The', None, "truncated"),
        ('Here it is:\n["a fact", "another', None, "truncated"),
    ],
)
def test_placeholders_and_cut_off_replies_are_problems(text: str, template: str | None, kind: str) -> None:
    got = reply_problem(text, None, template)
    assert got is not None and got.kind == kind, got


@pytest.mark.parametrize(
    ("text", "template"),
    [
        ('{"verdict": "yes", "reason": "The passage [1] states the year."}', FAITHFULNESS),
        ('{"score": 4, "reason": "Misses the <main> element."}', CORRECTNESS),
        ("The `<select>` element holds <option> children.", None),  # a one-word tag inside prose
        ("Which call takes {x: 1} as an argument?", None),  # braces inside a sentence: not a JSON reply
        ('{"a": "x}"}\nthen text with an unclosed { brace', None),  # the first JSON closes; later braces are prose
        ("Score: 4\nThe answer is right... mostly.", CORRECTNESS),
        (GOOD_QUESTION, EXAM),
        ("<answer>yes</answer>", "Answer inside <answer>...</answer> tags: <answer>{answer}</answer>"),
        ('<passage id="1"> says so', 'Passages: <passage id="1">{contexts}'),  # a tag, not a description
    ],
)
def test_real_answers_are_no_problem(text: str, template: str | None) -> None:
    assert reply_problem(text, "stop", template) is None


def test_finish_reason_length_is_cut_off_even_when_the_text_reads_well() -> None:
    got = reply_problem('{"score": 5, "reason": "matches"}', "length")
    assert got is not None and got.kind == "truncated" and "token limit" in got.note
    assert reply_problem("", "length") is None  # empty replies are the readers' own case
    assert unclosed_json('{"a": "b\\"}') and not unclosed_json('{"a": "b\\\\"}')  # escapes inside strings


@pytest.mark.parametrize(
    ("text", "finish"),
    [
        ('{"verdict": "yes", "reason": "<one short sentence>"}', "stop"),  # the prompt's own example
        ('{"verdict": "yes" or "no", "reason": "<one short sentence>"}', "stop"),
        ('{"verdict": "yes", "reason": "The answer is', "length"),  # cut off: JSON left open
        ('{"verdict": "yes", "reason": "The answer is', None),  # the same without a finish_reason
        ('{\n  "verdict": "yes",\n  "reason": "The answer', None),
        ('{"verdict": "yes", "reason": "Everything is in [1]."}', "length"),  # the server says cut off
    ],
)
@pytest.mark.parametrize("metric", ["faithfulness", "relevancy", "correctness"])
def test_every_judge_leaves_echoed_and_cut_off_replies_unparsed(metric: str, text: str, finish: str | None) -> None:
    template = default_prompt(metric)
    reply = text.replace('"verdict": "yes"', '"score": 5') if metric == "correctness" else text
    if metric == "correctness":
        got = parse_score(reply, finish_reason=finish, template=template)
    else:
        got = parse_verdict(reply, finish_reason=finish, template=template)
    assert got.status == "unparsed" and got.value is None, got
    assert "placeholder" in str(got.note) or "cut off" in str(got.note)


def test_the_same_reply_complete_is_parsed_by_every_judge() -> None:
    assert parse_verdict('{"verdict": "yes", "reason": "In [1]."}', finish_reason="stop", template=FAITHFULNESS).value
    assert parse_score('{"score": 5, "reason": "Right."}', finish_reason="stop", template=CORRECTNESS).value == 5.0
    # a quoted key before the colon reads alike for a verdict and for a score (not JSON: a trailing comma)
    assert parse_verdict('{"verdict": "no", "reason": "x",}').value == 0.0
    assert parse_score('{"score": 2, "reason": "x",}').value == 2.0


def test_reasons_are_the_models_words_without_json_fragments() -> None:
    score = parse_score('{\n  "score": 2,\n  "reason": "It names the wrong year.",\n}')
    assert score.status == "ok" and score.value == 2.0 and score.reason == "It names the wrong year."
    verdict = parse_verdict('{\n"verdict": "no",\n"reasoning": "Adds a figure the passages lack."\n,}')
    assert verdict.status == "ok" and verdict.reason == "Adds a figure the passages lack."
    assert parse_verdict("NO\nReason: the year is not in the passages.").reason == "the year is not in the passages."
    assert parse_score("Score: 4\n```\n{\n}\n```").reason is None


def test_claims_echoed_or_cut_off_are_unparsed() -> None:
    extract, check = load_claims_prompt("claims_extract", None), load_claims_prompt("claims_check", None)
    assert parse_claims('{"claims": ["<claim>", "<claim>"]}', template=extract).status == "unparsed"
    assert parse_claims('{"claims": ["Paris is in France.", "It has', template=extract).status == "unparsed"
    assert parse_claims('{"claims": ["Paris is in France."]}', finish_reason="length").status == "unparsed"
    assert parse_verdicts('{"verdicts": ["yes" or "no", ...]}', 2, template=check).status == "unparsed"
    assert parse_verdicts('{"verdicts": ["yes", "no"', 2, template=check).status == "unparsed"
    assert parse_verdicts('{"verdicts": ["yes", "no"]}', 2, finish_reason="stop", template=check).items == [1.0, 0.0]


@pytest.mark.parametrize(
    ("text", "finish", "reason"),
    [
        ('{"question": "...", "choices": ["...", "...", "...", "..."], "answer": "A"}', "stop", "echoed_template"),
        (
            "Question: <the question>\nA) <option>\nB) <option>\nC) <option>\nD) <option>\nCorrect Answer: <letter>",
            None,
            "echoed_template",
        ),
        (GOOD_QUESTION.replace('"docker top"', '"<option>"'), "stop", "echoed_template"),
        (GOOD_QUESTION[:-30], None, "truncated"),
        (GOOD_QUESTION, "length", "truncated"),
    ],
)
def test_exam_questions_echoed_or_cut_off_are_refused(text: str, finish: str | None, reason: str) -> None:
    got = parse_question(text, finish_reason=finish, template=EXAM)
    assert isinstance(got, ParseFailure) and got.reason == reason and reason in PARSE_REASONS, got
    assert isinstance(parse_question(GOOD_QUESTION, finish_reason="stop", template=EXAM), ParsedQuestion)


def test_qa_triplets_echoed_or_cut_off_are_unparsed() -> None:
    assert parse_generation('{"question": "...", "answer": "..."}', template=QA) is None
    assert parse_generation('{"question": "When was the tower built?", "answer": "..."}', template=QA) is None
    assert parse_generation('{"question": "When was the tower built?", "answer": "In 18', template=QA) is None
    done = '{"question": "When was the tower built?", "answer": "1889"}'
    assert parse_generation(done, finish_reason="length", template=QA) is None
    assert parse_generation(done, finish_reason="stop", template=QA) == ("When was the tower built?", "1889")


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("Reply with the word ready.<|im", "<|im"),  # cut off inside the token
        ("ready<end_of_turn>\n<start_of_turn>user", "<end_of_turn>"),  # the first one in the text
        ("ready</s>", "</s>"),
        ("ready<|eot_id|>", "<|eot_id|>"),
        ("ready [/INST]", "[/INST]"),
        ("ready <|custom_marker|> more", "<|custom_marker|>"),
        ("ready<start_of", "<start_of"),
        ("ready", None),
        ("Use the <b> tag and a|b pipes.", None),
        ("ready.<", None),  # one character is not enough to tell
    ],
)
def test_leaked_chat_template_tokens(text: str, token: str | None) -> None:
    assert leaked_template_token(text) == token
