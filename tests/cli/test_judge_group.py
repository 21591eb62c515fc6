"""``ragrade judge`` is a plain group: ``score`` (its default command) and ``calibrate``, no argv rewriting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragrade.cli.main import main

Cap = pytest.CaptureFixture[str]


def test_calibrate_is_a_plain_command_with_its_real_usage(capsys: Cap) -> None:
    assert main(["judge", "calibrate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage: ragrade judge calibrate [OPTIONS]" in out and "--human" in out
    assert main(["judge", "--help"]) == 0
    out = capsys.readouterr().out
    assert "score" in out and "calibrate" in out and "judge-calibrate" not in out
    assert main(["judge-calibrate", "--help"]) == 2  # the old hidden verb is gone
    assert "No such command" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["judge", "{a}", "--metrics", "exact", "--out", "{o}"],
        ["judge", "--metrics", "exact", "{a}", "--out", "{o}"],  # options before the answers file
        ["judge", "score", "{a}", "--metrics", "exact", "--out", "{o}"],
    ],
)
def test_answers_go_to_the_default_score_command(args: list[str], tmp_path: Path, capsys: Cap) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        '{"id": "a", "query": "Which port?", "answer": "Port Alder", "reference": "Port Alder"}\n'
        '{"id": "b", "query": "Which port?", "answer": "Port Birch today", "reference": "Port Alder"}\n'
    )
    argv = [a.format(a=answers, o=tmp_path / "scores") for a in args]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = [json.loads(line) for line in (tmp_path / "scores" / "scores.jsonl").read_text().splitlines()[1:]]
    # the answers were scored, each by exact match / token F1: b shares 1 of its 3 tokens with the 2 of the
    # reference, F1 = 2 (1/3)(1/2) / (1/3 + 1/2) = 0.4
    got = {r["id"]: (r["metric"], r["status"], r["values"]["em"], r["values"]["f1"]) for r in rows}
    assert got == {"a": ("exact", "ok", 1.0, 1.0), "b": ("exact", "ok", 0.0, pytest.approx(0.4))}
    assert "exact.em=0.500" in captured.out
