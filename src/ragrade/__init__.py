"""ragrade: tell which RAG pipeline to trust on your own documents, and why.

The Python API (:mod:`ragrade.api`) is exported here and loaded on first use, so ``import ragrade``
stays light (no pandas, torch or numpy until a function runs)::

    import ragrade as rg

    docs = rg.load_corpus(demo=True, demo_limit=40)
"""

from __future__ import annotations

from ragrade._version import __version__
from ragrade.errors import BackendError, ConfigError, DataError, MissingDependency, RagradeError

TYPE_CHECKING = False  # not `typing`'s: importing typing would double the time `import ragrade` takes
if TYPE_CHECKING:
    from typing import Any

    from ragrade.api import (
        RunData,
        answer_qa,
        build_index,
        build_testbeds,
        cache_info,
        calibrate_judge,
        chunk,
        clear_cache,
        compare_pipelines,
        demo,
        evaluate_retrieval,
        exam_stats,
        fit_irt,
        generate_exam,
        generate_qa,
        improve_exam,
        judge_answers,
        load_corpus,
        open_assistant,
        open_run,
        plan_adaptive,
        plan_job,
        probe_llm,
        render_report,
        robust_table,
        run_job,
        run_testbed,
        search_index,
        take_exam,
        take_exam_adaptive,
        write_label_page,
    )


__all__ = [
    "BackendError",
    "ConfigError",
    "DataError",
    "MissingDependency",
    "RagradeError",
    "RunData",
    "__version__",
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
#: the names of the API, imported from :mod:`ragrade.api` on first use (all but the ones defined above)
_API = frozenset(__all__).difference(globals())


def __getattr__(name: str) -> Any:
    """The API's names, imported from :mod:`ragrade.api` on first use."""
    if name in _API:
        from ragrade import api

        return getattr(api, name)
    raise AttributeError(f"module 'ragrade' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
