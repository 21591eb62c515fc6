"""Report sections about the exam and the sweep: leaderboard, paired verdicts, topics, exam funnel and baselines."""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from ragrade.report import charts
from ragrade.report.html import Section, Table, fmt
from ragrade.report.sources import RunFiles
from ragrade.retrieval.base import retriever_caps

SUMMARY = "sweep/summary.csv"
BY_TAG = "sweep/summary_by_tag.csv"
COMPARISONS = "sweep/comparisons.json"
EXAM = "exam/exam.jsonl"
FUNNEL = "exam/exam.funnel.json"
MAX_TOPICS = 14
SAMPLE_QUESTIONS = 8


def absent(section: Section, *paths: str) -> Section:
    """Mark ``section`` as empty because its files are absent."""
    section.note = (
        "not in this run: " + ", ".join(paths) + " (the stage did not run or was disabled; a run folder kept "
        "elsewhere joins the report with `ragrade report RUN --add DIR`, an adaptive run with `--adaptive DIR`)"
    )
    return section


def pipeline_role(pid: str) -> str:
    """``upper bound`` (oracle: handed the gold passage), ``offline baseline`` (an ``offline/`` LLM), else ``""``."""
    parts = dict(p.partition("=")[::2] for p in str(pid).split("|"))
    roles = []
    if retriever_caps(parts.get("retriever", "")).needs_gold:
        roles.append("upper bound")
    if str(parts.get("llm", "")).removeprefix("replay/").startswith("offline"):  # a replayed offline model too
        roles.append("offline baseline")
    return ", ".join(roles)


def short_pipeline(pid: str) -> str:
    """A compact label for a pipeline id (``llm=x|retriever=y|...`` -> ``y k=3 icl=1 chunker``), role appended."""
    role = pipeline_role(pid)
    return _short(pid) + (f" ({role})" if role else "")


def _short(pid: str) -> str:
    parts = dict(p.partition("=")[::2] for p in str(pid).split("|"))
    bits = [parts.get("retriever", "?")]
    fixed_k = retriever_caps(parts.get("retriever", "")).fixed_k is not None  # closed book, oracle: k says nothing
    if parts.get("k") not in (None, "0", "1") or not fixed_k:
        bits.append(f"k={parts.get('k')}")
    bits.append(f"icl={parts.get('icl', '0')}")
    if parts.get("chunker") not in (None, "none"):
        bits.append(str(parts["chunker"]))
    llm = parts.get("llm")
    if llm:
        bits.insert(0, llm)
    for extra in ("prompt", "method", "query", "post", "temperature", "max_tokens", "run"):
        if extra in parts:
            bits.append(f"{extra}={parts[extra]}")
    return " · ".join(bits)


