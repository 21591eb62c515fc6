"""``exam take --adaptive`` (``run_adaptive``) resumes after a change of concurrency, timeout or retries alone,
and refuses a change of model options, prompt or questions (the rules of run/setup.py, shared with
``exam take`` and ``qa answer``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.run.fakes import make_exam
from tests.run.resume_rules import check_resume_rules

from ragrade.adaptive.runner import run_adaptive
from ragrade.run.adaptive_config import AdaptiveConfig
from ragrade.run.spec import SweepConfig

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

EXAM_PROMPT = "{examples}{context}Question: {question}\n{choices}\n{answer_prefix}"


def test_adaptive_take_resumes_on_throughput_changes_and_refuses_the_rest(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 8)
    acfg = AdaptiveConfig(enabled=True)

    def run(out: Path, cfg: SweepConfig) -> int:
        return run_adaptive(exam, cfg, acfg, out).n_new_rows

    check_resume_rules(run, tmp_path, EXAM_PROMPT, lambda body: "A")
