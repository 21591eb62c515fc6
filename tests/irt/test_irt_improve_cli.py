"""Iterative improvement and the ``ragrade irt`` verbs on small files, good and bad."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.support.typed import dig

from ragrade.cli.main import main
from ragrade.errors import ConfigError
from ragrade.exam.files import Question, read_exam, write_exam
from ragrade.io import write_json
from ragrade.irt.fit import FitConfig
from ragrade.irt.improve import improve
from ragrade.irt.io import Responses
from ragrade.irt.simulate import Truth, simulate_hierarchical, to_frame

BLOOM = ["remember", "understand", "apply", "analyze"]
QWORDS = ["what", "which", "how", "when"]


@pytest.fixture(scope="module")
def small() -> tuple[Responses, Truth]:
    data, truth = simulate_hierarchical({"llm": 3, "retriever": 3, "icl": 2}, 150, seed=31)
    return data, truth


def _exam(items: Sequence[str], path: Path) -> list[Question]:
    qs = [
        Question(
            id=q,
            question=f"Question {q}?",
            choices=["a", "b", "c", "d"],
            answer=0,
            doc_id="d",
            chunk_id="c",
            tags={
                "bloom": [BLOOM[i % 4], BLOOM[(i + 1) % 4]] if i % 3 == 0 else [BLOOM[i % 4]],
                "qword": QWORDS[i % 4],
                "topic": f"t{i % 2}",
            },
        )
        for i, q in enumerate(items)
    ]
    write_exam(path, qs)
    return qs


@pytest.fixture()
def run_dir(tmp_path: Path, small: tuple[Responses, Truth]) -> Path:
    data, _ = small
    run = tmp_path / "run"
    run.mkdir()
    df = to_frame(data)
    df.loc[df.index[:7], "correct"] = np.nan  # failed answers
    df.to_parquet(run / "responses.parquet")
    _exam(data.items, run / "exam.jsonl")
    write_json(run / "manifest.json", {"version": 1, "exam": {"path": str(run / "exam.jsonl")}})
    return run


def test_improve_drops_ten_percent_per_round_and_stays_aligned(small: tuple[Responses, Truth]) -> None:
    data, _ = small
    imp = improve(data, FitConfig(factors=("llm", "retriever", "icl")), steps=3, drop=0.1)
    sizes = [s["n_items"] for s in imp.steps]
    assert sizes == [150, 135, 122, 110]  # floor(10%) each round: 15, 13, 12
    for prev, cur in zip(imp.steps, imp.steps[1:], strict=False):
        assert len(cur["dropped"]) == prev["n_items"] - cur["n_items"]
        assert cur["drop_threshold_discrimination"] is not None
    final = imp.final
    # the final parameters belong to the right items: refit from scratch on the kept ids gives the same
    dropped = {q for s in imp.steps for q in s["dropped"]}
    assert set(final.items) == set(data.items) - dropped
    keep = [i for i, q in enumerate(data.items) if q in set(final.items)]
    ref = improve(data.subset_items(keep), FitConfig(factors=("llm", "retriever", "icl")), steps=0).final
    np.testing.assert_allclose(final.discrimination, ref.discrimination, atol=0.05)
    # dropping the least discriminative items raises the mean discrimination
    assert imp.steps[-1]["discrimination"]["mean"] > imp.steps[0]["discrimination"]["mean"]
    assert all(s["fit"]["converged"] for s in imp.steps)
    assert len(imp.steps[0]["information_mean"]) == len(imp.grid)


def test_drop_validation() -> None:
    with pytest.raises(ConfigError, match=r"for 10% pass 0\.1"):
        from ragrade.irt.improve import check_drop

        check_drop(10, 4)


def test_cli_fit_on_run_dir(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_dir / "out" / "irt.json"
    code = main(["irt", "fit", str(run_dir), "--factors", "llm,retriever,icl", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["kind"] == "irt" and doc["version"] == 2
    assert doc["counts"]["n_missing_correct"] == 7
    assert list(doc["effects"]["llm"]) == ["llm0", "llm1", "llm2"]
    groups = doc["information"]["groups"]
    assert set(groups) == {"bloom", "qword", "topic"}
    # multi-level bloom tags: an item counts in each of its levels
    assert sum(v["n_items"] for v in groups["bloom"].values()) == 150 + 50
    assert "item_characteristic" in doc["information"]
    text = capsys.readouterr().out
    assert "converged: True" in text and "effect llm" in text


def test_cli_fit_on_csv_flat_json(
    tmp_path: Path, small: tuple[Responses, Truth], capsys: pytest.CaptureFixture[str]
) -> None:
    data, _ = small
    path = tmp_path / "resp.csv"
    to_frame(data).to_csv(path, index=False)
    assert main(["irt", "fit", str(path), "--model", "2pl", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["fit"]["converged"] is True and summary["fit"]["solver"] == "newton"
    # written beside the responses: one row per pipeline with its observed accuracy; 2PL means no guessing
    frame = to_frame(data)
    observed = frame.groupby("pipeline")["correct"].mean()
    table = pd.read_csv(tmp_path / "irt_pipelines.csv").set_index("pipeline")
    assert sorted(table.index) == sorted(data.pipelines)
    np.testing.assert_allclose(table["accuracy"], observed[table.index], atol=1e-6)
    doc = json.loads((tmp_path / "irt.json").read_text())
    assert {v["guessing"] for v in doc["items"].values()} == {0.0}
    out = tmp_path / "lbfgs.json"
    assert main(["irt", "fit", str(path), "--model", "2pl", "--solver", "lbfgs", "--out", str(out), "--json"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["fit"]["solver"] == "lbfgs" and other["fit"]["converged"] is True
    assert other["fit"]["log_likelihood"] == pytest.approx(summary["fit"]["log_likelihood"], abs=1.0)


def test_cli_improve_writes_exam_and_evolution(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_dir / "improved"
    code = main(
        [
            "irt",
            "improve",
            str(run_dir),
            "--steps",
            "2",
            "--drop",
            "0.1",
            "--out",
            str(out),
            "--factors",
            "llm,retriever,icl",
        ]
    )
    assert code == 0, capsys.readouterr().err
    header, qs = read_exam(out / "exam.improved.jsonl")
    evo = json.loads((out / "irt_improve.json").read_text())
    assert len(qs) == 150 - 15 - 13 == len(evo["kept"])
    assert [q.id for q in qs] == sorted(evo["kept"])  # exam order kept, same ids
    assert header is not None and dig(header.meta, "irt_improve", "n_items_end") == len(qs)
    assert len(evo["steps"]) == 3 and evo["steps"][1]["information_groups"]["bloom"]
    assert json.loads((out / "irt.json").read_text())["counts"]["n_items"] == len(qs)


@pytest.mark.parametrize(
    "frame,message",
    [
        (pd.DataFrame({"pipeline": ["a"], "question_id": ["q"]}), "missing column(s) correct"),
        (pd.DataFrame({"pipeline": ["a", "b"], "question_id": ["q", "q"], "correct": [0.5, 1]}), "must be 0/1"),
        (pd.DataFrame({"pipeline": ["a", "b"], "question_id": ["q", "q"], "correct": [1, 0]}), "missing column(s) llm"),
    ],
)
def test_cli_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], frame: pd.DataFrame, message: str
) -> None:
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path)
    args = ["irt", "fit", str(path)] + (["--factors", "llm"] if "llm" in message else [])
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ragrade: error:") and message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "args", [["--model", "4pl"], ["--bounds", "d=2:1"], ["--prior", "strong"], ["--solver", "adam"]]
)
def test_cli_bad_options_exit_2(
    tmp_path: Path, small: tuple[Responses, Truth], capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    data, _ = small
    path = tmp_path / "r.parquet"
    to_frame(data).to_parquet(path)
    assert main(["irt", "fit", str(path), *args]) == 2
    assert capsys.readouterr().err.startswith("ragrade: error:")


def test_cli_missing_input_and_bad_drop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["irt", "fit", str(tmp_path / "nope.parquet")]) == 2
    assert main(["irt", "improve", str(tmp_path), "--drop", "10"]) == 2
    assert "fraction" in capsys.readouterr().err


def test_improve_links_steps_to_one_scale_and_shows_the_real_gain() -> None:
    # flat and steep items mixed: dropping the flat ones makes the exam truly more informative for these
    # pipelines, while each refit re-standardises its own scale (the issue: the printed information fell)
    from ragrade.irt import information as info
    from ragrade.irt.simulate import sample_matrix

    n = 400
    data, truth = simulate_hierarchical({"llm": 3, "retriever": 7, "icl": 3}, n, seed=41)
    rng = np.random.default_rng(0)
    d_true = np.where(rng.random(n) < 0.4, 0.5, 1.5) * rng.lognormal(0, 0.2, n)
    data.R[:] = sample_matrix(truth.theta, d_true, truth.difficulty, truth.guessing, rng)
    imp = improve(data, FitConfig(factors=("llm", "retriever", "icl")), steps=3, drop=0.15)
    pos = {q: i for i, q in enumerate(data.items)}

    def true_info(items: Sequence[str]) -> float:
        idx = [pos[q] for q in items]
        return float(info.item_information(truth.theta, d_true[idx], truth.difficulty[idx], truth.guessing[idx]).mean())

    true_gain = true_info(imp.kept) / true_info(data.items)  # about 1.34
    linked = [s["linked"]["mean_information_at_abilities"] for s in imp.steps]
    unlinked = max(imp.steps[-1]["information_mean"]) / max(imp.steps[0]["information_mean"])
    assert imp.steps[0]["linked"]["A"] == pytest.approx(1.0) and imp.steps[0]["linked"]["B"] == pytest.approx(0.0)
    gain = linked[-1] / linked[0]
    assert true_gain > 1.2 and unlinked < 1.0  # each step on its own scale hides the gain
    # linked: a real gain, within 30% of the truth (the priors shrink the flat items' discrimination at step 0,
    # which makes the first exam look a little better than it is)
    assert gain > 1.05 and abs(np.log(gain / true_gain)) < np.log(1.3), (gain, true_gain)
    assert "scale of step 0" in str(imp.to_dict()["linking"])
