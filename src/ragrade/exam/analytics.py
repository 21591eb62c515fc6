"""Exam analytics: answer-letter balance, guessing baselines, lengths and taxonomy counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragrade.exam.files import LETTERS, Question
from ragrade.exam.funnel import shortfall_line
from ragrade.stats import wilson_interval


def _rate(k: float, n: int) -> dict[str, Any]:
    lo, hi = wilson_interval(round(k), n) if n else (0.0, 1.0)
    return {"accuracy": round(k / n, 4) if n else None, "ci95": [round(lo, 4), round(hi, 4)]}


def length_baseline(questions: Sequence[Question], longest: bool = True) -> float:
    """Expected correct answers of always picking the longest (or shortest) candidate; ties share credit."""
    score = 0.0
    for q in questions:
        lens = [len(c) for c in q.choices]
        target = max(lens) if longest else min(lens)
        tied = [i for i, n in enumerate(lens) if n == target]
        score += (q.answer in tied) / len(tied)
    return score


def exam_analytics(questions: Sequence[Question]) -> dict[str, Any]:
    """Analytics of an exam (plain JSON): letters, fixed-letter and length baselines, lengths, tags."""
    n = len(questions)
    letters = Counter(LETTERS[q.answer] if q.answer < len(LETTERS) else str(q.answer) for q in questions)
    letter_counts = {letter: letters.get(letter, 0) for letter in LETTERS}
    best_letter = max(LETTERS, key=lambda letter: (letter_counts[letter], -LETTERS.index(letter)))
    longest = length_baseline(questions, longest=True)
    shortest = length_baseline(questions, longest=False)
    q_chars = np.array([len(q.question) for q in questions], dtype=float) if n else np.zeros(1)
    c_chars = np.array([len(c) for q in questions for c in q.choices], dtype=float) if n else np.zeros(1)
    bloom = Counter(level for q in questions for level in (q.tags.get("bloom") or ["(none)"]))
    qwords = Counter(str(q.tags.get("qword") or "other") for q in questions)
    topics = Counter(str(q.tags.get("topic")) for q in questions if q.tags.get("topic") is not None)
    generators = Counter(str(q.generator.get("name", "?")) for q in questions)
    kinds = Counter(str(q.generator["kind"]) for q in questions if "kind" in q.generator)
    return {
        "questions": n,
        "documents": len({q.doc_id for q in questions}),
        "chunks": len({q.chunk_id for q in questions}),
        "answer_letters": {
            "counts": letter_counts,
            "shares": {k: round(v / n, 4) if n else None for k, v in letter_counts.items()},
        },
        "baselines": {
            "chance": 0.25,
            "fixed_letter": {"letter": best_letter, **_rate(letter_counts[best_letter], n)},
            "longest_answer": _rate(longest, n),
            "shortest_answer": _rate(shortest, n),
        },
        "lengths": {
            "question_chars_mean": round(float(q_chars.mean()), 1),
            "question_chars_median": round(float(np.median(q_chars)), 1),
            "choice_chars_mean": round(float(c_chars.mean()), 1),
        },
        "bloom": dict(sorted(bloom.items())),
        "qword": dict(sorted(qwords.items())),
        "topics": dict(sorted(topics.items(), key=lambda kv: (-kv[1], kv[0]))),
        "generators": dict(sorted(generators.items())),
        **({"kinds": dict(sorted(kinds.items()))} if kinds else {}),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def format_analytics(stats: Mapping[str, Any], funnel: Mapping[str, Any] | None = None) -> str:
    """A plain-text report of :func:`exam_analytics` output and the funnel."""
    lines = [f"questions: {stats['questions']}  (documents {stats['documents']}, chunks {stats['chunks']})"]
    al = stats["answer_letters"]
    lines.append(
        "answer letters: " + "  ".join(f"{k} {al['counts'][k]} ({_pct(al['shares'][k])})" for k in al["counts"])
    )
    b = stats["baselines"]
    for name, label in (
        ("fixed_letter", "fixed-letter baseline"),
        ("longest_answer", "longest-answer baseline"),
        ("shortest_answer", "shortest-answer baseline"),
    ):
        row = b[name]
        extra = f" (always {row['letter']})" if name == "fixed_letter" else ""
        lines.append(
            f"{label}: {_pct(row['accuracy'])}{extra}  95% CI {_pct(row['ci95'][0])}-"
            f"{_pct(row['ci95'][1])}  (chance 25.0%)"
        )
    ln = stats["lengths"]
    lines.append(
        f"question length: mean {ln['question_chars_mean']} chars, median {ln['question_chars_median']}; "
        f"candidate length: mean {ln['choice_chars_mean']} chars"
    )
    for key, label in (
        ("bloom", "bloom levels"),
        ("qword", "question words"),
        ("kinds", "cloze kinds"),
        ("generators", "generators"),
    ):
        if stats.get(key):
            lines.append(f"{label}: " + ", ".join(f"{k} {v}" for k, v in stats[key].items()))
    if stats.get("topics"):
        top = list(stats["topics"].items())
        more = f", ... ({len(top) - 12} more)" if len(top) > 12 else ""
        lines.append("topics: " + ", ".join(f"{k} {v}" for k, v in top[:12]) + more)
    if funnel:
        lines.append("")
        lines.append(f"funnel: generated {funnel['generated']}, kept {funnel['kept']}, removed {funnel['removed']}")
        for st in funnel["stages"]:
            reasons = ", ".join(f"{k} {v}" for k, v in st["reasons"].items())
            thr = st.get("filter", {}).get("thresholds")
            thr_s = ""
            if thr:
                thr_s = "  thresholds " + ", ".join(f"{k}={v}" for k, v in thr.items())
            lines.append(
                f"  {st['stage']:<17} in {st['in']:>5}  removed {st['removed']:>5}  out {st['out']:>5}"
                + (f"  [{reasons}]" if reasons else "")
                + thr_s
            )
        if funnel.get("stem_rules"):
            rules = ", ".join(f"{k} {v}" for k, v in funnel["stem_rules"].items())
            lines.append(f"  offline stem rules set aside these candidate blanks (another blank was tried): {rules}")
        why = shortfall_line(funnel)
        if why is not None:
            lines.append(f"  shortfall: {why}")
    return "\n".join(lines)


__all__ = ["exam_analytics", "format_analytics", "length_baseline"]
