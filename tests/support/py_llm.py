"""The ``py`` LLM provider of the tests: ``py/package.module:factory`` is the object ``factory()`` returns.

Test fakes (tests/run/fakes.py, tests/qa/qa_fakes.py, ...) are plain Python objects with the LLM
methods; this provider hands them to the pipelines through the ordinary LLM registry. It is not
part of ragrade: tests/conftest.py names this module in ``$RAGRADE_PLUGINS``, which the registry
imports on its first lookup (in worker processes too, which inherit the environment).
"""

from __future__ import annotations

from typing import Any

from ragrade.registry import register
from ragrade.run.executors import resolve_callable


@register("llm", "py")
def make_py_llm(model: str, **_options: Any) -> Any:
    """The LLM object built by the factory ``model`` names (``package.module:function``)."""
    return resolve_callable(model)()