def leaderboard(files: RunFiles, top: int) -> Section:
    """Pipelines ranked by accuracy with Wilson 95% intervals, and the paired verdicts of the top ones."""
    sec = Section("leaderboard", "Leaderboard")
    df = files.csv(SUMMARY)
    if df is None or df.empty:
        return absent(sec, SUMMARY)
    df = df.sort_values(["accuracy", "pipeline"], ascending=[False, True]).reset_index(drop=True)
    roles = [pipeline_role(p) for p in df["pipeline"]]
    best = df.iloc[0]
    failed = int(df["n_errors"].sum()) if "n_errors" in df else 0
    asked = int(best["n"]) + (int(best["n_errors"]) if "n_errors" in df else 0)
    missing = (
        f" {failed} answers are missing (failed requests, shown as n_errors): they are left out of every "
        "accuracy and interval, never counted wrong; rerun the same command to ask them again."
        if failed
        else ""
    )
    sec.add_text(f"{len(df)} pipelines took the same {asked} questions. {_headline(df, roles)}" + missing, SUMMARY)
    _scoring_text(sec, df)
    _offline_exam_note(sec, files)
    _icl_note(sec, df)
    if files.merged is not None:
        counts = ", ".join(f"{n} from {label}" for label, n in files.merged.pipelines.items())
        sec.add_text(f"Merged from {len(files.merged.runs)} runs of the same exam ({counts}).", SUMMARY)
        for note in files.merged.notes:
            sec.add_text(note, SUMMARY)
    labels = [short_pipeline(p) for p in df["pipeline"]]
    cols = ["pipeline", "n", "n_correct", "accuracy", "ci_low", "ci_high", "n_errors", "n_parse_failures"]
    cols[6:6] = [c for c in ("decision_rule", "acc_per_char", "acc_sum") if c in df and df[c].notna().any()]
    if "gold_doc_hit_rate" in df:
        cols.append("gold_doc_hit_rate")
    if "run" in df:  # merged runs: where each row's answers come from
        cols.insert(1, "run")
    table = Table(
        ["rank", *cols, "scored by", "role"],
        [[i + 1, *(row[c] for c in cols), _scored_by(row), roles[i]] for i, (_, row) in enumerate(df.iterrows())],
        caption="Accuracy per pipeline with Wilson 95% intervals (n: answered; n_errors: failed requests, missing; "
        "decision_rule: what decided accuracy; acc_per_char / acc_sum: accuracy by either log-likelihood rule; "
        "role: upper bound = oracle, handed the question's own passage; offline baseline = an offline/ LLM, "
        "no language model)",
        source=SUMMARY,
    )
    retr = df["retriever"].astype(str).tolist() if "retriever" in df else ["" for _ in labels]
    palette = {r: charts.PALETTE[i % len(charts.PALETTE)] for i, r in enumerate(dict.fromkeys(retr))}
    sec.add(
        charts.bar_with_errors(
            "leaderboard",
            "Accuracy per pipeline (95% Wilson interval)",
            labels,
            df["accuracy"].tolist(),
            df["ci_low"].tolist(),
            df["ci_high"].tolist(),
            source=SUMMARY,
            axis_title="accuracy",
            colors=[palette[r] for r in retr],
        )
    )
    sec.add(table)
    sec.add(_verdicts(files, top))
    _baselines(sec, files)
    return sec


def _headline(df: pd.DataFrame, roles: list[str]) -> str:
    """The best real pipeline (neither an upper bound nor an offline baseline), with the bounds named as such."""

    def acc(i: int) -> str:
        row = df.iloc[i]
        return f"accuracy {row['accuracy']:.3f} (95% interval {row['ci_low']:.3f} to {row['ci_high']:.3f})"

    real = [i for i, r in enumerate(roles) if not r]
    text = f"Best: {short_pipeline(df['pipeline'].iloc[real[0]])} with {acc(real[0])}." if real else ""
    if not real:
        fair = [i for i, r in enumerate(roles) if "upper bound" not in r]
        text = "No pipeline uses a real LLM: every one is an offline baseline, which ranks retrieval set-ups, not "
        text += "models (give a real model with --llm / [sweep] llms)."
        if fair:
            text += f" Best of them: {short_pipeline(df['pipeline'].iloc[fair[0]])} with {acc(fair[0])}."
    bound = next((i for i, r in enumerate(roles) if "upper bound" in r), None)
    if bound is not None:
        text += f" Upper bound (oracle, given the gold passage): {_short(df['pipeline'].iloc[bound])}, {acc(bound)}."
    return text


def baseline_notes(files: RunFiles) -> list[str]:
    """One-line notes a terminal should print after a run: an offline exam, offline-only pipelines."""
    from ragrade.exam.offline import is_offline_exam

    notes = []
    exam = files.jsonl(EXAM)
    if exam is not None and is_offline_exam(exam[0]):
        notes.append(
            "the exam was written offline (cloze sentences copied from the corpus), which favours lexical "
            "retrieval (BM25); write it with a real LLM ([exam] llm) to rank pipelines for real questions"
        )
    df = files.csv(SUMMARY)
    if df is not None and not df.empty and all("offline baseline" in pipeline_role(p) for p in df["pipeline"]):
        notes.append("every pipeline is an offline baseline: give a real LLM in [sweep] llms to compare models")
    return notes


