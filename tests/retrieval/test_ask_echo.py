"""`ragrade ask` reports only the citations the model wrote (issue 36, 6): a base model's reply repeats the
prompt (the instructions, with their example markers [1] or [2][3], the numbered passages), and that part
is cut out with a note; a marker counts only outside it and when its passage was given; a reply that only
repeats the prompt is no answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from tests.retrieval.retrieval_data import FACTS, fact_docs
from tests.support.typed import as_list, dig, some

from ragrade.cli.main import main
from ragrade.corpus.files import write_documents
from ragrade.llm.base import Completion, GenerationRequest
from ragrade.retrieval.ask import DEFAULT_PROMPT, Answer, Assistant, render
from ragrade.retrieval.base import Hit

PASSAGES = [FACTS[0][0], FACTS[2][0], FACTS[5][0]]  # lighthouse, drone, glacier
QUESTION = FACTS[2][1]
INSTRUCTIONS = DEFAULT_PROMPT.split("Passages:")[0]  # cites "[1] or [2][3]" as its example
ECHO_NOTE = "Note: the model repeated its prompt"


class _Retriever:
    name = "fixed"

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return [
            [Hit(f"c{n}", f"d{n}", 1.0 / n, n, text, f"docs/f{n}.txt") for n, text in enumerate(PASSAGES[:k], 1)]
            for _ in queries
        ]


class _ScriptedLLM:
    """Replies with ``script(prompt)``: the prompt ask sent, so a reply can repeat it."""

    name = "scripted/base"

    def __init__(self, script: Callable[[str], str]) -> None:
        self.script = script

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        return [Completion(self.script(some(r.messages)[-1].content), finish_reason="length") for r in requests]


def _ask(script: Callable[[str], str], k: int = 3) -> Answer:
    return Assistant(_Retriever(), _ScriptedLLM(script), k=k).ask(QUESTION)  # type: ignore[arg-type]


def _cited(ans: Answer) -> list[int]:
    return [int(str(dig(c, "n"))) for c in as_list(ans.to_dict()["citations"])]


def test_citations_in_the_repeated_instructions_do_not_count() -> None:
    ans = _ask(lambda prompt: f"{INSTRUCTIONS}The drone flies for 41 minutes [3].")
    assert "[1] or [2][3]" in INSTRUCTIONS  # the example markers the reply repeats
    assert ans.error is None and ans.answer == "The drone flies for 41 minutes [3]."
    assert ans.cited == [3] and _cited(ans) == [3]
    record = ans.to_dict()
    assert str(record["reply"]).startswith("You answer questions")
    assert "repeated its prompt" in str(dig(record, "notes", 0))
    out = render(ans)
    assert out.startswith("Answer: The drone flies for 41 minutes [3].\n" + ECHO_NOTE)
    assert "its citations are not counted" in out
    assert "Cited:\n  [3] c3  (docs/f3.txt)\nPassages:" in out
    assert "You answer questions" not in out


def test_a_reply_that_only_repeats_the_prompt_is_no_answer() -> None:
    ans = _ask(lambda prompt: f"{prompt}\n{prompt}"[:1500])
    assert ans.answer == "" and ans.error is not None and "no answer of its own" in ans.error
    assert ans.cited == [] and _cited(ans) == []
    out = render(ans)
    assert out.startswith("Answer failed: the model gave no answer of its own")
    assert ECHO_NOTE in out and "Cited:" not in out
    assert "You answer questions" not in out


def test_a_plain_answer_keeps_its_citation_and_has_no_note() -> None:
    ans = _ask(lambda prompt: "It was painted crimson [1].")
    assert ans.answer == "It was painted crimson [1]." and ans.cited == [1] and _cited(ans) == [1]
    record = ans.to_dict()
    assert record["notes"] == [] and "reply" not in record
    out = render(ans)
    assert "Note:" not in out and "Cited:\n  [1] c1  (docs/f1.txt)" in out


def test_a_quote_of_a_passage_is_an_answer_not_an_echo() -> None:
    ans = _ask(lambda prompt: f"{PASSAGES[1]} [2]")
    assert ans.answer == f"{PASSAGES[1]} [2]" and ans.cited == [2] and ans.notes() == []


def test_a_citation_of_a_passage_not_given_is_not_reported() -> None:
    ans = _ask(lambda prompt: "It flies for 41 minutes [9][2].")
    assert ans.cited == [2] and ans.uncounted == [9] and _cited(ans) == [2]
    out = render(ans)
    assert "Note: [9] cites no passage given (3 passages); not counted" in out
    assert "Cited:\n  [2] c2  (docs/f2.txt)\nPassages:" in out


def test_an_answer_without_markers_cites_nothing() -> None:
    ans = _ask(lambda prompt: "About forty minutes.")
    assert ans.cited == [] and _cited(ans) == [] and "Cited:" not in render(ans)


# --- the command, against a scripted OpenAI-compatible server ------------------------------------------------


@pytest.fixture(scope="module")
def bm25_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ask-echo")
    write_documents(base / "docs.jsonl", fact_docs())
    assert main(["index", str(base / "docs.jsonl"), "-o", str(base / "idx"), "--no-dense", "--json"]) == 0
    return base / "idx"


def _prompt(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    return str(messages[-1]["content"])


@pytest.mark.usefixtures("llm_cache_dir")
def test_ask_cli_cuts_the_echo_and_fails_when_nothing_is_left(
    bm25_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.openai_server import OpenAIServer

    def base_model(body: dict[str, object]) -> str:  # the instructions again, then an answer citing [1]
        prompt = _prompt(body)
        if "Varnholm" in prompt.split("Question:")[-1]:
            return f"{prompt.split('Passages:')[0]}It was painted crimson [1]."
        return f"{prompt}\n{prompt}"[:2000]  # nothing but the prompt, twice

    with OpenAIServer(responder=base_model) as srv:
        args = ["ask", str(bm25_index), "-r", "bm25", "-k", "3", "--llm", "openai/test-model"]
        rc = main([*args, "--llm-base-url", srv.base_url, FACTS[0][1]])
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert out.startswith("Answer: It was painted crimson [1].\n" + ECHO_NOTE)
        cited = out.split("Cited:\n")[1].split("Passages:")[0].splitlines()
        assert len(cited) == 1 and cited[0].startswith("  [1] fact0#")  # not [2] or [3] of the example

        rc = main([*args, "--llm-base-url", srv.base_url, "--json", FACTS[5][1]])
        out, err = capsys.readouterr()
    assert rc == 2
    record = json.loads(out)
    assert record["answer"] == "" and "no answer of its own" in record["error"]
    assert record["citations"] == [] and "repeated its prompt" in record["notes"][0]
    assert record["reply"].startswith("You answer questions")
    assert "got no answer from the LLM" in err and "Traceback" not in err


# --- the embedded Gemma 3 270M base model, which repeats the prompt --------------------------------------------


@pytest.mark.slow
@pytest.mark.llamacpp
@pytest.mark.usefixtures("llm_cache_dir")
def test_ask_with_the_embedded_base_model_reports_only_its_own_citations(
    bm25_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ik_llama_cpp", reason="pip install 'ragrade[llamacpp]'")
    args = ["ask", str(bm25_index), FACTS[0][1], "-r", "bm25", "-k", "3", "--llm", "llamacpp/gemma-3-270m", "--json"]
    rc = main(args)
    out, err = capsys.readouterr()
    record = json.loads(out)
    assert rc == (0 if record["error"] is None else 2), err
    assert "You answer questions" not in record["answer"] and "Passages:" not in record["answer"]
    if "reply" in record:  # it repeated the prompt: said so, and its citations are only those of its own words
        assert "repeated its prompt" in record["notes"][0]
    for c in record["citations"]:
        assert f"[{c['n']}]" in record["answer"] and 1 <= c["n"] <= len(record["passages"])
