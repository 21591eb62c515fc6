"""LLM judges against the local OpenAI-compatible server: valid, odd, garbage and failed verdicts."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main
from ragrade.io import read_json, read_jsonl
from ragrade.judge.run import JudgeRunConfig, run_judging
from ragrade.llm.options import LLMOptions

# marker -> (correctness reply, faithfulness reply); "BOOM" makes the server answer HTTP 500
REPLIES = {
    "m0": ('{"score": 5, "reason": "matches the reference"}', '{"verdict": "yes", "reason": "in [1]"}'),
    "m1": ("Score: 4/5", "**Verdict: YES**"),
    "m2": ("I would give it 2 out of 5.\nIt names the wrong year.", "NO\nThe year is not in the passages."),
    "m3": ("lorem ipsum dolor sit amet", "maybe, hard to tell"),
    "m4": ("Score: 8/10", '```json\n{"verdict": "no"}\n```'),
    "m5": ("BOOM", "BOOM"),
    "m6": ('```json\n{"score": 1, "reason": "off topic"}\n```', ""),
    "m7": ("", "Answer: yes"),
}
EXPECTED = {
    "correctness": {
        "m0": 5.0,
        "m1": 4.0,
        "m2": 2.0,
        "m3": "unparsed",
        "m4": "unparsed",
        "m5": "failed",
        "m6": 1.0,
        "m7": "unparsed",
    },
    "faithfulness": {
        "m0": 1.0,
        "m1": 1.0,
        "m2": 0.0,
        "m3": "unparsed",
        "m4": 0.0,
        "m5": "failed",
        "m6": "unparsed",
        "m7": 1.0,
    },
}
_MARK = re.compile(r"#(m\d)")


class Script:
    def __init__(self) -> None:
        self.broken = True

    def __call__(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        found = _MARK.search(prompt)
        assert found is not None, prompt
        marker = found.group(1)
        reply = REPLIES[marker][0 if "Reference answer:" in prompt else 1]
        if reply == "BOOM" and self.broken:
            raise RuntimeError("scripted server failure")
        return (
            '{"score": 3, "reason": "fixed"}'
            if reply == "BOOM" and "Reference answer:" in prompt
            else ('{"verdict": "yes"}' if reply == "BOOM" else reply)
        )


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-judge")
    return tmp_path


def _external_file(path: Path, markers: Sequence[str] = tuple(REPLIES)) -> Path:
    """An external system's outputs with its own field names (q, resp, ctx objects, gold, sys, uid)."""
    lines = []
    for i, m in enumerate(markers):
        lines.append(
            {
                "uid": f"q{i}",
                "sys": "A" if i % 2 == 0 else "B",
                "q": f"When was thing {i} built?",
                "resp": f"It was built in {1900 + i}. #{m}",
                "ctx": [{"text": f"Thing {i} was built in {1900 + i}.", "score": 0.9}],
                "gold": f"{1900 + i}",
            }
        )
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


FIELDS = {"query": "q", "answer": "resp", "contexts": "ctx", "reference": "gold", "config": "sys", "id": "uid"}


def _cfg(server: OpenAIServer, **kw: object) -> JudgeRunConfig:
    return JudgeRunConfig.model_validate(
        {
            "metrics": kw.pop("metrics", ["correctness", "faithfulness", "exact"]),
            "llm": "openai/test-model",
            "llm_options": LLMOptions(base_url=server.base_url, max_retries=0),
            "fields": FIELDS,
            **kw,
        }
    )


def _status_or_score(rec: dict[str, Any]) -> object:
    return rec["score"] if rec["status"] == "ok" else rec["status"]


