"""The benchmark's own record shapes: records that used to fail or be skipped, and results comparable under rgb.

Every fixture is written here, in the shapes of the benchmark's files (one JSON
record per line); no benchmark data is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main
from ragrade.llm import create_llm
from ragrade.report.sections_more import robustness
from ragrade.report.sources import RunFiles
from ragrade.robust.build import BuildOptions, build_instance
from ragrade.robust.data import load_rgb
from ragrade.robust.detect import build_detectors
from ragrade.robust.match import contains, match_parts, replace_all
from ragrade.robust.metrics import label_response
from ragrade.robust.prompts import default_prompts, load_prompts, sentence_warnings
from ragrade.robust.rgb_scoring import rgb_label_response
from ragrade.robust.run import RobustRunConfig, read_results, run_robust

# an integration record with three required names but two groups of positive documents
ZH_INT_THREE_PARTS = {
    "id": 6,
    "query": "北湾杯的前三名分别是哪三支球队？",
    "answer": ["红隼队", "蓝鲸队", "青松队"],
    "positive": [["北湾杯冠军是红隼队，亚军是蓝鲸队。"], ["青松队获得北湾杯季军。"]],
    "negative": ["北湾杯每年秋季举行。", "北湾杯共有十二支球队参赛。", "决赛门票已售罄。", "比赛在新体育场进行。"],
}
ZH_INT_TWO_PARTS = {
    "id": 7,
    "query": "新图书馆的开放日期和闭馆日分别是什么？",
    "answer": [["1月3日"], ["周一"]],
    "positive": [["新图书馆于1月3日开放。"], ["新图书馆每周一闭馆。"]],
    "negative": ["新图书馆共有五层。", "市民可以在网上预约座位。", "咖啡厅由志愿者经营。"],
}
# counterfactual records; the second has no noise documents at all
ZH_FACT = [
    {
        "id": 0,
        "query": "2031年港湾运动会在哪个城市举办？",
        "answer": "北湾市",
        "fakeanswer": "东港",
        "positive": ["2031年港湾运动会在北湾市举行。"],
        "positive_wrong": ["2031年港湾运动会在东港举行。"],
        "negative": ["港湾运动会包括赛艇项目。", "门票将于春季开售。"],
    },
    {
        "id": 1,
        "query": "灯塔桥由谁设计？",
        "answer": "林岚",
        "fakeanswer": "周远",
        "positive": ["灯塔桥由工程师林岚设计。"],
        "positive_wrong": ["灯塔桥由工程师周远设计。"],
        "negative": [],
    },
    {
        "id": 2,
        "query": "新图书馆几月开放？",
        "answer": "三月",
        "fakeanswer": "六月",
        "positive": ["新图书馆三月开放。"],
        "positive_wrong": ["新图书馆六月开放。"],
        "negative": ["图书馆共有五层。"],
    },
]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _llm(server: OpenAIServer) -> Any:
    return create_llm("openai/test-model", base_url=server.base_url, cache=False, max_retries=0, timeout=10)


# ------------------------------------------------------------------ 1. more answer parts than positive groups


def test_integration_records_with_more_parts_than_groups_load_and_are_counted(tmp_path: Path) -> None:
    path = _write(tmp_path / "zh_int.jsonl", [ZH_INT_TWO_PARTS, ZH_INT_THREE_PARTS])
    data = load_rgb(path)
    item = {it.id: it for it in data.items}["6"]
    assert item.answer == (("红隼队",), ("蓝鲸队",), ("青松队",)) and len(item.positive_groups) == 2
    assert data.report["more_answer_parts_than_groups"] == {"count": 1, "ids": ["6"]}
    for construction in ("ragrade", "rgb"):
        inst = build_instance(item, "integration", 0.4, BuildOptions(construction=construction))
        assert not inst.skipped
        assert sorted(d.group for d in inst.docs if d.pool == "positive" and d.group is not None) == [0, 1]
        assert inst.n_noise == 3  # the documents come from the two groups that exist


# ------------------------------------------------------------------ 2. refusal and error sentences under rgb


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_builtin_sentences_are_recognised_by_the_rgb_rules(lang: str) -> None:
    lp = default_prompts().lang(lang)
    system = lp.system.format(rejection=lp.rejection_sentence, error=lp.error_sentence)
    assert lp.rejection_sentence in system and lp.error_sentence in system
    assert rgb_label_response(lp.rejection_sentence, [["北湾市"]], lang)["rejected"]
    assert rgb_label_response(f"{lp.error_sentence} Port Alder", [["Port Alder"]], lang)["error_detected"]
    assert sentence_warnings(lp, lang, "rgb", build_detectors()) == []


def test_custom_sentences_unknown_to_the_rgb_rules_are_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "p.toml"
    p.write_text('[en]\nrejection_sentence = "I cannot say."\nerror_sentence = "Some sources look wrong."\n')
    lp = load_prompts(p).lang("en")
    det = build_detectors(always=[lp.rejection_sentence], always_error=[lp.error_sentence])
    warnings = sentence_warnings(lp, "en", "rgb", det)
    assert len(warnings) == 2
    assert "I cannot say." in warnings[0] and "insufficient information" in warnings[0]
    assert "Some sources look wrong." in warnings[1] and "factual errors" in warnings[1]
    assert sentence_warnings(lp, "en", "default", det) == []  # the instructed sentences join the detectors
    data = _write(
        tmp_path / "en.jsonl",
        [
            {
                "id": 0,
                "query": "Who hosted the 2031 Harbor Games?",
                "answer": "Port Alder",
                "positive": ["Port Alder hosted them."],
                "negative": ["Tickets go on sale in spring."],
            }
        ],
    )
    with OpenAIServer(responder=lambda body: "I cannot say.") as srv:
        rc = main(
            [
                "robust",
                "run",
                str(data),
                "--testbed",
                "negative",
                "--llm",
                "openai/test-model",
                "--llm-base-url",
                srv.base_url,
                "--out",
                str(tmp_path / "o"),
                "--prompts",
                str(p),
                "--scoring",
                "rgb",
                "--no-cache",
            ]
        )
    err = capsys.readouterr().err
    assert rc == 0
    assert err.count("ragrade: warning:") == 2 and "I cannot say." in err


def test_obeying_the_builtin_english_instruction_counts_as_a_refusal_under_rgb(tmp_path: Path) -> None:
    sentence = default_prompts().lang("en").rejection_sentence
    data = _write(
        tmp_path / "en.jsonl",
        [
            {
                "id": i,
                "query": f"Who hosted the {2031 + i} Harbor Games?",
                "answer": "Port Alder",
                "positive": ["Port Alder hosted them."],
                "negative": ["Tickets go on sale in spring.", "Rowing is popular."],
            }
            for i in range(2)
        ],
    )
    with OpenAIServer(responder=lambda body: sentence) as srv:
        for scoring in ("default", "rgb"):
            cfg = RobustRunConfig(
                data=data, testbed="negative", llm=["openai/test-model"], out=tmp_path / "o", scoring=scoring
            )
            [run], _ = run_robust(cfg, llms=[_llm(srv)])
            assert run.metrics["rejection_rate"]["value"] == 1.0, scoring
        assert all(sentence in b["messages"][0]["content"] for b in srv.log)


# ------------------------------------------------------------------ 3. Chinese numerals in strict matching


@pytest.mark.parametrize(
    ("text", "alias", "expected"),
    [
        ("共有三十六人参加。", "十六", False),
        ("他已经来过十四次了。", "四次", False),
        ("三十六人参加。", "三十", False),
        ("全国共有两万人报名。", "两万", True),
        ("报名人数约为2万人。", "2", False),  # 2万 is twenty thousand
        ("预计投资１６亿元。", "16", False),  # full-width digits followed by a Chinese numeral
        ("预计投资１６亿元。", "16亿", True),
        ("第十六届运动会", "十六", True),
        ("十六人参加。", "十六", True),
        ("他来过四次。", "四次", True),
        ("增长了三点六倍。", "六", False),
        ("共有３６人。", "6", False),
    ],
)
def test_strict_matching_does_not_extend_chinese_numbers(text: str, alias: str, expected: bool) -> None:
    assert contains(text, alias) is expected


def test_counterfactual_rewriting_leaves_longer_chinese_numbers_alone() -> None:
    assert replace_all("三十六人中有十六人获奖。", "十六", "十七") == ("三十六人中有十七人获奖。", 1)


# ------------------------------------------------------------------ 4. negative rejection without noise documents


def test_negative_records_without_noise_are_skipped_and_listed_by_default(tmp_path: Path) -> None:
    data = _write(tmp_path / "zh_fact.jsonl", ZH_FACT)
    out = tmp_path / "run" / "robust" / "negative"
    with OpenAIServer(responder=lambda body: "所提供的文档信息不足，无法回答这个问题。") as srv:
        run_robust(RobustRunConfig(data=data, testbed="negative", llm=["openai/test-model"], out=out), llms=[_llm(srv)])
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert (m["n"], m["skipped"]) == (2, 1)
    assert m["skipped_items"] == [{"id": "1", "noise_ratio": 1.0, "reason": "no noise documents"}]
    section = robustness(RunFiles(tmp_path / "run"))
    text = "".join(section.parts)
    assert "1 item skipped" in text and "no noise documents" in text and "ids: 1" in text


def test_negative_records_without_noise_are_asked_as_the_benchmark_does_under_rgb(tmp_path: Path) -> None:
    data = _write(tmp_path / "zh_fact.jsonl", ZH_FACT)
    with OpenAIServer(responder=lambda body: "文档信息不足，因此无法回答。") as srv:
        cfg = RobustRunConfig(
            data=data,
            testbed="negative",
            llm=["openai/test-model"],
            out=tmp_path / "o",
            construction="rgb",
            scoring="rgb",
        )
        [run], _ = run_robust(cfg, llms=[_llm(srv)])
        bodies = {b["messages"][-1]["content"]: b for b in srv.log}
    m = run.metrics
    assert (m["n"], m["skipped"], m["skipped_items"]) == (3, 0, [])
    assert m["rejection_rate"]["k"] == 3
    _, records = read_results(tmp_path / "o" / "results.jsonl")
    rec = records["1|1|documents"]
    assert rec["n_docs"] == 0 and rec["flags"] and rec["system_prompt"] is False
    # no documents: the benchmark sends the user instruction with an empty document block and no system message
    body = next(b for u, b in bodies.items() if "灯塔桥" in u)
    assert [msg["role"] for msg in body["messages"]] == ["user"]
    assert all(len(b["messages"]) == 2 for u, b in bodies.items() if "灯塔桥" not in u)


# ------------------------------------------------------------------ 5. answers rebuilt from answer1/answer2


def test_several_names_in_answer1_are_all_required(tmp_path: Path) -> None:
    rec = {
        "id": 12,
        "query": "2031年和2035年港湾运动会的主办城市分别是哪些？",
        "answer1": ["北湾市", "东港"],
        "answer2": "灰湾",
        "positive": [["2031年港湾运动会由北湾市和东港联合举办。"], ["2035年港湾运动会将在灰湾举行。"]],
        "negative": ["港湾运动会包括赛艇项目。"],
    }
    data = load_rgb(_write(tmp_path / "zh_int.jsonl", [rec]))
    answer = data.items[0].answer
    assert answer == (("北湾市",), ("东港",), ("灰湾",))
    partial = "2031年在北湾市，2035年在灰湾。"
    assert match_parts(partial, answer) == [True, False, True]
    assert not label_response(partial, answer, build_detectors())["correct"]
    assert not rgb_label_response(partial, answer, "zh")["correct"]


@pytest.mark.parametrize(
    ("version", "says"),
    [(99, r"version 99 is newer than this ragrade supports \(1\)"), ("2", "must be a positive whole number")],
)
def test_a_robust_data_file_of_a_future_or_malformed_version_is_refused(
    tmp_path: Path, version: object, says: str
) -> None:
    # issue 38.3: version 99 was read without a word (documents and chunks files of version 99 are refused)
    from ragrade.errors import DataError

    rec = {"id": "q1", "query": "Who?", "answer": ["Ann"], "positive": ["Ann did."], "negative": ["Bob ran."]}
    path = tmp_path / "data.jsonl"
    head = {"ragrade": {"kind": "robust_data", "version": version}}
    path.write_text(json.dumps(head) + "\n" + json.dumps(rec) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=says):
        load_rgb(path)
    path.write_text(json.dumps({"ragrade": {"kind": "robust_data", "version": 1}}) + "\n" + json.dumps(rec) + "\n")
    assert [it.id for it in load_rgb(path).items] == ["q1"]
