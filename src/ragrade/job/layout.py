"""Where every stage of a job puts its files inside the run directory (the report reads the same paths).

::

    RUN/
      manifest.json            the job: config, software, stages, timings
      stages.json              per stage: config hash, status, summary (reuse + resume state)
      timings.json             wall time per stage of the last invocation
      corpus/docs.jsonl
      chunks/<label>.jsonl
      index/<label>/           ragrade index (chunks, bm25, dense vectors, manifest.json)
      exam/exam.jsonl          + exam.funnel.json, exam.rejected.jsonl
      sweep/                   manifest.json, responses.parquet, summary.csv, summary_by_tag.csv, comparisons.json
      adaptive/                an adaptive run of the sweep's grid (summary.csv with estimates, adaptive_rounds.jsonl,
                               comparison.json when it replayed the full sweep)
      irt/irt.json             main (hierarchical) fit + irt_*.csv tables
      irt/plan.json            which factors were fitted (not-applicable levels, confounded factors)
      irt/improve/             irt_improve.json, exam.improved.jsonl, irt.json
      robust/testbeds/         base.jsonl, counterfactual.jsonl, integration.jsonl, build_report.json
      robust/<testbed>/        results.jsonl, metrics.json, table.csv (one folder per model when several)
      judge/qa.jsonl, judge/answers/, judge/scores/   free-text answers and their judged scores
      report.html
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STAGES_FILE = "stages.json"
TIMINGS_FILE = "timings.json"
MANIFEST_FILE = "manifest.json"
REPORT_FILE = "report.html"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run directory."""

    root: Path

    @property
    def docs(self) -> Path:
        """The documents file."""
        return self.root / "corpus" / "docs.jsonl"

    def chunks(self, label: str) -> Path:
        """The chunks file of chunker ``label``."""
        return self.root / "chunks" / f"{label}.jsonl"

    def index(self, label: str) -> Path:
        """The index folder of chunker ``label``."""
        return self.root / "index" / label

    @property
    def exam(self) -> Path:
        """The exam file."""
        return self.root / "exam" / "exam.jsonl"

    @property
    def funnel(self) -> Path:
        """The exam's funnel sidecar."""
        return self.root / "exam" / "exam.funnel.json"

    @property
    def sweep(self) -> Path:
        """The sweep's run directory."""
        return self.root / "sweep"

    @property
    def irt(self) -> Path:
        """The IRT folder."""
        return self.root / "irt"

    @property
    def robust(self) -> Path:
        """The robustness folder."""
        return self.root / "robust"

    @property
    def testbeds(self) -> Path:
        """Where the testbeds built from the corpus go."""
        return self.root / "robust" / "testbeds"

    @property
    def judge(self) -> Path:
        """The free-text answers and judge folder."""
        return self.root / "judge"

    @property
    def report(self) -> Path:
        """The HTML report."""
        return self.root / REPORT_FILE

    def rel(self, path: Path) -> str:
        """``path`` relative to the run directory (as shown in the report)."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)


__all__ = ["MANIFEST_FILE", "REPORT_FILE", "STAGES_FILE", "TIMINGS_FILE", "RunLayout"]
