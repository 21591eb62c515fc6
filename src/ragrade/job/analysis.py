"""The scoring stages of ``ragrade run``: IRT (with improvement), robustness testbeds, judged free-text answers.

IRT factors. Index-free pipelines (closed book, oracle) have chunker ``none``:
the chunker does not apply to them. The hierarchical model handles this
directly: a pipeline whose value of a factor is not applicable (``none`` or
empty, see :data:`ragrade.irt.io.DEFAULT_NOT_APPLICABLE`) gets no effect from
that factor, and the factor's effects sum to zero over its real levels. So one
fit over every requested factor on every pipeline (``irt/irt.json``) is
identifiable whenever the factors vary separately among the pipelines where
they apply; a factor that does not is left out and named in the plan
(``irt/plan.json``, version 2). Runs made with plan version 1 fitted the
chunker separately on indexed pipelines (``irt/by_chunker/irt.json``); the
report still reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pandas as pd

from ragrade.errors import DataError
from ragrade.io import write_json
from ragrade.irt.io import DEFAULT_NOT_APPLICABLE, RETRIEVAL_ONLY_FACTORS, no_index_rows, not_applicable_values
from ragrade.job.config import JobConfig
from ragrade.job.layout import RunLayout
from ragrade.job.stages import StageContext, StageSummary, sweep_config

if TYPE_CHECKING:
    from ragrade.irt.fit import FitConfig
    from ragrade.llm.base import LLM
    from ragrade.robust.run import RobustRunConfig
    from ragrade.run.spec import SweepConfig

NOT_APPLICABLE: tuple[str, ...] = DEFAULT_NOT_APPLICABLE
PLAN_FILE = "plan.json"
PLAN_VERSION = 2


class FitPlan(TypedDict):
    """One IRT fit of the plan: its factors, output file and the pipelines it covers."""

    name: str
    path: str  # below irt/
    factors: list[str]
    subset: str | None  # None: every pipeline
    pipelines: int
    not_applicable: dict[str, int]  # factor -> pipelines where it does not apply


class IrtPlan(TypedDict):
    """``irt/plan.json``: the fits to run and why factors were left out."""

    version: int
    requested: list[str]
    constant: list[str]
    confounded: list[str]
    not_applicable_values: list[str]
    fits: list[FitPlan]
    note: str


# --------------------------------------------------------------------------- IRT


def applies(df: pd.DataFrame, factor: str, not_applicable: Sequence[str] = NOT_APPLICABLE) -> pd.Series:
    """Per row: whether ``factor`` applies (its value is not one of ``not_applicable``; the IRT model's rule).

    The query and post factors have their own not-applicable values (``n/a``; their ``none`` is a real level).
    """
    keys = {v.strip().lower() for v in not_applicable_values(factor, {"*": tuple(not_applicable)})}
    text = df[factor].map(lambda v: "" if pd.isna(v) else str(v).strip().lower())
    out = ~text.isin(keys)
    if factor in RETRIEVAL_ONLY_FACTORS and tuple(not_applicable):  # closed book, oracle: no k, chunker (as the fit)
        out &= ~no_index_rows(df)
    return out


def design_rank_ok(df: pd.DataFrame, factors: Sequence[str], not_applicable: Sequence[str] = NOT_APPLICABLE) -> bool:
    """True when the additive model over ``factors`` is identifiable on the pipelines of ``df``.

    Decided by the IRT model's own design (:class:`ragrade.irt.hierarchical.Design`): a pipeline where a
    factor's value is one of ``not_applicable`` gets no effect from it; an empty ``not_applicable`` treats
    every value as a level.
    """
    from ragrade.irt.hierarchical import Design
    from ragrade.irt.io import build_responses

    if not factors:
        return True
    extra = ["retriever"] if "retriever" in df.columns and "retriever" not in factors else []
    pipes = df.drop_duplicates("pipeline")[["pipeline", *factors, *extra]].reset_index(drop=True)
    pipes = pipes.assign(question_id="-", correct=1)
    try:
        resp = build_responses(pipes, factors, not_applicable={"*": tuple(not_applicable)})
        Design(resp.factors)
    except DataError:
        return False
    return True


def _varying(df: pd.DataFrame, factors: Sequence[str], not_applicable: Sequence[str] = NOT_APPLICABLE) -> list[str]:
    """The factors with at least two levels among the pipelines where they apply."""
    pipes = df.drop_duplicates("pipeline")
    out = []
    for f in factors:
        if f in pipes:
            real = pipes.loc[applies(pipes, f, not_applicable), f]
            if real.astype(str).nunique() > 1:
                out.append(f)
    return out


def _greedy(
    df: pd.DataFrame, factors: Sequence[str], first: str | None = None, not_applicable: Sequence[str] = NOT_APPLICABLE
) -> list[str]:
    keep: list[str] = [first] if first else []
    for f in factors:
        if f != first and design_rank_ok(df, [*keep, f], not_applicable):
            keep.append(f)
    return keep


def _na_counts(df: pd.DataFrame, factors: Sequence[str], not_applicable: Sequence[str]) -> dict[str, int]:
    pipes = df.drop_duplicates("pipeline")
    counts = {f: int((~applies(pipes, f, not_applicable)).sum()) for f in factors}
    return {f: n for f, n in counts.items() if n}


def plan_irt(df: pd.DataFrame, factors: Sequence[str], not_applicable: Sequence[str] = NOT_APPLICABLE) -> IrtPlan:
    """The IRT fit to run: one hierarchical fit on every pipeline over the requested factors that vary.

    A pipeline where a factor does not apply (its value is one of ``not_applicable``) gets no effect from
    it, so the chunker of closed-book and oracle pipelines needs no separate fit. A factor that cannot be
    told apart from the factors before it, even among the pipelines where it applies, is left out and
    listed under ``confounded`` (the greedy order is the requested order).
    """
    missing = [f for f in factors if f not in df.columns]
    if missing:
        raise DataError(f"IRT factors not in the responses: {', '.join(missing)}")
    varying = _varying(df, factors, not_applicable)
    constant = [f for f in factors if f not in varying]
    main = _greedy(df, varying, not_applicable=not_applicable)
    confounded = [f for f in varying if f not in main]
    na = _na_counts(df, main, not_applicable)
    note = "one fit on every pipeline"
    if na:
        note += "; a pipeline where a factor does not apply gets no effect from it (the average applicable level)"
    if confounded:
        note += f"; left out, not separately identifiable from the factors before them: {', '.join(confounded)}"
    return {
        "version": PLAN_VERSION,
        "requested": list(factors),
        "constant": constant,
        "confounded": confounded,
        "not_applicable_values": list(not_applicable),
        "fits": [
            {
                "name": "main",
                "path": "irt.json",
                "factors": main,
                "subset": None,
                "pipelines": int(df["pipeline"].nunique()),
                "not_applicable": na,
            }
        ],
        "note": note,
    }


def _fit_config(cfg: JobConfig, factors: Sequence[str]) -> FitConfig:
    """The fit of the plan over ``factors``: ``[irt]``'s settings, the job's not-applicable values."""
    return cfg.irt.fit_config(factors, NOT_APPLICABLE)


def run_irt_stage(ctx: StageContext) -> StageSummary:
    """Fit the (hierarchical) IRT model(s) and the iterative improvement; files under ``irt/``."""
    from ragrade.irt.fit import fit_irt
    from ragrade.irt.improve import improve, write_improvement
    from ragrade.irt.io import exam_tags, load_responses
    from ragrade.run.summary import read_responses

    out = ctx.layout.irt
    out.mkdir(parents=True, exist_ok=True)
    df = read_responses(ctx.layout.sweep)
    plan = plan_irt(df, ctx.cfg.irt.factors)
    write_json(out / PLAN_FILE, plan)
    exam = ctx.layout.exam if ctx.layout.exam.is_file() else None
    fits: dict[str, object] = {}
    summary: StageSummary = {"fits": fits}
    for i, fit in enumerate(plan["fits"]):
        ctx.progress(f"irt fit {fit['name']}", i, len(plan["fits"]) + 1)
        res = fit_irt(df, config=_fit_config(ctx.cfg, fit["factors"]), out=out / fit["path"], exam=exam)
        fits[fit["name"]] = {
            "factors": fit["factors"],
            "converged": res.converged,
            "items": len(res.items),
            "pipelines": len(res.pipelines),
            "not_applicable": {f: na["n_pipelines"] for f, na in res.not_applicable.items() if na["n_pipelines"]},
        }
    steps = ctx.cfg.irt.improve_steps
    if steps > 0:
        ctx.progress("irt improve", len(plan["fits"]), len(plan["fits"]) + 1)
        main = plan["fits"][0]["factors"]
        main_cfg = _fit_config(ctx.cfg, main).replace(se="observed")  # improve reads item parameters only
        data = load_responses(df, main, main_cfg.not_applicable)
        imp = improve(data, main_cfg, steps=steps, drop=ctx.cfg.irt.drop, tags=exam_tags(exam) if exam else {})
        write_improvement(imp, out / "improve", exam, data)
        summary["improve"] = {
            "steps": len(imp.steps) - 1,
            "items_start": imp.steps[0]["n_items"],
            "items_end": len(imp.kept),
        }
    return summary


# --------------------------------------------------------------------------- robustness


def run_robust_build(ctx: StageContext) -> StageSummary:
    """Build RGB-style testbeds from the exam and an index into ``robust/testbeds/``."""
    from ragrade.retrieval.index import load_index
    from ragrade.robust.corpus import CorpusBuildOptions, build_corpus_testbeds, qa_from_exam, write_corpus_testbeds

    r = ctx.cfg.robust
    label = ctx.cfg.chunker(r.chunker).label
    opts = CorpusBuildOptions(
        k=r.k, seed=r.seed, lang=r.lang, max_questions=r.limit, min_positives=max(r.min_positives, 1)
    )
    index_dir = ctx.layout.index(label)
    ret = load_index(index_dir).retriever(r.retriever)
    built = build_corpus_testbeds(qa_from_exam(ctx.layout.exam), ret, opts)
    write_corpus_testbeds(
        built, ctx.layout.testbeds, {"exam": str(ctx.layout.exam), "index": str(index_dir), "retriever": r.retriever}
    )
    rep = built.report
    return {k: rep[k] for k in ("questions", "base", "integration", "counterfactual")}


def testbed_data(ctx: StageContext, testbed: str) -> Path:
    """The data file a testbed reads: the user's RGB file, or the one built from the corpus."""
    r = ctx.cfg.robust
    if r.data is not None:
        return Path(r.data)
    from ragrade.robust.testbeds import get_testbed

    return ctx.layout.testbeds / f"{get_testbed(testbed).data_file}.jsonl"


def testbed_config(job: JobConfig, testbed: str, data: Path, out: Path) -> RobustRunConfig:
    """The ``robust run`` settings of one testbed of the job (``run --check`` validates the same): ``[robust]``'s,
    its noise ratios those the testbed takes, the job's ``[llm_options]``."""
    from ragrade.robust.run import RobustRunConfig
    from ragrade.robust.testbeds import get_testbed

    r = job.robust
    tb = get_testbed(testbed)
    ratios = None if tb.ratios_fixed or r.noise_ratios is None else [x for x in r.noise_ratios if x < 1.0]
    if tb.ratio_cap is not None and ratios:
        ratios = [x for x in ratios if x <= tb.ratio_cap] or None
    return RobustRunConfig.model_validate(
        {
            **r.run_settings(),  # [robust] holds `robust run`'s settings, same keys
            "data": data,
            "testbed": testbed,
            "llm": list(r.llm),
            "out": out,
            "noise_ratios": ratios,
            "llm_options": job.llm,  # the job's [llm_options], shared by its LLMs
        }
    )


def run_robust_testbed(ctx: StageContext, testbed: str) -> StageSummary:
    """Run one testbed with every robustness LLM into ``robust/<testbed>/`` (resumes through results.jsonl)."""
    from ragrade.robust.run import run_robust
    from ragrade.robust.testbeds import get_testbed

    data = testbed_data(ctx, testbed)
    out = ctx.layout.robust / testbed
    if not data.is_file():
        out.mkdir(parents=True, exist_ok=True)
        why = f"no {get_testbed(testbed).data_file} items could be built from this corpus"
        write_json(out / "skipped.json", {"version": 1, "testbed": testbed, "reason": why})
        return {"skipped": why}
    cfg = testbed_config(ctx.cfg, testbed, data, out)
    stale = out / "skipped.json"
    if stale.exists():
        stale.unlink()

    def progress(what: str, done: int, total: int) -> None:
        ctx.progress(f"robust {testbed}: {what}", done, total)

    from ragrade.journal import JournalMismatch

    try:
        runs, table = run_robust(cfg, progress=progress)
    except JournalMismatch:  # records of other settings (or of an earlier ragrade): the stage is computed again
        import shutil

        shutil.rmtree(out)
        runs, table = run_robust(cfg, progress=progress)
    from ragrade.llm.failures import resume_hint, robust_request_tally

    robust_request_tally(runs).check(resume_hint("rerun `ragrade run`"), None, what="testbed")
    return {
        "models": [m.model for m in runs],
        "n": [m.metrics.get("n") for m in runs],
        "rows": len(table.get("rows", [])),
    }


# --------------------------------------------------------------------------- judged free-text answers


def judge_sweep_config(cfg: JobConfig, layout: RunLayout) -> SweepConfig:
    """The grid that answers the QA triplets: ``[judge]`` answer LLMs x retrievers at one k, ICL 0."""
    j = cfg.judge
    base = sweep_config(cfg, layout)
    grid: dict[str, object] = {
        "llms": list(j.answer_llms),
        "retrievers": list(j.retrievers),
        "icl": [0],
        "k": [j.k or cfg.sweep.k[0]],
    }
    if j.chunkers:
        grid["chunkers"] = list(j.chunkers)
    return base.model_copy(update={"grid": base.grid.model_validate({**base.grid.model_dump(), **grid})})


def run_judge_stage(ctx: StageContext) -> StageSummary:
    """QA triplets from the chunks, free-text answers by the pipelines, then the judges; under ``judge/``."""
    from ragrade.corpus.files import read_chunks
    from ragrade.judge.run import JudgeRunConfig, run_judging
    from ragrade.qa.files import write_qa
    from ragrade.qa.generate import OFFLINE, QAGenConfig, generate_qa
    from ragrade.qa.run import run_qa_answers

    j = ctx.cfg.judge
    out = ctx.layout.judge
    label = ctx.cfg.chunker(ctx.cfg.exam.chunker).label
    qa_path = out / "qa.jsonl"
    warning = None
    if not qa_path.is_file():
        llm = None if j.qa_llm == OFFLINE else _llm(ctx, j.qa_llm)
        from ragrade.exam.corpus import CORPUS_KEY, corpus_fingerprint

        chunks = read_chunks(ctx.layout.chunks(label))
        items, funnel = generate_qa(chunks, llm, QAGenConfig(n=j.n))
        if not items:
            raise DataError(f"no question/answer triplet could be generated for the judges: {funnel.shortfall()}")
        meta = {"generator": j.qa_llm, "funnel": funnel.to_dict(), CORPUS_KEY: corpus_fingerprint(chunks)}
        write_qa(qa_path, items, meta=meta)
        shortfall = funnel.shortfall()
        warning = None if shortfall is None else f"QA triplets for the judges: {shortfall}"
    scfg = judge_sweep_config(ctx.cfg, ctx.layout)

    def progress(pipeline: str, n: int, total: int) -> None:
        ctx.progress(f"judge answers: {pipeline[:40]}", n, total)

    answered = run_qa_answers(qa_path, scfg, out / "answers", progress=progress)
    # [judge] holds `judge`'s settings, same keys; the job's [llm_options] are shared by its LLMs
    jcfg = JudgeRunConfig.model_validate({**j.judge_settings(), "llm_options": ctx.cfg.llm})
    summary = run_judging(
        out / "answers", out / "scores", jcfg, progress=lambda m, d, t: ctx.progress(f"judge {m}", d, t)
    )
    # results first, then the threshold of the sweep, exam and robustness stages: exit 3, a rerun resumes
    from ragrade.judge.run import check_judge_failures
    from ragrade.llm.failures import check_grid_failures, resume_hint

    resume = resume_hint("rerun `ragrade run`")
    check_grid_failures(answered.rows, None, resume)
    check_judge_failures(summary, None, resume)
    out_summary: StageSummary = {
        "answers": summary["n_answers"],
        "configs": len(summary["configs"]),
        "metrics": list(j.metrics),
    }
    if warning is not None:
        out_summary["warning"] = warning  # printed under the stage's line (job.progress)
    return out_summary


def run_calibration_stage(ctx: StageContext) -> StageSummary:
    """``[calibration]``: PPI++ estimates from the human labels, under ``judge/scores/calibration/``."""
    from ragrade.judge.calibrate import run_calibration

    cal = ctx.cfg.calibration
    scores = ctx.layout.judge / "scores"
    result = run_calibration(scores, str(cal.human), scores / "calibration", cal)
    return {"metrics": sorted(result["metrics"])}


def _llm(ctx: StageContext, spec: str) -> LLM:
    from ragrade.llm import create_llm

    return create_llm(spec, ctx.cfg.llm.for_llm(spec))  # the job's [llm_options], shared by its LLMs


__all__ = [
    "NOT_APPLICABLE",
    "PLAN_FILE",
    "PLAN_VERSION",
    "applies",
    "design_rank_ok",
    "judge_sweep_config",
    "plan_irt",
    "run_calibration_stage",
    "run_irt_stage",
    "run_judge_stage",
    "run_robust_build",
    "run_robust_testbed",
    "testbed_data",
]
