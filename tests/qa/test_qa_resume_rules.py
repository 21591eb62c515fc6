"""``qa answer`` (``answer_qa``) resumes after a change of concurrency, timeout or retries alone, and refuses
a change of model options, prompt or questions (the rules of run/setup.py, shared with ``exam take``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.run.resume_rules import check_resume_rules

from ragrade.api.exam import answer_qa
from ragrade.qa.files import QAItem, write_qa
from ragrade.run.spec import SweepConfig

pytestmark = pytest.mark.usefixtures("isolated_llm_env")


def test_qa_answer_resumes_on_throughput_changes_and_refuses_the_rest(tmp_path: Path) -> None:
    qa = tmp_path / "qa.jsonl"
    items = [
        QAItem(
            id=f"q{i}",
            question=f"What colour is box {i}?",
            reference="blue",
            reference_context=f"Box {i} is blue.",
            chunk_id=f"c{i}",
            doc_id="d",
        )
        for i in range(8)
    ]
    write_qa(qa, items)

    def run(out: Path, cfg: SweepConfig) -> int:
        return answer_qa(qa, out, config=cfg).n_new_rows

    check_resume_rules(run, tmp_path, "{context}Answer briefly: {question}", lambda body: "blue")