def test_valid_odd_garbage_and_failed_verdicts_counted_exactly(env: Path) -> None:
    script = Script()
    answers = _external_file(env / "outputs.jsonl")
    with OpenAIServer(responder=script) as server:
        summary = run_judging(answers, env / "out", _cfg(server))
        assert server.requests_total == 16  # 8 answers x 2 LLM metrics, one try each
        first_url = server.base_url
    _, recs = read_jsonl(env / "out" / "scores.jsonl", kind="judge_scores")
    assert len(recs) == 8 * 3  # nothing lost: one record per answer and metric
    by = {(r["id"], r["metric"]): r for r in recs}
    for metric, expected in EXPECTED.items():
        for i, m in enumerate(REPLIES):
            rec = by[(f"q{i}", metric)]
            assert _status_or_score(rec) == expected[m], (metric, m, rec)
            if rec["status"] == "unparsed":
                assert rec["score"] is None
                assert rec["samples"][0]["raw"] == REPLIES[m][0 if metric == "correctness" else 1]
            if rec["status"] == "failed":
                assert "500" in rec["samples"][0]["error"]
    assert summary["totals"]["correctness"] == {"ok": 4, "unparsed": 3, "failed": 1, "skipped": 0}
    assert summary["totals"]["faithfulness"] == {"ok": 5, "unparsed": 2, "failed": 1, "skipped": 0}
    # per configuration (A = even markers m0 m2 m4 m6, B = odd m1 m3 m5 m7)
    a, b = summary["configs"]["A"]["correctness"], summary["configs"]["B"]["correctness"]
    assert (a["n_ok"], a["n_unparsed"], a["n_failed"]) == (3, 1, 0)
    assert (b["n_ok"], b["n_unparsed"], b["n_failed"]) == (1, 2, 1)
    assert a["statistics"][0]["value"] == pytest.approx((5 + 2 + 1) / 3)  # mean over ok only
    assert a["statistics"][0]["n_used"] == 3
    csv_text = (env / "out" / "summary.csv").read_text()
    assert "nan" not in csv_text.lower()
    assert "1,B,correctness,mean,4.0,,,1,4,1,2,1,0" in csv_text  # one value: no interval, counts visible
    manifest = read_json(env / "out" / "manifest.json")
    assert manifest["kind"] == "judge" and manifest["missing"] == 2  # the failed verdicts
    assert manifest["status"] == "incomplete: 2 failed requests missing, rerun to retry"
    assert manifest["counts"] == {"n_answers": 8, "n_unparsed": 5, "n_failed": 2}
    assert b"sk-test-judge" not in b"".join(p.read_bytes() for p in (env / "out").iterdir())  # journal.sqlite too

    # resume: parsed and unparsed verdicts are reused, only the two failed requests are retried
    script.broken = False
    port = int(first_url.rsplit(":", 1)[1].split("/")[0])  # the same server restarted at its address
    with OpenAIServer(responder=script, port=port) as server:
        summary2 = run_judging(answers, env / "out", _cfg(server))
        assert server.requests_total == 2
    assert summary2["totals"]["correctness"] == {"ok": 5, "unparsed": 3, "failed": 0, "skipped": 0}
    assert summary2["runs"]["correctness"] == {"reused": 7, "skipped": 0, "scored": 1}


def test_self_consistency_samples_spread_and_seeds(env: Path) -> None:
    seen: list[tuple[object, object]] = []

    def responder(body: dict[str, Any]) -> str:
        seen.append((body.get("seed"), body.get("temperature")))
        return {0: "Score: 4/5", 1: '{"score": 5}', 2: "no idea"}[body["seed"]]

    answers = _external_file(env / "o.jsonl", markers=("m0",))
    with OpenAIServer(responder=responder) as server:
        summary = run_judging(answers, env / "out", _cfg(server, metrics=["correctness"], samples=3))
    assert sorted(seen) == [(0, 0.7), (1, 0.7), (2, 0.7)]
    _, [rec] = read_jsonl(env / "out" / "scores.jsonl")
    assert rec["status"] == "ok" and rec["score"] == pytest.approx(4.5)
    assert (rec["n_samples"], rec["n_ok"], rec["n_unparsed"], rec["n_failed"]) == (3, 2, 1, 0)
    assert rec["spread"]["std"] == pytest.approx(0.5)
    s = summary["configs"]["A"]["correctness"]
    assert s["samples"] == {"n_ok": 2, "n_unparsed": 1, "n_failed": 0, "n_total": 3}
    assert s["self_consistency"]["measure"] == "std"


def test_screen_top_judges_only_best_configuration(env: Path) -> None:
    lines = []
    for i in range(4):
        for sys_name, answer in (
            ("good", f"The tower opened in {1900 + i}."),
            ("bad", "I like turtles a lot."),
            ("mid", f"Around {1900 + i}, maybe later."),
        ):
            lines.append(
                {
                    "uid": f"q{i}",
                    "sys": sys_name,
                    "q": f"When did tower {i} open?",
                    "resp": answer + " #m0",
                    "ctx": ["The tower opened."],
                    "gold": f"The tower opened in {1900 + i}.",
                }
            )
    answers = env / "three.jsonl"
    answers.write_text("\n".join(json.dumps(x) for x in lines))
    with OpenAIServer(responder=lambda body: '{"score": 4, "reason": "ok"}') as server:
        summary = run_judging(answers, env / "out", _cfg(server, metrics=["bertscore", "correctness"], screen_top=1))
        assert server.requests_total == 4  # only the 4 answers of the best configuration
    assert summary["screening"]["selected"] == ["good"]
    assert summary["screening"]["ranking"][0]["config"] == "good"
    assert set(summary["not_judged"]) == {"bad", "mid"}
    assert "correctness" in summary["configs"]["good"] and "correctness" not in summary["configs"]["bad"]
    agreement = read_json(env / "out" / "agreement.json")
    assert agreement["configs"]["good"]["spearman_bertscore_correctness"]["n"] == 4


