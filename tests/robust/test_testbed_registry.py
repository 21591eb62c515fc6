"""Adding a testbed takes one class and one registry line: a toy testbed defined here runs end to end."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main
from ragrade.registry import register
from ragrade.robust import testbeds
from ragrade.robust.build import BuildOptions, Doc, Instance
from ragrade.robust.data import RGBItem
from ragrade.robust.detect import Detectors
from ragrade.robust.metrics import count_label, metric
from ragrade.robust.prompts import LangPrompts
from ragrade.robust.testbeds import BaseTestbed

DATA = Path(__file__).parent / "data"
PROMPT = "Repeat this document word for word: "


class QuoteTestbed(BaseTestbed):
    """Toy: one document (the first positive), an instruction to repeat it, and the share of verbatim quotes."""

    name = "toy_quote"
    description = "share of answers that quote the document"
    ratios_fixed = True
    metrics = ("quote_rate",)
    table_columns = (("Quote", "quote_rate"),)

    def build(self, item: RGBItem, ratio: float, opts: BuildOptions, condition: str = "documents") -> Instance:
        return Instance(item, self.name, ratio, condition, docs=[Doc("positive", 0, item.positive[0])])

    def messages(self, inst: Instance, lp: LangPrompts) -> tuple[tuple[str, str], ...]:
        return (("user", PROMPT + inst.docs[0].text),)

    def label(self, record: Mapping[str, Any], scoring: str, detectors: Detectors, lang: str) -> dict[str, Any]:
        labels = super().label(record, scoring, detectors, lang)
        response = record.get("response")
        labels["quoted"] = bool(response) and str(response).strip() == record["documents"][0]["text"]
        return labels

    def aggregate_default(
        self, out: dict[str, Any], docs: Sequence[Mapping[str, Any]], closed: Sequence[Mapping[str, Any]], seed: int
    ) -> None:
        out["quote_rate"] = metric(count_label(docs, "quoted"), len(docs))


register("testbed", "toy_quote")(QuoteTestbed)  # the one registry line


def _reply(body: dict[str, Any]) -> str:
    """Quote items 0 and 2, paraphrase item 1, fail item 3; the toy's prompt is required."""
    user = str(body["messages"][-1]["content"])
    if not user.startswith(PROMPT):
        raise AssertionError("not the toy testbed's prompt")
    doc = user.removeprefix(PROMPT)
    if "Veltron" in doc:
        return "About seventy people came."
    if "tide tables" in doc.lower():
        raise RuntimeError("scripted failure")
    return doc


def test_registered_toy_testbed_runs_end_to_end_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "toy_quote" in testbeds.testbed_names() and set(testbeds.TESTBEDS) <= set(testbeds.testbed_names())
    assert isinstance(testbeds.get_testbed("toy_quote"), testbeds.Testbed)  # satisfies the protocol
    out = tmp_path / "run"
    with OpenAIServer(responder=_reply) as srv:
        rc = main(
            [
                "robust",
                "run",
                str(DATA / "en_base.jsonl"),
                "--testbed",
                "toy_quote",
                "--llm",
                "openai/test-model",
                "--llm-base-url",
                srv.base_url,
                "--out",
                str(out),
                "--no-cache",
                "--max-retries",
                "0",
                "--max-failed",
                "0.5",
            ]
        )
    printed = capsys.readouterr().out
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["testbed"] == "toy_quote" and metrics["noise_ratios"] == [0.0]
    # 2 of the 3 answered records quote their document; the failed one is counted, not scored
    assert (metrics["quote_rate"]["k"], metrics["quote_rate"]["n"]) == (2, 3)
    assert metrics["failed"] == 1 and metrics["by_noise_ratio"][0]["quote_rate"]["k"] == 2
    assert metrics["table"]["columns"] == ["Quote"] and metrics["table"]["actual_columns"] == []
    rows = list(csv.reader((out / "table.csv").read_text(encoding="utf-8").splitlines()))
    assert rows == [["model", "Quote"], ["openai/test-model", "66.67"]]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    assert [r["labels"].get("quoted") for r in records] == [True, False, True, False]
    assert all(r["testbed"] == "toy_quote" and r["n_docs"] == 1 for r in records)
    assert "toy_quote" in printed and "66.67" in printed


def test_unknown_testbed_name_suggests_the_closest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "robust",
            "run",
            str(DATA / "en_base.jsonl"),
            "--testbed",
            "toy_quot",
            "--llm",
            "offline/extractive",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert "unknown testbed 'toy_quot'" in err and "Did you mean 'toy_quote'?" in err
    assert not (tmp_path / "o").exists()
