"""What the API functions that always returned a list or a dict return now: still that list or dict (the
documents, the chunks, the questions, the triplets, the judge summary, the testbed runs and files, the
calibration), with typed attributes for what the verb prints (a summary, statistics, a funnel) and, where LLM
requests can fail, :meth:`check` (the failed-requests threshold, see :mod:`ragrade.llm.failures`).
:class:`~ragrade.api.built_index.BuiltIndex` does the same for the index; the other functions return
dataclasses defined beside them (:class:`~ragrade.api.compare.PipelineComparison`, ...).

A function given ``check=False`` returns its result even when too many requests failed; the command line
prints the result, then calls ``result.check(max_failed)`` (exit 2/3), so that what was written is shown
first. Loaded only when a function runs (it imports the stages' types).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.corpus.types import Chunk, Document
from ragrade.exam.files import Question

if TYPE_CHECKING:
    from ragrade.llm.failures import FailureTally
    from ragrade.qa.files import QAItem
    from ragrade.robust.run import ModelRun

EXAM_RESUME = "rerun the same command: received questions come from the response cache, only failed requests are sent"
QA_RESUME = "rerun the same command: received answers come from the response cache, only failed requests are sent"


class LoadedCorpus(list[Document]):
    """The documents :func:`ragrade.api.load_corpus` loaded (a list), with its load summary."""

    def __init__(self, documents: list[Document], summary: dict[str, Any], out: Path | None) -> None:
        super().__init__(documents)
        #: documents, characters, formats, skipped files by reason, lines dropped, ... (written in the file's header)
        self.summary = summary
        #: the documents JSONL written, if any
        self.out = out


class ChunkedDocuments(list[Chunk]):
    """The chunks :func:`ragrade.api.chunk` made (a list), with the summary written in the file's header."""

    def __init__(self, chunks: list[Chunk], summary: dict[str, Any], out: Path | None) -> None:
        super().__init__(chunks)
        #: strategy, params, documents, chunks, token and character statistics, oversize chunks
        self.summary = summary
        #: the chunks JSONL written, if any
        self.out = out


class GeneratedExam(list[Question]):
    """The questions :func:`ragrade.api.generate_exam` kept (a list), with its funnel and generator."""

    def __init__(
        self,
        questions: list[Question],
        *,
        out: Path,
        funnel: dict[str, Any],
        generator: dict[str, Any],
        failures: FailureTally,
        notes: list[str] | None = None,
    ) -> None:
        super().__init__(questions)
        self.out = out
        #: notes on the exam (an offline exam's: its questions favour lexical retrieval)
        self.notes = notes or []
        #: candidates asked, kept and removed, by reason (``<stem>.funnel.json``)
        self.funnel = funnel
        #: which generator wrote the questions (its kind, model, prompt)
        self.generator = generator
        #: the generation requests, failed ones among them
        self.failures = failures

    def check(self, max_failed: float | None = None) -> None:
        """Raise (exit 2/3) when more generation requests failed than ``max_failed`` allows."""
        self.failures.check(EXAM_RESUME, max_failed, what="generation")


class GeneratedQA(list["QAItem"]):
    """The triplets :func:`ragrade.api.generate_qa` wrote (a list), with its funnel and generator."""

    def __init__(
        self,
        items: list[QAItem],
        *,
        out: Path,
        qrels: Path | None,
        generator: str,
        funnel: dict[str, Any],
        shortfall: str | None,
        failures: FailureTally,
    ) -> None:
        super().__init__(items)
        self.out = out
        #: the qrels view written, if asked for
        self.qrels = qrels
        #: the generator's name (``offline-extractive (baseline)`` or PROVIDER/MODEL)
        self.generator = generator
        #: chunks sampled, asked, failed, unparsed, rejected, ... (in the file's header)
        self.funnel = funnel
        #: why fewer triplets than asked for were written (None: as many as asked)
        self.shortfall = shortfall
        #: the generation requests, failed ones among them
        self.failures = failures

    def check(self, max_failed: float | None = None) -> None:
        """Raise (exit 2/3) when more generation requests failed than ``max_failed`` allows."""
        self.failures.check(QA_RESUME, max_failed, what="generation")


class JudgeSummary(dict[str, Any]):
    """The summary :func:`ragrade.api.judge_answers` wrote (``summary.json``, a dict), with its folder."""

    def __init__(self, summary: dict[str, Any], out: Path) -> None:
        super().__init__(summary)
        self.out = out

    def check(self, max_failed: float | None = None) -> None:
        """Raise (exit 2/3) when more judge requests failed than ``max_failed`` allows."""
        from ragrade.judge.run import check_judge_failures

        check_judge_failures(dict(self), max_failed)


class BuiltTestbeds(dict[str, str]):
    """The files :func:`ragrade.api.build_testbeds` wrote (``{name: path}``), with its build report."""

    def __init__(self, paths: dict[str, str], report: dict[str, Any]) -> None:
        super().__init__(paths)
        #: ``build_report.json``: questions used, records per testbed, questions dropped and why
        self.report = report


class Calibration(dict[str, Any]):
    """What :func:`ragrade.api.calibrate_judge` wrote (``calibration.json``'s content, a dict), with its folder."""

    def __init__(self, result: dict[str, Any], out: Path) -> None:
        super().__init__(result)
        self.out = out


class TestbedRuns(list["ModelRun"]):
    """The runs :func:`ragrade.api.run_testbed` made, one per model (a list)."""

    def check(self, max_failed: float | None = None) -> None:
        """Raise (exit 2/3) when more requests of a model on the testbed failed than ``max_failed`` allows."""
        from ragrade.llm.failures import resume_hint, robust_request_tally

        robust_request_tally(self).check(resume_hint(), max_failed, what="testbed")


@dataclass(frozen=True)
class AdaptivePlan:
    """What :func:`ragrade.api.plan_adaptive` says an adaptive run would ask, without asking anything."""

    #: pipelines in the grid
    pipelines: int
    #: questions an adaptive run may ask each pipeline
    questions: int
    #: requests of the full grid (every pipeline answering every question)
    full_grid_requests: int
    #: the most requests the run can send (reference pipelines answer everything; the budget caps it)
    upper_bound_requests: int
    #: requests a simulated run sent (abilities drawn N(0, 1): a rough guide)
    expected_requests: int
    #: rounds the simulated run took
    expected_rounds: int
    #: where the item parameters come from: ``file``, ``reference``, ``cold`` or ``sample``
    calibration: str
    #: pipelines that answer every question (to calibrate the items), in grid order
    reference_pipelines: tuple[str, ...]
    #: notes on the exam (an offline exam's); not part of :meth:`as_dict`
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The plan as the JSON output of ``ragrade --dry-run exam take --adaptive --json`` shows it (no notes)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "notes"}
        out["reference_pipelines"] = list(self.reference_pipelines)
        return out


__all__ = [
    "AdaptivePlan",
    "BuiltTestbeds",
    "Calibration",
    "ChunkedDocuments",
    "GeneratedExam",
    "GeneratedQA",
    "JudgeSummary",
    "LoadedCorpus",
    "TestbedRuns",
]
