"""The "Can the judges be trusted?" section, rendered from a judge folder's files only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ragrade.io import write_json, write_jsonl
from ragrade.judge.calibrate import run_calibration
from ragrade.judge.summary import summarise
from ragrade.report.render import render_report

EVIL = "<script>document.body.dataset.pwned='1'</script>"


def _run_dir(tmp_path: Path, *, calibrated: bool) -> Path:
    root = tmp_path / "run"
    scores_dir = root / "judge" / "scores"
    rng = np.random.default_rng(0)
    recs = []
    for config, cr in (("bm25", 0.4), (f"dense {EVIL}", 0.9)):
        for i in range(40):
            values = {
                "claim_recall": float(rng.uniform() < cr),
                "context_utilisation": 0.5,
                "f1": 0.6,
                "precision": 0.7,
                "recall": 0.5,
                "hallucination": 0.1,
            }
            recs.append(
                {"config": config, "id": f"q{i}", "metric": "claims", "status": "ok", "score": 0.6, "values": values}
            )
            recs.append(
                {
                    "config": config,
                    "id": f"q{i}",
                    "metric": "faithfulness",
                    "status": "ok",
                    "score": float(rng.uniform() < 0.9),
                }
            )
    write_jsonl(scores_dir / "scores.jsonl", recs, kind="judge_scores", version=1)
    summary = {"configs": summarise(recs, n_boot=200), "n_answers": 80, "judges": {"claims": {"baseline": True}}}
    write_json(scores_dir / "summary.json", summary)
    if calibrated:
        labels = tmp_path / "labels.jsonl"
        labels.write_text(
            "".join(
                json.dumps({"id": f"{c}::q{i}", "metric": "faithfulness", "label": int(i % 3 != 0)}) + "\n"
                for c in ("bm25", f"dense {EVIL}")
                for i in range(20)
            )
        )
        run_calibration(scores_dir, labels, scores_dir / "calibration")
    return root


def test_trust_section_with_calibration_and_claims(tmp_path: Path) -> None:
    page = render_report(_run_dir(tmp_path, calibrated=True), inline_js=False)
    assert '<section id="trust">' in page and "Can the judges be trusted?" in page
    assert 'id="plot-trust-faithfulness"' in page and 'id="plot-trust-claims"' in page
    assert "corrected (PPI++)" in page and "human only" in page
    assert "(offline baseline)" in page and "<td>claims (baseline)</td>" in page  # labelled in both sections
    assert "the retriever loses more" in page  # bm25: claim recall 0.4 vs utilisation 0.5
    assert "these three add up to" in page and "closed book" in page  # what the claim metrics mean
    assert EVIL not in page and "&lt;script&gt;" in page  # configuration names are escaped


def test_trust_section_without_labels_says_how(tmp_path: Path) -> None:
    page = render_report(_run_dir(tmp_path, calibrated=False), inline_js=False)
    assert '<section id="trust">' in page
    assert "No human labels yet" in page and "ragrade judge calibrate" in page
