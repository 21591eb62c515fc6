"""`ragrade run` says in the terminal when a generator made fewer questions than requested (issue 36.7)."""

from __future__ import annotations

import io

from ragrade.exam.funnel import build_funnel
from ragrade.job.progress import Display
from ragrade.job.stages import exam_shortfall


def _funnel(kept: int, requested: int) -> dict[str, object]:
    reasons = ["generation:no_key_term"] * 15 + ["near_duplicate:cosine"] * 20 + ["parse:bad_json"] * 3
    chunks = {"total": 700, "too_short": 37, "eligible": 663, "asked": kept + 38}
    extra = {"requested": requested, "rounds": 3, "chunks": chunks}
    return dict(build_funnel(kept + len(reasons), reasons, kept, extra=extra))


def test_an_exam_shortfall_is_one_line_with_counts_per_reason() -> None:
    text = exam_shortfall(_funnel(27, 60))
    assert text is not None
    assert text.startswith("27 of 60 requested questions (65 of 663 eligible chunks asked in 3 rounds, of 700 chunks)")
    assert "near_duplicate:cosine 20, generation:no_key_term 15, parse:bad_json 3" in text
    assert "raise `max_rounds` or `oversample` in [exam]" in text
    every = _funnel(27, 60)
    every["chunks"] = {"total": 700, "eligible": 65, "asked": 65}
    assert "every eligible chunk was asked" in str(exam_shortfall(every))
    assert exam_shortfall(_funnel(60, 60)) is None
    surplus = _funnel(60, 60)
    surplus["reasons"] = {"surplus:surplus": 4}
    assert exam_shortfall(surplus) is None


def test_the_stage_line_is_followed_by_its_warning() -> None:
    out = io.StringIO()
    display = Display(stream=out, interval=0)
    display.stage_done(5, 10, "exam", 3.0, {"questions": 27, "warning": "27 of 60 requested questions"})
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[ 6/10] exam") and "questions=27" in lines[0] and "warning" not in lines[0]
    assert lines[1] == "ragrade: warning: exam: 27 of 60 requested questions"
    display.stage_done(6, 10, "sweep", 1.0, {"pipelines": 4})
    assert len(out.getvalue().splitlines()) == 3