def test_cli_judges_external_file_with_field_map(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answers = _external_file(env / "ext.jsonl", markers=("m0", "m1", "m2", "m3"))
    with OpenAIServer(responder=Script()) as server:
        code = main(
            [
                "judge",
                str(answers),
                "--metrics",
                "correctness,exact",
                "--llm",
                "openai/test-model",
                "--llm-base-url",
                server.base_url,
                "--out",
                str(env / "o"),
                "--max-retries",
                "0",
                "--field",
                "query=q",
                "--field",
                "answer=resp",
                "--field",
                "contexts=ctx",
                "--field",
                "reference=gold",
                "--field",
                "config=sys",
                "--field",
                "id=uid",
                "--json",
            ]
        )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["totals"]["correctness"] == {"ok": 3, "unparsed": 1, "failed": 0, "skipped": 0}
    assert set(summary["configs"]) == {"A", "B"}
    _, recs = read_jsonl(env / "o" / "scores.jsonl")
    assert {r["id"] for r in recs} == {"q0", "q1", "q2", "q3"}
    agreement = read_json(env / "o" / "agreement.json")
    assert agreement["all"]["kappa_correctness_exact"]["n"] == 3


def test_custom_prompt_file(env: Path, tmp_path: Path) -> None:
    prompt = tmp_path / "p.txt"
    prompt.write_text("Grade {answer} against {reference}. Reply with a number from 1 to 5. CUSTOM")
    got: list[str] = []

    def responder(body: dict[str, Any]) -> str:
        got.append(body["messages"][-1]["content"])
        return "3"

    answers = _external_file(env / "o.jsonl", markers=("m0",))
    with OpenAIServer(responder=responder) as server:
        run_judging(answers, env / "out", _cfg(server, metrics=["correctness"], prompts={"correctness": str(prompt)}))
    assert got == ["Grade It was built in 1900. #m0 against 1900. Reply with a number from 1 to 5. CUSTOM"]


def test_echoed_examples_and_cut_off_replies_are_unparsed_for_every_judge(env: Path) -> None:
    # m0: the prompt's own example, m1: a reply the server cuts at max_tokens, m2: a real verdict
    replies = {
        "m0": (
            '{"score": 5, "reason": "<one short sentence>"}',
            '{"verdict": "yes", "reason": "<one short sentence>"}',
        ),
        "m1": (
            '{"score": 1, "reason": "The answer gives a different year than the reference does, so it is wrong."}',
            '{"verdict": "yes", "reason": "The year given in the answer is stated in passage one, word for word."}',
        ),
        "m2": ('{"score": 4, "reason": "Right year."}', '{"verdict": "yes", "reason": "Stated in [1]."}'),
    }

    def responder(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        found = _MARK.search(prompt)
        assert found is not None
        return replies[found.group(1)][0 if "Reference answer:" in prompt else 1]

    answers = _external_file(env / "o.jsonl", markers=tuple(replies))
    with OpenAIServer(responder=responder) as server:
        summary = run_judging(answers, env / "out", _cfg(server, max_tokens=24))
    _, recs = read_jsonl(env / "out" / "scores.jsonl", kind="judge_scores")
    by = {(r["id"], r["metric"]): r for r in recs}
    for metric in ("correctness", "faithfulness"):
        assert [_status_or_score(by[(f"q{i}", metric)]) for i in range(3)] == [
            "unparsed",
            "unparsed",
            4.0 if metric == "correctness" else 1.0,
        ]
        echoed, cut = by[("q0", metric)]["samples"][0], by[("q1", metric)]["samples"][0]
        assert "placeholder '<one short sentence>'" in echoed["note"] and "cut off" in cut["note"]
        assert by[("q2", metric)]["reason"] in ("Right year.", "Stated in [1].")
        assert summary["totals"][metric] == {"ok": 1, "unparsed": 2, "failed": 0, "skipped": 0}
