"""A registry of components by kind, with did-you-mean errors.

Components register a factory under a kind (``chunker``, ``retriever``,
``embedder``, ``llm``, ``testbed``, ``judge``, ...) and a name that equals the
CLI string. ``create(kind, name, **kwargs)`` builds one; an unknown name gets a
:class:`~ragrade.errors.ConfigError` listing the valid choices and the closest
match. Modules named in ``$RAGRADE_PLUGINS`` (comma-separated) are imported on the
first lookup too, so that one's own components register the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ragrade.errors import ConfigError, did_you_mean

F = TypeVar("F", bound=Callable[..., object])

_REGISTRY: dict[str, dict[str, Callable[..., object]]] = {}
# modules imported on first lookup of a kind, so that registration happens lazily
_PROVIDERS: dict[str, list[str]] = {
    "chunker": ["ragrade.corpus.chunk", "ragrade.corpus.semantic"],
    "retriever": ["ragrade.retrieval"],
    "embedder": ["ragrade.embedding.embed"],
    "vector_store": ["ragrade.retrieval.store"],
    "llm": ["ragrade.llm"],
    "testbed": ["ragrade.robust"],
    "judge": ["ragrade.judge"],
    "exam_generator": ["ragrade.exam.generate"],
    # one module per query transform / passage post-processor (a new one is one file and one line here)
    "query_transform": [
        "ragrade.retrieval.transforms",
        "ragrade.retrieval.query_hyde",
        "ragrade.retrieval.query_multi",
        "ragrade.retrieval.query_rm3",
    ],
    "post_processor": [
        "ragrade.retrieval.transforms",
        "ragrade.retrieval.post_rerank",
        "ragrade.retrieval.post_llm_rerank",
        "ragrade.retrieval.post_mmr",
        "ragrade.retrieval.post_threshold",
        "ragrade.retrieval.post_compress",
        "ragrade.retrieval.post_llm_compress",
    ],
}
_loaded: set[str] = set()
PLUGINS_ENV = "RAGRADE_PLUGINS"  # modules of the user's own components, imported on first lookup


def register(kind: str, name: str) -> Callable[[F], F]:
    """Decorator registering ``factory`` as component ``name`` of ``kind``."""

    def deco(factory: F) -> F:
        table = _REGISTRY.setdefault(kind, {})
        if name in table and table[name] is not factory:
            raise ValueError(f"{kind} '{name}' is registered twice")
        table[name] = factory
        return factory

    return deco


def _load(kind: str) -> None:
    if kind in _loaded:
        return
    _loaded.add(kind)
    import importlib

    for module in _PROVIDERS.get(kind, []):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:  # a stage not present in this build
            if exc.name != module and not module.startswith(str(exc.name)):
                raise
    _load_plugins()


def _load_plugins() -> None:
    """Import the modules named in ``$RAGRADE_PLUGINS`` (comma-separated); they register their components.

    Read at every first lookup of a kind, so worker processes (which inherit the environment) see the
    same components. The current folder is searched first, as ``python -m`` does.
    """
    import importlib
    import os
    import sys

    modules = [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
    if modules and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(f"${PLUGINS_ENV}: cannot import '{module}' ({exc})") from exc
        except ConfigError:
            raise
        except Exception as exc:  # the plugin's own code failed at import (or registered a name twice)
            where = _plugin_line(exc)
            raise ConfigError(
                f"${PLUGINS_ENV}: importing '{module}' failed{where}: {type(exc).__name__}: {exc}"
            ) from exc


def _plugin_line(exc: BaseException) -> str:
    """`` at FILE:LINE`` of the innermost frame of ``exc`` outside ragrade (the plugin's own line), or ''."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/ragrade/" not in f.filename.replace("\\", "/")]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def names(kind: str) -> list[str]:
    """Sorted names registered for ``kind``."""
    _load(kind)
    return sorted(_REGISTRY.get(kind, {}))


def lookup(kind: str, name: str) -> Callable[..., Any]:
    """The factory registered as ``name`` of ``kind``, or a ConfigError with the choices."""
    _load(kind)
    table = _REGISTRY.get(kind, {})
    if name not in table:
        choices = sorted(table)
        raise ConfigError(
            f"unknown {kind} '{name}'; valid choices: {', '.join(choices) or '(none)'}." + did_you_mean(name, choices)
        )
    return table[name]


def create(kind: str, name: str, /, **kwargs: object) -> Any:
    """Build component ``name`` of ``kind`` with ``kwargs``."""
    return lookup(kind, name)(**kwargs)


__all__ = ["PLUGINS_ENV", "create", "did_you_mean", "lookup", "names", "register"]
