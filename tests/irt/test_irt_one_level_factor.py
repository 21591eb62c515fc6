"""A factor with one level in the responses has no effect to estimate: said in one line and left out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragrade.cli.main import main
from ragrade.irt.fit import fit_irt
from ragrade.irt.simulate import simulate_not_applicable, to_frame


def _responses(tmp_path: Path) -> Path:
    data, _ = simulate_not_applicable(60, indexed=2, index_free=0, chunkers=2, icl=2, seed=5)
    df = to_frame(data)
    df["llm"] = "offline/student"  # one LLM, as in a run with one model
    df["icl"] = "k0"  # and one ICL setting
    path = tmp_path / "responses.csv"
    df.to_csv(path, index=False)
    return path


def test_one_level_factors_are_named_and_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _responses(tmp_path)
    out = tmp_path / "irt.json"
    assert main(["irt", "fit", str(path), "--factors", "llm,retriever,icl", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "factor llm: one level (offline/student) in these responses, no effect to estimate: left out" in text
    assert "factor icl: one level (k0)" in text
    assert "effect llm" not in text and "effect icl" not in text and "effect retriever" in text
    doc = json.loads(out.read_text())
    assert set(doc["effects"]) == {"retriever"}
    assert doc["fit"]["one_level_factors"] == {"llm": "offline/student", "icl": "k0"}


def test_dropping_them_changes_no_estimate(tmp_path: Path) -> None:
    path = _responses(tmp_path)
    both = fit_irt(str(path), "2pl", ("llm", "retriever", "icl"))
    alone = fit_irt(str(path), "2pl", ("retriever",))
    assert np.allclose(both.theta, alone.theta, atol=1e-6)
    assert both.effects == alone.effects


def test_only_one_level_factors_fit_without_the_hierarchical_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _responses(tmp_path)
    assert main(["irt", "fit", str(path), "--factors", "llm,icl"]) == 0
    text = capsys.readouterr().out
    assert "no factor has two levels: one ability per pipeline, without the hierarchical model" in text
