"""The Python API: the CLI's verbs as functions, for notebooks and scripts.

Every verb of the command line is one function here (``ragrade corpus``: :func:`load_corpus`, ``index``:
:func:`build_index`, ``exam take``: :func:`take_exam`, ``compare``: :func:`compare_pipelines`, ...): the
verb parses its flags, calls the function and prints what it returns, so a run made here reads exactly like
one made on the command line: same files, same defaults, same errors
(:class:`~ragrade.errors.RagradeError` subclasses). Each returns a typed result (see
:mod:`ragrade.api.types`): the documents, chunks, index or questions as before, with what the verb prints
(a summary, statistics, a funnel) as attributes.
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
from ragrade.api.compare import compare_pipelines
from ragrade.api.corpus import build_index, chunk, load_corpus
from ragrade.api.exam import answer_qa, exam_stats, generate_exam, plan_adaptive, take_exam, take_exam_adaptive
from ragrade.api.irt import fit_irt, improve_exam
from ragrade.api.job import demo, plan_job, run_job
from ragrade.api.judge import calibrate_judge, judge_answers, write_label_page
from ragrade.api.llm import cache_info, clear_cache, probe_llm
from ragrade.api.qa import generate_qa
from ragrade.api.report import render_report
from ragrade.api.retrieval import evaluate_retrieval, open_assistant, search_index
from ragrade.api.robust import build_testbeds, robust_table, run_testbed
from ragrade.results import RunData, open_run

__all__ = [
    "RunData",
    "answer_qa",
    "build_index",
    "build_testbeds",
    "cache_info",
    "calibrate_judge",
    "chunk",
    "clear_cache",
    "compare_pipelines",
    "demo",
    "evaluate_retrieval",
    "exam_stats",
    "fit_irt",
    "generate_exam",
    "generate_qa",
    "improve_exam",
    "judge_answers",
    "load_corpus",
    "open_assistant",
    "open_run",
    "plan_adaptive",
    "plan_job",
    "probe_llm",
    "render_report",
    "robust_table",
    "run_job",
    "run_testbed",
    "search_index",
    "take_exam",
    "take_exam_adaptive",
    "write_label_page",
]
