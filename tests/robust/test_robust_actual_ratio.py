"""Testbeds are what they say: actual noise ratios reported and warned about, counterfactual ratio 0 without
noise, untestable counterfactual records, --min-positives (fixtures written here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.robust.test_robust_corpus import CHUNKS, OverlapRetriever, _qas
from tests.support.openai_server import OpenAIServer
from tests.support.typed import as_list, dig

from ragrade.cli.main import main
from ragrade.llm import create_llm
from ragrade.report.sections_more import robustness
from ragrade.report.sources import RunFiles
from ragrade.robust.build import BuildOptions, build_instance, ratio_notes
from ragrade.robust.corpus import CorpusBuildOptions, build_corpus_testbeds
from ragrade.robust.data import describe_report, fake_equals_answer, load_rgb, parse_item
from ragrade.robust.metrics import FLAGGED_MEANING
from ragrade.robust.run import RobustRunConfig, run_robust
from ragrade.robust.table import render_table, table_csv

NOISE = [f"The Tallow Fair sells candles and lamps, stall {i}." for i in range(6)]
CF_SHORT = {  # one corrupted passage only
    "id": "cf1",
    "query": "Which town hosts the Tallow Fair?",
    "answer": "Brimholt",
    "fakeanswer": "Sandvik",
    "positive": ["The Tallow Fair is held in Brimholt."],
    "positive_wrong": ["The Tallow Fair is held in Sandvik."],
    "negative": NOISE[:4],
}
CF_SAME = {  # the fake answer is the answer: cannot test anything
    "id": "cf2",
    "query": "How many stalls does the Tallow Fair have?",
    "answer": "70",
    "fakeanswer": "70",
    "positive": ["The Tallow Fair has 70 stalls."],
    "positive_wrong": ["The Tallow Fair has 70 stalls."],
    "negative": NOISE[:4],
}
BASE = [
    {
        "id": "b1",
        "query": "Which town hosts the Tallow Fair?",
        "answer": "Brimholt",
        "positive": [f"The Tallow Fair, source {i}, is held in Brimholt." for i in range(5)],
        "negative": NOISE,
    },
    {
        "id": "b2",
        "query": "Which river runs past the Tallow Fair?",
        "answer": "the Ashby",
        "positive": ["The Tallow Fair lies on the Ashby."],
        "negative": NOISE,
    },
]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _llm(server: OpenAIServer) -> Any:
    return create_llm("openai/test-model", base_url=server.base_url, cache=False, max_retries=0, timeout=10)


def _reply(body: dict[str, Any]) -> str:
    user = body["messages"][-1]["content"]
    return "Brimholt." if "Tallow Fair" in user and "Which town" in user else "70 stalls, on the Ashby."


def test_counterfactual_ratio_0_uses_only_counterfactual_passages() -> None:
    item = parse_item(CF_SHORT, "cf:1")
    inst = build_instance(item, "counterfactual", 0.0, BuildOptions(n_docs=5))
    assert [d.pool for d in inst.docs] == ["positive_wrong"]  # no noise in place of the missing passages
    assert inst.noise_ratio_actual == 0.0
    assert any("1 documents instead of 5" in f for f in inst.flags)
    at_04 = build_instance(item, "counterfactual", 0.4, BuildOptions(n_docs=5))
    assert (at_04.n_positive, at_04.n_noise) == (1, 2)  # 2 noise as asked; not padded to 4
    notes = ratio_notes([inst, at_04], "counterfactual")
    assert len(notes) == 1 and "noise ratio 0.4" in notes[0] and "0.67" in notes[0]


def test_counterfactual_run_reports_actual_ratios_and_leaves_out_untestable_records(tmp_path: Path) -> None:
    data = _write(tmp_path / "cf.jsonl", [CF_SHORT, CF_SAME])
    loaded = load_rgb(data)
    assert loaded.report["fake_equals_answer"] == {"count": 1, "ids": ["cf2"]}
    assert any("fake answer equal to the answer" in line for line in describe_report(loaded))
    assert fake_equals_answer(parse_item({**CF_SAME, "fakeanswer": "七十"}, "x:1"))  # equal by value
    assert not fake_equals_answer(parse_item(CF_SHORT, "x:1"))
    warned: list[str] = []
    with OpenAIServer(responder=_reply) as srv:
        for scoring in ("default", "rgb"):
            cfg = RobustRunConfig(
                data=data,
                testbed="counterfactual",
                llm=["openai/test-model"],
                out=tmp_path / scoring,
                noise_ratios=[0.0, 0.4],
                scoring=scoring,
            )
            [run], _ = run_robust(cfg, llms=[_llm(srv)], warn=warned.append)
            m = run.metrics
            by = {g["noise_ratio"]: g for g in m["by_noise_ratio"]}
            assert m["untestable"] == 2  # cf2 at both ratios
            if scoring == "default":  # left out of every metric
                assert m["n"] == 2 and m["accuracy"]["n"] == 2 and m["accuracy_without_docs"]["n"] == 1
                assert by[0.0]["noise_ratio_actual_mean"] == 0.0 and by[0.0]["noise_ratio_differs"] == 0
            else:  # the original scorer kept such records
                assert m["n"] == 4
            assert by[0.4]["noise_ratio_actual_mean"] == pytest.approx(2 / 3)  # 1 corrupted + 2 noise, both items
    assert any("counterfactual at noise ratio 0.4" in w for w in warned)
    assert not any("noise ratio 0:" in w for w in warned)
    assert any("cannot test anything" in w for w in warned)
    results = [json.loads(line) for line in (tmp_path / "default" / "results.jsonl").read_text().splitlines()[1:]]
    actual = {(r["noise_ratio"], round(r["noise_ratio_actual"], 3)) for r in results if r["condition"] == "documents"}
    assert actual == {(0.0, 0.0), (0.4, 0.667)}  # per record: the share actually shown


def test_noise_table_terminal_and_report_show_the_actual_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path / "base.jsonl", BASE)
    out = tmp_path / "run" / "robust" / "noise"
    with OpenAIServer(responder=_reply) as srv:
        args = [
            "robust",
            "run",
            str(data),
            "--testbed",
            "noise",
            "--llm",
            "openai/test-model",
            "--llm-base-url",
            srv.base_url,
            "--out",
            str(out),
            "--noise-ratios",
            "0,0.4",
            "--no-cache",
        ]
        assert main(args) == 0
        captured = capsys.readouterr()
        m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
        by = {g["noise_ratio"]: g for g in m["by_noise_ratio"]}
        # b2 has one supporting passage: padded to 1 + 4 at ratio 0 (0.8), 1 + 4 at 0.4 (0.8)
        assert by[0.0]["noise_ratio_actual_mean"] == pytest.approx(0.4)
        assert by[0.4]["noise_ratio_actual_mean"] == pytest.approx(0.6)
        assert m["table"]["actual_columns"] == ["actual noise 0", "actual noise 0.4"]
        assert table_csv(m["table"]).splitlines()[0] == "model,0,0.4,actual noise 0,actual noise 0.4"
        lines = render_table(m["table"]).splitlines()
        assert lines[2].split() == ["openai/test-model", "100.00", "100.00"]
        assert lines[3].split() == ["actual", "noise", "ratio", "0.40", "0.60"]  # under each requested ratio
        assert "actual noise ratio" in captured.out and FLAGGED_MEANING in captured.out
        assert "ragrade: warning: noise at noise ratio 0: the actual noise ratio is 0.40" in captured.err
        html = "".join(str(p) for p in robustness(RunFiles(tmp_path / "run")).parts)
        assert "actual noise ratio" in html and "flagged: answered-with-documents records" in html
        assert "warning: noise at noise ratio 0: the actual noise ratio is 0.40" in html
        # only questions with enough supporting passages: b2 is skipped, b1 resumed, the ratios are exact
        assert main([*args, "--min-positives", "5"]) == 0
        captured = capsys.readouterr()
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert m["min_positives"] == 5 and m["skipped"] == 2 and m["flagged"] == 0
    assert [g["noise_ratio_actual_mean"] for g in m["by_noise_ratio"]] == [0.0, 0.4]
    assert "generated=0 resumed=2" in captured.out and "warning" not in captured.err
    assert {s["reason"] for s in m["skipped_items"]} == {"1 supporting passage(s), fewer than --min-positives 5"}


def test_corpus_build_keeps_only_questions_with_enough_supporting_passages() -> None:
    built = build_corpus_testbeds(_qas(), OverlapRetriever(CHUNKS), CorpusBuildOptions(k=8, seed=1, min_positives=2))
    assert [it.id for it in built.base] == ["q1"]  # Port Alder is in two chunks; March and 70 in one each
    dropped = {dig(d, "id"): dig(d, "reason") for d in as_list(built.report["dropped"])}
    assert dropped["q2"] == "1 supporting passage(s), fewer than --min-positives 2"
    assert dig(built.report, "options", "min_positives") == 2


def test_a_resumed_record_with_other_documents_is_asked_again(tmp_path: Path) -> None:
    """Records written when the construction chose other documents (e.g. padded ratio 0) are not reused."""
    data = _write(tmp_path / "cf.jsonl", [CF_SHORT])
    cfg = RobustRunConfig(data=data, testbed="counterfactual", llm=["openai/test-model"], out=tmp_path / "o")
    path = tmp_path / "o" / "results.jsonl"
    with OpenAIServer(responder=_reply) as srv:
        [first], _ = run_robust(cfg, llms=[_llm(srv)])
        lines = path.read_text(encoding="utf-8").splitlines()
        recs = [json.loads(line) for line in lines[1:]]
        for r in recs:
            if r["condition"] == "documents":  # as the padding construction wrote it
                r["doc_order"] = ["positive_wrong:0", "negative:0", "negative:1", "negative:2", "negative:3"]
        path.write_text("\n".join([lines[0], *(json.dumps(r) for r in recs)]) + "\n", encoding="utf-8")
        (tmp_path / "o" / "journal.sqlite").unlink()  # a directory from before the journal resumes from results.jsonl
        [second], _ = run_robust(cfg, llms=[_llm(srv)])
    assert (first.generated, second.generated, second.resumed) == (2, 1, 1)  # closed book kept, documents re-asked


def test_a_distractor_equal_by_value_is_no_fake_answer() -> None:
    from ragrade.robust.corpus import QA, _pick_fake

    assert _pick_fake(QA("q", "How many stalls?", ("70",), ("七十", "45"))) == "45"
