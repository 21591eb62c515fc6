"""End to end against the local OpenAI-compatible server, scripted per item; metrics equal hand-computed values."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer
from tests.support.typed import as_list, dig

from ragrade.errors import ConfigError
from ragrade.llm import create_llm
from ragrade.llm.phrases import ERROR_SENTENCE, REJECTION_SENTENCE
from ragrade.robust.detect import REJECTION_SENTENCE_ZH
from ragrade.robust.run import RobustRunConfig, read_results, run_robust

DATA = Path(__file__).parent / "data"


def _messages(body: dict[str, Any]) -> tuple[str, str]:
    msgs = body["messages"]
    return msgs[0]["content"], msgs[-1]["content"]


def _script(answers: dict[str, str | Callable[[str], str]], calls: Counter[str]) -> Callable[[dict[str, Any]], str]:
    """Reply by the question found in the user message; raise (HTTP 500) for 'FAIL'."""

    def responder(body: dict[str, Any]) -> str:
        _, user = _messages(body)
        for question, reply in answers.items():
            if question in user:
                calls[question] += 1
                text = reply(user) if callable(reply) else reply
                if text == "FAIL":
                    raise RuntimeError("scripted failure")
                return text
        raise AssertionError(f"unscripted request: {user[:200]}")

    return responder


def _llm(server: OpenAIServer, name: str = "openai/test-model") -> Any:
    return create_llm(name, base_url=server.base_url, cache=False, max_retries=0, timeout=10)


def _cfg(tmp_path: Path, data: str, testbed: str, **kw: Any) -> RobustRunConfig:
    return RobustRunConfig(data=DATA / data, testbed=testbed, llm=["openai/test-model"], out=tmp_path / "out", **kw)


NOISE_SCRIPT: dict[str, str | Callable[[str], str]] = {
    "Harbor Games": "Port Alder hosted them.",  # item 0: correct
    "Veltron summit": "I think 170.",  # item 1: wrong (not 70)
    "Lumen Bridge": REJECTION_SENTENCE,  # item 2: refuses
    "tide tables": "FAIL",  # item 3: the call fails
}


def test_noise_run_metrics_records_and_resume(tmp_path: Path) -> None:
    calls: Counter[str] = Counter()
    with OpenAIServer(responder=_script(NOISE_SCRIPT, calls)) as srv:
        cfg = _cfg(tmp_path, "en_base.jsonl", "noise", noise_ratios=[0.0, 0.4])
        [run], table = run_robust(cfg, llms=[_llm(srv)])
        m = run.metrics
        # the failed calls are missing: counted, in no denominator
        assert (m["n"], m["failed"], m["skipped"]) == (6, 2, 0)
        for group in m["by_noise_ratio"]:
            assert (group["n"], group["failed"]) == (3, 1)
            assert (group["accuracy"]["k"], group["accuracy"]["n"]) == (1, 3)
            assert (group["rejection_rate"]["k"], group["rejection_rate"]["n"]) == (1, 3)
            assert group["accuracy"]["value"] == pytest.approx(1 / 3)
        assert m["by_noise_ratio"][1]["noise_ratio_actual_mean"] == pytest.approx((0.4 + 0.6 + 0.4 + 0.6) / 4)
        assert m["flagged"] == 4  # items 1 and 3 have 2 positives: padded at 0 and 0.4
        assert [f["key"] for f in m["failures"]] == ["3|0|documents", "3|0.4|documents"]
        assert table["columns"] == ["0", "0.4"] and table["rows"][0]["0"] == 33.33
        # files
        out = tmp_path / "out"
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["ragrade"] == {"kind": "robust_metrics", "version": 2}
        for key in ("accuracy", "rejection_rate", "error_detection_rate", "error_correction_rate", "partial_accuracy"):
            assert key in metrics
        assert (out / "table.csv").read_text().splitlines() == [
            "model,0,0.4,actual noise 0,actual noise 0.4",
            "openai/test-model,33.33,33.33,0.300,0.500",
        ]
        header, records = read_results(out / "results.jsonl")
        assert header is not None and header["kind"] == "robust_results"
        r = records["1|0.4|documents"]
        assert (r["n_positive"], r["n_noise"], r["noise_ratio"], r["noise_ratio_actual"]) == (2, 3, 0.4, 0.6)
        assert len(as_list(r["documents"])) == 5 and len(as_list(r["doc_order"])) == 5 and r["flags"]
        assert r["response"] == "I think 170." and dig(r, "labels", "correct") is False
        assert records["3|0|documents"]["failed"] and records["3|0|documents"]["error"]
        # the prompt carried the documents in the recorded order, and the structured view went along
        body = next(b for b in srv.log if "Veltron" in b["messages"][-1]["content"])
        user = body["messages"][-1]["content"]
        assert REJECTION_SENTENCE in body["messages"][0]["content"]
        orders = [
            [user.index(str(dig(d, "text"))) for d in as_list(records[k]["documents"])]
            for k in ("1|0|documents", "1|0.4|documents")
        ]
        assert any(pos == sorted(pos) for pos in orders)
        assert body.get("model") == "test-model"
        assert sum(calls.values()) == 8

        # resume: only the failed items are asked again; now item 3 answers "chapter 7"
        calls.clear()
        srv.responder = _script({**NOISE_SCRIPT, "tide tables": "It is in chapter 7."}, calls)
        [again], _ = run_robust(cfg, llms=[_llm(srv)])
        assert dict(calls) == {"tide tables": 2}
        assert (again.generated, again.resumed) == (2, 6)
        assert again.metrics["failed"] == 0
        assert [g["accuracy"]["k"] for g in again.metrics["by_noise_ratio"]] == [2, 2]
        # re-scoring with the original rules needs no generation; "70" is now found in "170"
        calls.clear()
        [rgb], _ = run_robust(cfg.model_copy(update={"scoring": "rgb"}), llms=[_llm(srv)])
        assert not calls
        assert [g["accuracy"]["k"] for g in rgb.metrics["by_noise_ratio"]] == [3, 3]


def test_resume_refuses_another_configuration(tmp_path: Path) -> None:
    calls: Counter[str] = Counter()
    with OpenAIServer(responder=_script({**NOISE_SCRIPT, "tide tables": "7"}, calls)) as srv:
        cfg = _cfg(tmp_path, "en_base.jsonl", "noise", noise_ratios=[0.0])
        run_robust(cfg, llms=[_llm(srv)])
        with pytest.raises(ConfigError, match=r"other inputs or settings: docs: 5 -> 3; write to a new"):
            run_robust(cfg.model_copy(update={"docs": 3}), llms=[_llm(srv)])


def _cf_answer(user: str) -> str:
    if "Documents:" not in user:  # closed book: knows items 20 and 21
        return "Port Alder" if "Harbor Games" in user else ("March" if "Lumen Bridge open" in user else "No idea.")
    if "Harbor Games" in user:
        return f"{ERROR_SENTENCE} The correct answer is Port Alder."
    if "Lumen Bridge open" in user:
        return "It opened in June."  # echoes the counterfactual answer
    if "Veltron" in user:
        return ERROR_SENTENCE
    return "Ada Brenn designed it."


def _judge_reply(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    if "Ada Brenn" in prompt:
        return "I am not sure."  # unreadable verdict
    if ERROR_SENTENCE in prompt:
        return '```json\n{"verdict": "yes"}\n```'
    return '{"verdict": "no", "reason": "no error reported"}'


def test_counterfactual_run_with_judge(tmp_path: Path) -> None:
    def responder(body: dict[str, Any]) -> str:
        _, user = _messages(body)
        if user.startswith("You are checking"):
            return _judge_reply(body)
        return _cf_answer(user)

    with OpenAIServer(responder=responder) as srv:
        cfg = _cfg(tmp_path, "en_fact.jsonl", "counterfactual", judge="openai/test-model", judge_base_url=srv.base_url)
        [run], table = run_robust(cfg, llms=[_llm(srv)], judge_llm=_llm(srv))
    m = run.metrics
    assert m["n"] == 4 and m["n_without_docs"] == 4
    assert (m["accuracy_without_docs"]["k"], m["accuracy_without_docs"]["n"]) == (2, 4)  # Acc
    assert (m["accuracy"]["k"], m["accuracy"]["n"]) == (2, 4)  # Acc_doc: items 20 and 23
    assert (m["error_detection_rate"]["k"], m["error_detection_rate"]["n"]) == (2, 4)  # ED: 20, 22
    assert (m["error_correction_rate"]["k"], m["error_correction_rate"]["n"]) == (1, 2)  # CR: 20
    assert (m["counterfactual_answer_rate"]["k"], m["counterfactual_answer_rate"]["n"]) == (1, 4)  # 21
    assert (m["error_detection_rate_judged"]["k"], m["error_detection_rate_judged"]["n"]) == (2, 3)
    assert m["judge_failed"] == 1
    assert (m["error_correction_rate_judged"]["k"], m["error_correction_rate_judged"]["n"]) == (1, 2)
    assert table["columns"] == ["Acc", "Acc_doc", "ED", "ED*", "CR"]
    assert table["rows"][0] == {
        "model": "openai/test-model",
        "Acc": 50.0,
        "Acc_doc": 50.0,
        "ED": 50.0,
        "ED*": 66.67,
        "CR": 50.0,
    }


def test_negative_run_in_chinese(tmp_path: Path) -> None:
    seen_systems: list[str] = []

    def responder(body: dict[str, Any]) -> str:
        system, user = _messages(body)
        seen_systems.append(system)
        return REJECTION_SENTENCE_ZH if "港湾运动会" in user else "新图书馆于1月3日开放。"

    with OpenAIServer(responder=responder) as srv:
        [run], table = run_robust(_cfg(tmp_path, "zh_base.jsonl", "negative"), llms=[_llm(srv)])
    m = run.metrics
    assert m["lang"] == "zh" and all("文档" in s for s in seen_systems)
    assert (m["rejection_rate"]["k"], m["rejection_rate"]["n"]) == (1, 2)
    assert (m["accuracy"]["k"], m["accuracy"]["n"]) == (1, 2)
    assert table["columns"] == ["Rej", "Rej*"] and table["rows"][0]["Rej"] == 50.0
    _, records = read_results(tmp_path / "out" / "results.jsonl")
    assert all(r["n_noise"] == r["n_docs"] == 5 for r in records.values())


def test_integration_run_with_two_models_makes_one_table(tmp_path: Path) -> None:
    def responder(body: dict[str, Any]) -> str:
        _, user = _messages(body)
        model = body["model"]
        if "Harbor Games" in user:
            return "Port Alder and Grey Cove." if model == "m1" else "Port Alder."
        return "Ada Brenn; Kolm and Sons built it." if model == "m1" else "Kolm & Sons."

    with OpenAIServer(responder=responder) as srv:
        cfg = RobustRunConfig(
            data=DATA / "en_int.jsonl",
            testbed="integration",
            llm=["openai/m1", "openai/m2"],
            out=tmp_path / "out",
            noise_ratios=[0.0, 0.2],
        )
        runs, table = run_robust(cfg, llms=[_llm(srv, "openai/m1"), _llm(srv, "openai/m2")])
    m1, m2 = (r.metrics for r in runs)
    assert [g["accuracy"]["k"] for g in m1["by_noise_ratio"]] == [2, 2]
    assert [g["accuracy"]["k"] for g in m2["by_noise_ratio"]] == [0, 0]
    assert [g["partial_accuracy"]["value"] for g in m2["by_noise_ratio"]] == [0.5, 0.5]
    assert (tmp_path / "out" / "openai_m1" / "metrics.json").exists()
    csv_lines = (tmp_path / "out" / "table.csv").read_text().splitlines()
    assert csv_lines == [
        "model,0,0.2,actual noise 0,actual noise 0.2",
        "openai/m1,100.00,100.00,0.300,0.300",
        "openai/m2,0.00,0.00,0.300,0.300",
    ]
    assert [r["model"] for r in table["rows"]] == ["openai/m1", "openai/m2"]
