"""Lazy imports of heavy optional dependencies, with an install hint when missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from ragrade.errors import MissingDependency


def require(
    module: str, *, package: str | None = None, extra: str | None = None, purpose: str | None = None
) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependency` naming the package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        root = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] != root:
            raise
        raise MissingDependency(package or root, extra=extra, purpose=purpose) from exc
