"""A small synthetic run directory written with the stages' own file writers (fast, deterministic)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragrade.exam.analytics import exam_analytics
from ragrade.exam.files import Question, write_exam
from ragrade.exam.funnel import build_funnel, write_sidecars
from ragrade.io import write_json
from ragrade.run.compare import verdicts, write_comparisons
from ragrade.run.summary import summarise, summarise_by_tag, write_csv, write_responses

INJECTED = '<script>document.documentElement.setAttribute("data-pwned","1")</script>'
RETRIEVERS = {"closed": -1.5, "bm25": 0.6, "dense": 0.2, "oracle": 1.4}


def _questions(n: int) -> list[Question]:
    topics = ["json", "os", "re", "email"]
    qwords = ["what", "which", "how"]
    blooms = [["remember"], ["understand"], ["apply", "remember"]]
    out = []
    for i in range(n):
        text = f"Question {i}: which function ____ does step {i}?"
        if i == 0:
            text = f"Which tag is this {INJECTED} <b>bold</b> & more?"
        out.append(
            Question(
                id=f"q{i:03d}",
                question=text,
                choices=[f"a{i}", f"b{i}", f"c{i}", f"d{i}"],
                answer=i % 4,
                doc_id=f"d{i}",
                chunk_id=f"d{i}#0",
                source=f"stdlib:{topics[i % 4]}",
                tags={"bloom": blooms[i % 3], "qword": qwords[i % 3], "topic": topics[i % 4]},
                generator={"name": "offline/cloze"},
                context=f"context {i}",
            )
        )
    return out


def _rows(questions: list[Question], seed: int = 0) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    difficulty = {q.id: rng.normal(0, 1) for q in questions}
    rows = []
    for ret, ability in RETRIEVERS.items():
        for icl in (0, 1):
            for chunker in ["none"] if ret in ("closed", "oracle") else ["rec", "sent"]:
                k = 0 if ret == "closed" else (1 if ret == "oracle" else 3)
                pid = f"llm=offline/student|retriever={ret}|k={k}|icl={icl}|chunker={chunker}"
                theta = ability + (0.2 if chunker == "sent" else 0.0)
                for q in questions:
                    p = 0.25 + 0.75 / (1 + np.exp(-1.5 * (theta - difficulty[q.id])))
                    correct = int(rng.random() < p)
                    rows.append(
                        {
                            "pipeline": pid,
                            "llm": "offline/student",
                            "retriever": ret,
                            "k": k,
                            "icl": icl,
                            "chunker": chunker,
                            "prompt": "default",
                            "question_id": q.id,
                            "method": "loglikelihood",
                            "chosen": q.answer if correct else (q.answer + 1) % 4,
                            "answer": q.answer,
                            "correct": correct,
                            "error": None,
                            "parse_failed": False,
                            "topic": q.tags["topic"],
                            "bloom": ",".join(q.tags["bloom"]),
                            "qword": q.tags["qword"],
                            "output": INJECTED if q.id == "q000" else "x",
                        }
                    )
    return rows


def legacy_plan(df: pd.DataFrame) -> dict[str, Any]:  # the shape of job.analysis.plan_irt's result
    """An ``irt/plan.json`` as runs wrote it before plan version 2: the chunker (``none`` for closed book and
    oracle) treated as collinear with the retriever, so a main fit without it and one on indexed pipelines."""
    n_all = int(df["pipeline"].nunique())
    n_indexed = int(df.loc[df["chunker"] != "none", "pipeline"].nunique())
    return {
        "version": 1,
        "requested": ["retriever", "chunker", "icl"],
        "constant": [],
        "fits": [
            {"name": "main", "path": "irt.json", "factors": ["retriever", "icl"], "subset": None, "pipelines": n_all},
            {
                "name": "by_chunker",
                "factor": "chunker",
                "path": "by_chunker/irt.json",
                "factors": ["chunker", "retriever", "icl"],
                "subset": "pipelines where chunker applies (not none)",
                "pipelines": n_indexed,
            },
        ],
        "note": "a factor collinear with others on all pipelines is estimated on the pipelines where it applies",
    }


def make_run(
    root: Path, *, n_questions: int = 40, with_irt: bool = True, with_robust: bool = True, legacy_irt: bool = False
) -> Path:
    """Write exam, sweep, IRT, robustness and manifest files under ``root``; returns ``root``.

    ``legacy_irt`` writes the IRT files the way runs made before plan version 2 did (two fits).
    """
    from ragrade.irt.fit import FitConfig, fit_irt
    from ragrade.irt.improve import improve, write_improvement
    from ragrade.irt.io import exam_tags, load_responses

    questions = _questions(n_questions)
    exam = root / "exam" / "exam.jsonl"
    funnel = build_funnel(n_questions + 5, ["parse:bad_json"] * 2 + ["near_duplicate:cosine"] * 3, n_questions)
    write_exam(
        exam,
        questions,
        meta={"generator": {"name": "offline/cloze"}, "funnel": funnel, "analytics": exam_analytics(questions)},
    )
    write_sidecars(exam, funnel, [])
    rows = _rows(questions)
    sweep = root / "sweep"
    write_responses(sweep / "responses.parquet", rows)
    df = pd.DataFrame(rows)
    write_csv(sweep / "summary.csv", summarise(df))
    write_csv(sweep / "summary_by_tag.csv", summarise_by_tag(df))
    write_comparisons(sweep / "comparisons.json", verdicts(sweep, top=4, n_boot=200))
    write_json(
        root / "manifest.json",
        {
            "version": 1,
            "kind": "job",
            "name": f"synthetic {INJECTED}",
            "status": "complete",
            "config": {"note": INJECTED},
            "seeds": {"exam": 0},
            "software": {"python": "3.x", "packages": {"ragrade": "0"}},
        },
    )
    if with_irt:
        from ragrade.job.analysis import plan_irt

        plan: dict[str, Any] = legacy_plan(df) if legacy_irt else dict(plan_irt(df, ["retriever", "chunker", "icl"]))
        write_json(root / "irt" / "plan.json", plan)
        for fit in plan["fits"]:
            part = df if fit["subset"] is None else df[df[fit["factor"]] != "none"]
            fit_irt(
                part.reset_index(drop=True),
                config=FitConfig(factors=tuple(fit["factors"])),
                out=root / "irt" / fit["path"],
                exam=exam,
            )
        data = load_responses(df, plan["fits"][0]["factors"])
        imp = improve(data, FitConfig(factors=tuple(plan["fits"][0]["factors"])), steps=2, tags=exam_tags(exam))
        write_improvement(imp, root / "irt" / "improve", exam, data)
    if with_robust:
        groups = [
            {
                "noise_ratio": r,
                "accuracy": {"value": 0.9 - r / 2, "low": 0.7 - r / 2, "high": 0.97 - r / 2, "k": 9, "n": 10},
            }
            for r in (0.0, 0.4, 0.8)
        ]
        write_json(
            root / "robust" / "noise" / "metrics.json",
            {
                "ragrade": {"kind": "robust_metrics", "version": 1},
                "testbed": "noise",
                "model": "offline/extractive",
                "n": 30,
                "failed": 0,
                "accuracy": {"value": 0.7, "low": 0.5, "high": 0.84, "k": 21, "n": 30},
                "by_noise_ratio": groups,
                "table": {
                    "columns": ["0", "0.4", "0.8"],
                    "scoring": ["default"],
                    "rows": [{"model": "offline/extractive", "0": 90.0, "0.4": 70.0, "0.8": 50.0}],
                },
            },
        )
    return root
