"""Claim-level diagnosis against the local OpenAI-compatible server scripted with claims and verdicts.

Every metric of every answer is compared with a value worked out by hand below;
odd and garbage replies stay unparsed and counted; an HTTP error makes the
record missing and the rerun asks only what had failed (and the checks that
waited for it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.errors import ConfigError
from ragrade.io import read_json, read_jsonl
from ragrade.judge.claims_metrics import claim_metrics, k_and, k_or
from ragrade.judge.claims_parse import parse_claims, parse_verdicts
from ragrade.judge.run import JudgeRunConfig, run_judging
from ragrade.llm.options import LLMOptions

ANSWERS = [
    {
        "id": "A",
        "query": "Where is the tower?",
        "answer": "The tower is in Paris. It is 300 m tall.",
        "reference": "The tower is in Paris. It opened in 1889.",
        "contexts": ["The tower stands in Paris and opened in 1889.", "Some towers are 300 m tall."],
    },
    {
        "id": "B",
        "query": "What is Berlin?",
        "answer": "Berlin is the capital. It has 3 million people.",
        "reference": "Berlin is the capital of Germany.",
        "contexts": ["Berlin is Germany's capital city."],
    },
    {
        "id": "C",
        "query": "How old is Rome?",
        "answer": "Rome is old.",
        "reference": "Rome is ancient.",
        "contexts": ["Rome was founded long ago."],
    },
    {
        "id": "D",
        "query": "What is Oslo?",
        "answer": "Oslo is cold.",
        "reference": "Oslo is in Norway.",
        "contexts": ["Oslo lies in Norway."],
    },
    {
        "id": "E",
        "query": "Where is Lima?",
        "answer": "",
        "reference": "Lima is in Peru.",
        "contexts": ["Lima is the capital of Peru."],
    },
]
# text -> extraction reply (valid JSON, prose + fenced JSON, a bullet list, garbage, an HTTP error)
EXTRACT = {
    "The tower is in Paris. It is 300 m tall.": '{"claims": ["The tower is in Paris.", "The tower is 300 m tall."]}',
    "The tower is in Paris. It opened in 1889.": '{"claims": ["The tower is in Paris.", "The tower opened in 1889."]}',
    "Berlin is the capital. It has 3 million people.": "- Berlin is the capital.\n- Berlin has 3 million people.",
    "Berlin is the capital of Germany.": 'Sure!\n```json\n{"claims": ["Berlin is the capital of Germany."]}\n```',
    "Rome is old.": '{"claims": ["Rome is old."]}',
    "Rome is ancient.": "BOOM",
    "Oslo is cold.": "lorem ipsum dolor sit amet",
    "Oslo is in Norway.": '{"claims": ["Oslo is in Norway."]}',
    "Lima is in Peru.": '{"claims": ["Lima is in Peru."]}',
}
YES = {  # (evidence, claim) pairs that are entailed; every other pair is not
    ("The tower is in Paris. It opened in 1889.", "The tower is in Paris."),
    ("The tower is in Paris. It is 300 m tall.", "The tower is in Paris."),
    ("The tower stands in Paris and opened in 1889.", "The tower is in Paris."),
    ("The tower stands in Paris and opened in 1889.", "The tower opened in 1889."),
    ("Some towers are 300 m tall.", "The tower is 300 m tall."),
    ("Berlin is the capital of Germany.", "Berlin is the capital."),
    ("Berlin is Germany's capital city.", "Berlin is the capital."),
    ("Berlin is Germany's capital city.", "Berlin is the capital of Germany."),
    ("Rome is ancient.", "Rome is old."),
    ("Rome is old.", "Rome is ancient."),
    ("Rome was founded long ago.", "Rome is ancient."),
    ("Oslo is cold.", "Oslo is in Norway."),
    ("Oslo lies in Norway.", "Oslo is in Norway."),
    ("Lima is the capital of Peru.", "Lima is in Peru."),
}
ODD_CHECKS = {  # evidence -> a reply in another shape than asked
    "Berlin is the capital of Germany.": "1. yes\n2. no",
    "Berlin is the capital. It has 3 million people.": "Hmm, hard to say.",
    "Berlin is Germany's capital city.": '{"verdicts": ["yes", "maybe", "yes"]}',
}
_BLOCK = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)


class Script:
    """Answers extraction and check prompts from the tables above; "BOOM" is an HTTP 500 while ``broken``."""

    def __init__(self) -> None:
        self.broken = True

    def __call__(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        found = _BLOCK.search(prompt)
        assert found is not None, prompt
        block = found.group(1)
        if "Text to split:" in prompt:
            reply = EXTRACT[block]
            if reply == "BOOM":
                if self.broken:
                    raise RuntimeError("scripted server failure")
                return '{"claims": ["Rome is ancient."]}'
            return reply
        if block in ODD_CHECKS:
            return ODD_CHECKS[block]
        claims = re.findall(r"^\d+\. (.*)$", prompt.split("Claims:\n", 1)[1], re.MULTILINE)
        return json.dumps({"verdicts": ["yes" if (block, c) in YES else "no" for c in claims]})


# hand-worked metrics (None: undetermined); see the module docstring of ragrade.judge.claims_metrics
EXPECTED = {
    "A": dict(
        precision=0.5,
        recall=0.5,
        f1=0.5,
        claim_recall=1.0,
        context_precision=0.5,
        context_utilisation=0.5,
        noise_relevant=0.0,
        noise_irrelevant=0.5,
        hallucination=0.0,
        self_knowledge=0.0,
        faithfulness=1.0,
    ),
    "B": dict(
        precision=0.5,
        recall=None,
        f1=None,
        claim_recall=1.0,
        context_precision=1.0,
        context_utilisation=None,
        noise_relevant=0.0,
        noise_irrelevant=0.0,
        hallucination=0.0,
        self_knowledge=0.0,
        faithfulness=1.0,
    ),
    "C": dict(
        precision=1.0,
        recall=1.0,
        f1=1.0,
        claim_recall=1.0,
        context_precision=1.0,
        context_utilisation=1.0,
        noise_relevant=0.0,
        noise_irrelevant=0.0,
        hallucination=0.0,
        self_knowledge=1.0,
        faithfulness=0.0,
    ),
    "D": dict(
        precision=None,
        recall=1.0,
        f1=None,
        claim_recall=1.0,
        context_precision=1.0,
        context_utilisation=1.0,
        noise_relevant=None,
        noise_irrelevant=None,
        hallucination=None,
        self_knowledge=None,
        faithfulness=None,
    ),
    # an empty answer: no claims (precision undefined), the reference's fact found but not used
    "E": dict(
        precision=None,
        recall=0.0,
        f1=None,
        claim_recall=1.0,
        context_precision=1.0,
        context_utilisation=0.0,
        noise_relevant=None,
        noise_irrelevant=None,
        hallucination=None,
        self_knowledge=None,
        faithfulness=None,
    ),
}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-claims")
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({**a, "pipeline": "p1"}) + "\n" for a in ANSWERS))
    return tmp_path


def _cfg(server: OpenAIServer) -> JudgeRunConfig:
    return JudgeRunConfig(
        metrics=["claims"],
        llm="openai/test-model",
        llm_options=LLMOptions(base_url=server.base_url, max_retries=0, cache=False),
    )


def test_claims_against_scripted_server(env: Path) -> None:
    script = Script()
    with OpenAIServer(responder=script) as server:
        run_judging(env / "answers.jsonl", env / "out", _cfg(server))
        # A: 2 extractions + 2 checks + 2 passages; B: 2 + 2 + 1; C: 2 + check:reference (the rest waits);
        # D: 2 + check:answer + 1 passage
        assert server.requests_total == 6 + 5 + 3 + 4 + 2  # E: its empty answer is neither split nor asked
        _, recs = read_jsonl(env / "out" / "scores.jsonl", kind="judge_scores")
        by = {r["id"]: r for r in recs}
        assert len(recs) == 5  # nothing lost
        c = by["C"]
        assert c["status"] == "failed" and c["score"] is None and "500" in c["error"]
        assert c["requests"]["extract:answer"]["status"] == "ok"
        for key in ("A", "B", "D", "E"):
            assert by[key]["values"] == pytest.approx(EXPECTED[key]), key
        assert by["B"]["counts"]["n_unparsed_requests"] == 1 and by["B"]["counts"]["n_unparsed_verdicts"] == 2
        assert by["B"]["undetermined"] == {
            "recall": 1,
            "context_utilisation": 1,
            "noise_relevant": 1,
            "hallucination": 1,
            "faithfulness": 1,
        }
        assert by["D"]["requests"]["extract:answer"] == {
            "status": "unparsed",
            "raw": "lorem ipsum dolor sit amet",
            "note": "no claims list found",
        }
        assert by["D"]["status"] == "ok" and by["D"]["score"] is None
        # the rerun asks only the failed extraction and the checks that waited for it
        server.reset_counters()
        script.broken = False
        summary = run_judging(env / "answers.jsonl", env / "out", _cfg(server))
        asked = [m["messages"][-1]["content"] for m in server.log]
        assert server.requests_total == 3
        assert sum("Text to split" in p for p in asked) == 1 and all("Rome" in p for p in asked)
    _, recs = read_jsonl(env / "out" / "scores.jsonl", kind="judge_scores")
    by = {r["id"]: r for r in recs}
    assert by["C"]["status"] == "ok" and by["C"]["values"] == pytest.approx(EXPECTED["C"])
    stats = {s["statistic"]: s for s in summary["configs"]["p1"]["claims"]["statistics"]}
    assert stats["precision"]["value"] == pytest.approx((0.5 + 0.5 + 1.0) / 3) and stats["precision"]["n_used"] == 3
    assert stats["f1"]["value"] == pytest.approx(0.75) and stats["f1"]["n_used"] == 2
    assert stats["claim_recall"]["ci_low"] is not None
    assert summary["totals"]["claims"] == {"ok": 5, "unparsed": 0, "failed": 0, "skipped": 0}


def test_kleene_logic_and_metrics_by_hand() -> None:
    assert k_or([0.0, None]) is None and k_or([None, 1.0]) == 1.0 and k_or([]) == 0.0
    assert k_and(0.0, None) == 0.0 and k_and(1.0, None) is None
    # closed book: no passages; everything the answer gets right is self-knowledge
    res = claim_metrics([1.0, 0.0], [1.0], [], [])
    v = res["values"]
    assert (v["self_knowledge"], v["hallucination"], v["faithfulness"], v["claim_recall"]) == (0.5, 0.5, 0.0, 0.0)
    assert v["context_precision"] is None and v["context_utilisation"] is None


def test_tolerant_parsers() -> None:
    assert parse_claims('{"claims": []}').items == []
    assert parse_claims("1. One fact.\n2) Two facts.").items == ["One fact.", "Two facts."]
    assert parse_claims('{"claims": ["a", 3]}').status == "unparsed"
    assert parse_verdicts('{"verdicts": ["yes", "no"]}', 2).items == [1.0, 0.0]
    assert parse_verdicts('[{"claim": 2, "verdict": "no"}, {"claim": 1, "verdict": true}]', 2).items == [1.0, 0.0]
    assert parse_verdicts("Claim 1: supported\nClaim 2: not supported", 2).items == [1.0, 0.0]
    assert parse_verdicts('{"verdicts": ["yes"]}', 2).status == "unparsed"  # wrong length: nothing is guessed
    assert parse_verdicts('{"verdicts": ["yes", "perhaps"]}', 2).items == [1.0, None]


def test_offline_baseline_runs_and_says_baseline(env: Path) -> None:
    summary = run_judging(env / "answers.jsonl", env / "off", JudgeRunConfig(metrics=["claims"], llm="offline/judge"))
    assert summary["judges"]["claims"]["baseline"] is True
    assert "baseline" in summary["judges"]["claims"]["method"]
    assert read_json(env / "off" / "manifest.json")["components"]["judge:claims"]["baseline"] is True
    _, recs = read_jsonl(env / "off" / "scores.jsonl", kind="judge_scores")
    assert {r["status"] for r in recs} == {"ok"} and all(r["baseline"] is True for r in recs)
    a = next(r for r in recs if r["id"] == "A")
    assert a["claims"]["answer"] == ["The tower is in Paris.", "It is 300 m tall."]  # sentence claims
    assert a["values"]["precision"] == 0.5  # the shared sentence is entailed by the reference; the height is not


def test_bad_settings(env: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="offline claims baseline"):
        run_judging(
            env / "answers.jsonl", env / "x", JudgeRunConfig(metrics=["claims", "correctness"], llm="offline/judge")
        )
    bad = tmp_path / "p.txt"
    bad.write_text("no placeholders here")
    with pytest.raises(ConfigError, match=r"claims_check prompt .* lacks the placeholder"):
        run_judging(
            env / "answers.jsonl",
            env / "x",
            JudgeRunConfig(metrics=["claims"], llm="offline/judge", prompts={"claims_check": str(bad)}),
        )


def test_dry_run_counts_extractions_and_checks(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragrade.cli.main import main

    assert (
        main(
            [
                "--dry-run",
                "judge",
                str(env / "answers.jsonl"),
                "--metrics",
                "claims",
                "--llm",
                "openai/m",
                "--out",
                str(env / "dry"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # per answer: 2 extractions + check against the reference + against the answer + one per passage
    assert '"claims_extract": 9' in out and '"claims_check": 14' in out
    assert not (env / "dry").exists()
