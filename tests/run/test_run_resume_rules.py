"""``exam take`` (``take_exam``) resumes after a change of concurrency, timeout or retries alone, and refuses
a change of model options, prompt or questions (the rules of run/setup.py, shared with ``qa answer``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import make_exam
from tests.run.resume_rules import check_resume_rules

from ragrade.api.exam import take_exam
from ragrade.run.spec import SweepConfig

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

EXAM_PROMPT = "{examples}{context}Question: {question}\n{choices}\n{answer_prefix}"


def test_exam_take_resumes_on_throughput_changes_and_refuses_the_rest(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 8)

    def run(out: Path, cfg: SweepConfig) -> int:
        return take_exam(exam, out, config=cfg).n_new_rows

    check_resume_rules(run, tmp_path, EXAM_PROMPT, lambda body: "A")


def test_one_setup_gives_every_runner_the_same_manifest_part_and_fingerprint_rules(tmp_path: Path) -> None:
    from ragrade.provenance import digest
    from ragrade.qa.files import QAItem, write_qa
    from ragrade.run.executors import LocalExecutor
    from ragrade.run.records import WorkerContext
    from ragrade.run.setup import GridInput, grid_setup
    from ragrade.run.spec import build_sweep_config

    exam, qa = tmp_path / "exam.jsonl", tmp_path / "qa.jsonl"
    ids = [q.id for q in make_exam(exam, 8)]
    write_qa(
        qa, [QAItem(id=i, question="q?", reference="r", reference_context="r", chunk_id="c", doc_id="d") for i in ids]
    )
    cfg = build_sweep_config({"grid": {"llms": ["offline/student"], "retrievers": ["closed"], "icl": [0, 1]}})
    exe = LocalExecutor()

    def exam_setup(samples: bool, **extra: object) -> dict[str, Any]:
        settings = WorkerContext(answer=cfg.answer.model_dump(mode="json"), samples=samples)
        return grid_setup(
            "exam-sweep", GridInput("exam", exam, ids), cfg, settings=settings, executor=exe, fingerprint_extra=extra
        ).provenance

    assert digest(exam_setup(True)) == digest(exam_setup(False))  # recording samples changes no answer
    assert exam_setup(True)["recorded"]["samples"] is True  # it is recorded, not depended on
    adaptive = exam_setup(True, kind="adaptive")
    assert adaptive["settings"] == {**exam_setup(False)["settings"], "kind": "adaptive"}
    setups = [
        grid_setup("exam-sweep", GridInput("exam", exam, ids), cfg, executor=exe),
        grid_setup("qa-answer", GridInput("qa", qa, ids), cfg, executor=exe, digest_prompts=False),
    ]
    for s, source in zip(setups, ("exam", "qa"), strict=True):
        assert s.pool and s.items == [i for i in ids if i not in s.pool]  # one ICL hold-out for every runner
        path = dict(s.context).get(source)
        assert s.context["icl_pool"] == s.pool and path == str(tmp_path.resolve() / f"{source}.jsonl")
        m = s.manifest
        assert m["pipelines"] == s.order and m["llm_labels"] == {"offline/student": "offline/student"}
        assert m[source]["n_questions"] == 8 and m[source]["n_evaluated"] == len(s.items)
        prov = s.provenance
        assert prov["inputs"][source] == m["inputs"][source]["sha256"] and prov["items"] == s.items
        assert m["provenance"] == prov  # the manifest records what the answers depend on
    assert all("_prompt_digest" in spec for spec in setups[0].journal_specs.values())
    assert setups[1].journal_specs == setups[1].worker_specs
