"""The work before a grid's first row says what it does, with counts (issue 36.7).

``exam take`` used to show ``loading models, indexes and data ...`` for most of a run. Now the components it
builds, the warm step's retrieval and the offline baselines' prefetch are phases of the display
(:mod:`ragrade.progress_phases`). A plugin retriever and a prefetching fake LLM defined here record the display's
plain line while they work, so each count is checked at a known point, without timing; the CLI test captures the
plain lines a small offline grid prints.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import make_exam
from tests.run.warm_fakes import DISPLAY, LLM, PAUSE, SEEN

import ragrade
from ragrade.exam.files import Question
from ragrade.progress import Progress
from ragrade.progress_phases import current_phase
from ragrade.run import warm

pytestmark = pytest.mark.usefixtures("isolated_llm_env")


@pytest.fixture
def exam(tmp_path: Path) -> Path:
    path = tmp_path / "exam.jsonl"
    make_exam(path, 40)
    return path


def test_each_phase_before_the_first_row_is_counted(
    exam: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warm, "PREFETCH_SLICE", 16)
    SEEN.clear()
    out = io.StringIO()
    with Progress("exam take", aggregate=True, mode="plain", stream=out, interval=0) as shown:
        DISPLAY.append(shown)
        try:
            ragrade.take_exam(exam, tmp_path / "run", llms=[LLM], retrievers=["watcher"], k=1, shard_size=10,
                              progress=shown.advance)  # fmt: skip
        finally:
            DISPLAY.clear()
    lines = {who: [line for w, line in SEEN if w == who] for who in ("llm", "build", "retrieve", "prefetch")}
    assert lines["llm"] == [f"exam take: loading {LLM} (1 of 2): 0/2 (0%) 0.0/s ETA --:--"]
    (built,) = lines["build"]  # the LLM is loaded, its rate known: an ETA for the rest
    loaded = r"exam take: loading retriever watcher over none \(2 of 2\): 1/2 \(50%\) [\d.]+/s ETA \d\d:\d\d"
    assert re.fullmatch(loaded, built)
    # the warm step: four batches of ten questions, one retrieval setting, counted as each batch ends
    counts = [re.search(r": (\d+)/(\d+) \(", line).groups() for line in lines["retrieve"]]  # type: ignore[union-attr]
    assert counts[:4] == [("0", "40"), ("10", "40"), ("20", "40"), ("30", "40")]
    assert lines["retrieve"][0].startswith(
        "exam take: retrieving passages for 40 questions x 1 retrieval setting: 0/40"
    )
    # then the prefetch of the 40 (question, passages, choices) items, in slices of 16
    assert lines["prefetch"][0].startswith(f"exam take: embedding the texts of 40 requests for {LLM}: 0/40 (0%)")
    assert [re.search(r"(\d+)/40", line).group(1) for line in lines["prefetch"]] == ["0", "16", "32"]  # type: ignore[union-attr]
    assert "ETA" in lines["prefetch"][1] and "--:--" not in lines["prefetch"][1]  # a rate once a slice is done
    assert current_phase() is None  # every phase ended with its work
    assert out.getvalue().splitlines()[-1].startswith("exam take: 40/40 (100%)")


def test_the_plain_lines_of_a_small_offline_grid_say_what_loads(
    exam: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragrade.cli.main import main

    monkeypatch.setattr(warm, "PREFETCH_SLICE", 10)
    monkeypatch.setenv("RAGRADE_PROGRESS", "plain")
    monkeypatch.setenv("RAGRADE_PROGRESS_INTERVAL", "0.02")
    monkeypatch.setitem(PAUSE, "s", 0.3)  # each batch and slice lasts several intervals: lines are printed
    args = ["exam", "take", str(exam), "--llm", LLM, "--retrievers", "watcher,closed", "--shard-size", "20"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err.splitlines()
    retrieving = [
        ln for ln in err if ln.startswith("exam take: retrieving passages for 40 questions x 2 retrieval settings: ")
    ]
    prefetching = [ln for ln in err if ln.startswith(f"exam take: embedding the texts of 40 requests for {LLM}: ")]
    assert retrieving and prefetching, err
    assert all(re.search(r": \d+/\d+ \(\d+%\) [\d.]+/s ETA (\d\d:\d\d|--:--)$", ln) for ln in retrieving + prefetching)
    assert {re.search(r"(\d+)/40", ln).group(1) for ln in prefetching} >= {"10", "20", "30"}  # type: ignore[union-attr]
    assert err.index(retrieving[0]) < err.index(prefetching[0])  # retrieval first, then the prefetch
    after = err[err.index(retrieving[0]) :]  # once set up, never the setup status again
    assert not any("loading models, indexes and data" in ln for ln in after)
    assert any(re.fullmatch(r"exam take: the first items are running \(\d\d:\d\d\)", ln) for ln in after), after


def _questions(n: int) -> list[Question]:
    return [Question(f"q{i}", f"What about {i}?", ["a", "b", "c", "d"], 0, "d", f"c{i}") for i in range(n)]


def test_a_grid_without_warmable_pipelines_announces_nothing(tmp_path: Path) -> None:
    from ragrade.run.pipeline import Resources

    res = Resources({"seed": 0}, questions=_questions(3))
    assert warm.warm(res, {}, [], ragrade.AnswerConfig() if hasattr(ragrade, "AnswerConfig") else _answer()) == 0
    assert current_phase() is None


def _answer() -> Any:
    from ragrade.run.spec import AnswerConfig

    return AnswerConfig()