def _offline_exam_note(sec: Section, files: RunFiles) -> None:
    """Warn where the numbers appear when the exam was written offline (cloze sentences copied from the text)."""
    from ragrade.exam.offline import OFFLINE_EXAM_NOTE, is_offline_exam

    exam = files.jsonl(EXAM)
    if exam is not None and is_offline_exam(exam[0]):
        sec.add_text("Note on offline exams: " + OFFLINE_EXAM_NOTE, EXAM)


def _icl_note(sec: Section, df: pd.DataFrame) -> None:
    """The offline student ignores in-context examples: its ICL levels are one pipeline answered several times."""
    if "icl" not in df or "llm" not in df or df["icl"].nunique() < 2:
        return
    if (df["llm"].astype(str) == "offline/student").any():
        levels = ", ".join(str(v) for v in sorted(df["icl"].unique()))
        sec.add_text(
            f"offline/student ignores in-context examples: its pipelines at ICL {levels} answer identically, so "
            "those levels add requests, not information (ICL matters only for a real LLM).",
            SUMMARY,
        )


def _scored_by(row: Any) -> str:
    """``method/ll_source`` of a summary row (``loglikelihood/forced-token``, ``generate``, ``.../mixed``)."""
    method, source = row.get("method"), row.get("ll_source")
    text = str(method) if isinstance(method, str) else ""
    if isinstance(source, str) and source:
        text += "/" + ("mixed" if source.startswith("mixed") else source)
    return text


def _scoring_text(sec: Section, df: pd.DataFrame) -> None:
    """Which rule decided the headline accuracy, and the pipelines whose scoring changed part-way."""
    from ragrade.run.summary import RULE_NAMES

    if "decision_rule" not in df:
        return
    rules = list(dict.fromkeys(r for v in df["decision_rule"] for r in str(v).split("+") if r not in ("none", "nan")))
    if rules:
        text = "Accuracy is decided by " + "; ".join(RULE_NAMES.get(r, r) for r in rules) + "."
        if any(r in ("per_char", "sum", "per_token") for r in rules):
            text += (
                " The table also gives the accuracy by either log-likelihood rule: acc_per_char (per character, "
                "lm-evaluation-harness acc_norm) and acc_sum (the summed log-likelihood, acc)."
            )
        sec.add_text(text, SUMMARY)
    mixed = df[df["ll_source"].astype(str).str.startswith("mixed")] if "ll_source" in df else df.iloc[0:0]
    for _, row in mixed.iterrows():
        sec.add_text(
            f"Warning: {short_pipeline(row['pipeline'])} was scored in different ways part-way "
            f"({str(row['ll_source']).removeprefix('mixed: ')} rows); its accuracy mixes them.",
            SUMMARY,
        )


