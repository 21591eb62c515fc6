"""An answer that abstains makes no claim: no precision, hallucination or faithfulness; recall 0; counted apart."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main
from ragrade.io import read_jsonl
from ragrade.judge.abstain import is_abstention
from ragrade.judge.run import JudgeRunConfig, run_judging
from ragrade.llm.options import LLMOptions
from ragrade.llm.phrases import REJECTION_SENTENCE

REFERENCE, PASSAGE = "Lima is in Peru.", "Lima is the capital of Peru."
ANSWERS = {"R": REJECTION_SENTENCE, "S": "I'm sorry, I cannot answer that.", "N": "Lima lies in Peru."}
_BLOCK = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)
UNDEFINED = ("precision", "noise_relevant", "noise_irrelevant", "hallucination", "self_knowledge", "faithfulness")


@pytest.fixture
def answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-claims")
    path = tmp_path / "answers.jsonl"
    rows = [
        {"id": k, "query": "Where is Lima?", "answer": a, "reference": REFERENCE, "contexts": [PASSAGE]}
        for k, a in ANSWERS.items()
    ]
    path.write_text("".join(json.dumps({**r, "pipeline": "p"}) + "\n" for r in rows))
    return path


def script(body: dict[str, Any]) -> str:
    """Each text is one claim; a claim is entailed unless it is an abstention's (as a real judge would say)."""
    prompt = body["messages"][-1]["content"]
    found = _BLOCK.search(prompt)
    assert found is not None, prompt
    block = found.group(1)
    if "Text to split:" in prompt:
        return json.dumps({"claims": [block]})
    claims = re.findall(r"^\d+\. (.*)$", prompt.split("Claims:\n", 1)[1], re.MULTILINE)
    return json.dumps({"verdicts": ["no" if c in (ANSWERS["R"], ANSWERS["S"]) else "yes" for c in claims]})


def _check(by: dict[str, Any], summary: dict[str, Any], n_used_precision: int) -> None:
    for key in ("R", "S"):
        values = by[key]["values"]
        assert by[key]["abstained"] is True and by[key]["claims"]["answer"] == []
        assert all(values[m] is None for m in UNDEFINED), values
        assert (values["recall"], values["f1"], values["context_utilisation"]) == (0.0, 0.0, 0.0)
        assert (values["claim_recall"], values["context_precision"]) == (1.0, 1.0)  # the retriever did its part
    assert by["N"]["abstained"] is False and by["N"]["values"]["precision"] == 1.0
    s = summary["configs"]["p"]["claims"]
    stats = {row["statistic"]: row for row in s["statistics"]}
    assert s["n_abstained"] == 2
    assert stats["precision"]["n_used"] == n_used_precision and stats["hallucination"]["n_used"] == n_used_precision
    assert stats["recall"]["n_used"] == 3 and stats["recall"]["value"] == pytest.approx(1 / 3)


def test_llm_path_asks_nothing_about_an_abstention(answers: Path, tmp_path: Path) -> None:
    with OpenAIServer(responder=script) as server:
        url = server.base_url
        options = LLMOptions(base_url=url, max_retries=0, cache=False)
        cfg = JudgeRunConfig(metrics=["claims"], llm="openai/test-model", llm_options=options)
        summary = run_judging(answers, tmp_path / "out", cfg)
        # N: 2 extractions + check:reference + check:answer + 1 passage; R and S: the reference's extraction and
        # the passage check of its one claim, the same requests for both and N's reference extraction (sent once)
        assert server.requests_total == 5 + 1
    _, recs = read_jsonl(tmp_path / "out" / "scores.jsonl", kind="judge_scores")
    _check({r["id"]: r for r in recs}, summary, n_used_precision=1)


def test_offline_baseline_and_cli_summary_count_abstentions(
    answers: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "off"
    assert main(["judge", str(answers), "--metrics", "claims", "--llm", "offline/judge", "--out", str(out)]) == 0
    assert "abstained=2" in capsys.readouterr().out
    _, recs = read_jsonl(out / "scores.jsonl", kind="judge_scores")
    _check({r["id"]: r for r in recs}, json.loads((out / "summary.json").read_text()), n_used_precision=1)


def test_abstention_detector() -> None:
    for text in (REJECTION_SENTENCE, "I'm sorry, I can't help.", "I don't know.", "The passages do not mention it."):
        assert is_abstention(text), text
    for other in ("Lima is in Peru.", "No, it was built in 1889.", "", None, "I know: it is in Peru."):
        assert not is_abstention(other), other
