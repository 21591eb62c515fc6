"""The Python API: the CLI's verbs as functions, for notebooks and scripts.

Each function calls the same stage functions and settings objects as its
verb (``ragrade corpus``, ``chunk``, ``index``, ``exam generate``, ``exam take``,
``qa answer``, ``irt fit``, ``robust build``/``robust run``, ``judge``, ``report``, ``run``), so a
run made here reads exactly like one made on the command line: same files,
same defaults, same errors (:class:`~ragrade.errors.RagradeError` subclasses).
Settings are keyword arguments named as the fields of the verb's settings object
(a list where the flag takes a comma list), over that object when given as ``config=``.

``import ragrade`` stays light: this module is loaded on first use of one of
its names, and it imports each stage (torch, pandas, ...) only when called::

    import ragrade as rg

    docs = rg.load_corpus(demo=True, demo_limit=40)
    chunks = rg.chunk(docs, size=200)
    index = rg.build_index(chunks, "work/index", dense=False)
    rg.generate_exam(chunks, "work/exam.jsonl", n=20)
    result = rg.take_exam("work/exam.jsonl", "work/run", indexes={"rec": index}, retrievers=["closed", "bm25"])
    result.summary                        # a pandas DataFrame
    rg.fit_irt("work/run", model="2pl")
    rg.render_report("work/run")
"""

from __future__ import annotations

from ragrade.api._common import PathLike as PathLike  # the path type of the signatures
from ragrade.api.corpus import build_index, chunk, load_corpus
from ragrade.api.exam import answer_qa, generate_exam, take_exam
from ragrade.api.irt import fit_irt
from ragrade.api.job import demo, run_job
from ragrade.api.judge import calibrate_judge, judge_answers
from ragrade.api.report import render_report
from ragrade.api.retrieval import evaluate_retrieval, open_assistant
from ragrade.api.robust import build_testbeds, run_testbed
from ragrade.results import RunData, open_run

__all__ = [
    "RunData",
    "answer_qa",
    "build_index",
    "build_testbeds",
    "calibrate_judge",
    "chunk",
    "demo",
    "evaluate_retrieval",
    "fit_irt",
    "generate_exam",
    "judge_answers",
    "load_corpus",
    "open_assistant",
    "open_run",
    "render_report",
    "run_job",
    "run_testbed",
    "take_exam",
]