def _verdicts(files: RunFiles, top: int) -> str:
    comps = files.json(COMPARISONS)
    if not comps and (stale := files.stale(COMPARISONS)):
        return f'<p class="note stale">No paired comparisons shown: {html.escape(stale)}.</p>'
    if not comps:
        return f'<p class="note">No paired comparisons ({html.escape(COMPARISONS)} is absent).</p>'
    rows = []
    for c in comps.get("comparisons", [])[: top * (top - 1) // 2]:
        verdict = str(c["verdict"])
        rows.append(
            [
                short_pipeline(c["a"]),
                short_pipeline(c["b"]),
                c["difference"],
                c["ci_low"],
                c["ci_high"],
                _adjusted_ci(c),
                f"{c['a_only']}/{c['b_only']}",
                c["p_value"],
                c["p_adjusted"],
                verdict,
            ]
        )
    table = Table(
        [
            "A",
            "B",
            "A-B",
            "CI low (unadjusted)",
            "CI high (unadjusted)",
            "CI adjusted for the pairs",
            "discordant A/B",
            "McNemar p",
            f"p ({comps.get('correction', 'none')})",
            "verdict",
        ],
        rows,
        caption=f"Paired comparisons of the top {len(comps.get('pipelines', []))} pipelines "
        f"(paired bootstrap 95% CI of one pair on its own, and at the Bonferroni level over the pairs, which "
        f"matches the adjusted verdict; exact McNemar test, alpha {comps.get('alpha')}; the verdict follows the "
        "adjusted p)",
        source=COMPARISONS,
    )
    twins = comps.get("identical") or {}
    note = ""
    if twins:
        listed = "; ".join(f"{short_pipeline(t)} = {short_pipeline(s)}" for t, s in sorted(twins.items()))
        note = (
            f'<p class="note">Left out of the comparisons because they answered every question exactly like '
            f"a better-ranked pipeline: {html.escape(listed)}.</p>"
        )
    return "<h3>Which of the top pipelines is really better?</h3>" + table.to_html() + note


def _adjusted_ci(c: dict[str, Any]) -> str:
    lo, hi, level = c.get("ci_adjusted_low"), c.get("ci_adjusted_high"), c.get("ci_adjusted_level")
    if lo is None or hi is None or level is None:
        return ""
    return f"{float(level):.1%}: [{float(lo):+.3f}, {float(hi):+.3f}]"


def _baselines(sec: Section, files: RunFiles) -> None:
    exam = files.jsonl(EXAM)
    if exam is None:
        return
    analytics = exam[0].get("analytics") or {}
    base = analytics.get("baselines")
    if not base:
        return
    rows = [["chance (1 of 4)", base.get("chance"), None, None]]
    for key, label in (
        ("fixed_letter", "always the most frequent letter"),
        ("longest_answer", "longest choice"),
        ("shortest_answer", "shortest choice"),
    ):
        b = base.get(key) or {}
        ci = b.get("ci95") or [None, None]
        name = label + (f" ({b.get('letter')})" if key == "fixed_letter" else "")
        rows.append([name, b.get("accuracy"), ci[0], ci[1]])
    sec.add("<h3>Baselines that read no document</h3>")
    sec.add(
        Table(
            ["baseline", "accuracy", "CI low", "CI high"],
            rows,
            caption="A pipeline near these numbers has learned nothing from the corpus",
            source=f"{EXAM} (header: analytics.baselines)",
        )
    )


def topics(files: RunFiles) -> Section:
    """Accuracy per topic and retriever (grouped bars + radar): where each retrieval approach fails."""
    sec = Section("topics", "Accuracy per topic")
    by_tag = files.csv(BY_TAG)
    summary = files.csv(SUMMARY)
    if by_tag is None or summary is None:
        return absent(sec, BY_TAG)
    t = by_tag[by_tag["tag"] == "topic"]
    if t.empty:
        sec.note = f"the questions carry no topic tag ({BY_TAG} has no topic rows)"
        return sec
    factor = summary.set_index("pipeline")["retriever"].astype(str) if "retriever" in summary else None
    t = t.assign(group=t["pipeline"].map(factor) if factor is not None else t["pipeline"])
    agg = t.groupby(["group", "value"], sort=False)[["n", "n_correct"]].sum().reset_index()
    agg["accuracy"] = agg["n_correct"] / agg["n"]
    sizes = t.drop_duplicates(["value", "pipeline"]).groupby("value")["n"].max().sort_values(ascending=False)
    chosen = [str(v) for v in sizes.index[:MAX_TOPICS]]
    groups = list(dict.fromkeys(agg["group"].astype(str)))
    series: list[tuple[str, list[float | None]]] = []
    rows: list[list[object]] = []
    for g in groups:
        sub = agg[agg["group"].astype(str) == g]
        acc = {str(k): float(a) for k, a in zip(sub["value"], sub["accuracy"], strict=True)}
        vals = [acc.get(v) for v in chosen]
        series.append((g, vals))
        rows.append([g, *vals])
    table = Table(
        ["retriever", *chosen],
        rows,
        caption="Accuracy per topic (pooled over the retriever's pipelines)",
        source=BY_TAG,
    )
    sec.add_text(
        f"The {len(chosen)} topics with the most questions (of {len(sizes)}); each retriever's accuracy is "
        "pooled over its pipelines (chunkers, ICL). Questions per topic are few, so single bars are noisy.",
        BY_TAG,
    )
    sec.add(
        charts.grouped_bars(
            "topic-bars",
            "Accuracy per topic and retriever",
            chosen,
            series,
            source=BY_TAG,
            y_title="accuracy",
            table=table,
        )
    )
    if len(chosen) >= 3:
        sec.add(charts.radar("topic-radar", "Accuracy per topic (radar)", chosen, series, source=BY_TAG))
    return sec


def exam_section(files: RunFiles) -> Section:
    """The exam: the generation funnel, what the questions look like, taxonomy counts."""
    sec = Section("exam", "Exam")
    exam = files.jsonl(EXAM)
    if exam is None:
        return absent(sec, EXAM)
    meta, records = exam
    funnel = files.json(FUNNEL) or meta.get("funnel")
    fsrc = FUNNEL if files.has(FUNNEL) else f"{EXAM} (header: funnel)"
    gen = meta.get("generator") or {}
    sec.add_text(f"{len(records)} questions, generator {gen.get('name', '?')}.", EXAM)
    if funnel:
        names, counts, rows = ["generated"], [int(funnel["generated"])], []
        for st in funnel.get("stages", []):
            rows.append(
                [
                    st["stage"],
                    st["in"],
                    st["removed"],
                    st["out"],
                    ", ".join(f"{k} {v}" for k, v in (st.get("reasons") or {}).items()),
                ]
            )
            if st["removed"]:
                names.append(f"after {st['stage']}")
                counts.append(int(st["out"]))
        table = Table(["stage", "in", "removed", "out", "reasons"], rows, caption="Generation funnel", source=fsrc)
        sec.add(charts.funnel("exam-funnel", "Candidates surviving each filter", names, counts, source=fsrc))
        sec.add(table)
    analytics = meta.get("analytics") or {}
    for key, label in (("bloom", "Bloom level"), ("qword", "question word")):
        counts_map = analytics.get(key) or {}
        if counts_map:
            sec.add(
                Table(
                    [label, "questions"],
                    [[k, v] for k, v in counts_map.items()],
                    caption=f"Questions per {label}",
                    source=f"{EXAM} (header: analytics.{key})",
                )
            )
    sample = [
        [
            r.get("id"),
            r.get("question"),
            " | ".join(map(str, r.get("choices", []))),
            _letter(r.get("answer")),
            r.get("source"),
        ]
        for r in records[:SAMPLE_QUESTIONS]
    ]
    sec.add(
        Table(
            ["id", "question", "choices", "answer", "source"],
            sample,
            caption=f"The first {len(sample)} questions (text from the corpus, shown as text)",
            source=EXAM,
        )
    )
    return sec


def _letter(answer: object) -> object:
    return "ABCD"[answer] if isinstance(answer, int) and 0 <= answer < 4 else answer


def accuracy_by_factor(summary: pd.DataFrame, factor: str) -> dict[str, float]:
    """Marginal accuracy per level of ``factor`` (pooled correct / pooled answered)."""
    g = summary.groupby(summary[factor].astype(str))[["n", "n_correct"]].sum()
    return {str(k): float(r["n_correct"] / r["n"]) for k, r in g.iterrows() if r["n"]}


__all__ = [
    "absent",
    "accuracy_by_factor",
    "baseline_notes",
    "exam_section",
    "fmt",
    "leaderboard",
    "pipeline_role",
    "short_pipeline",
    "topics",
]
