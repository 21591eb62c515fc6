"""ragrade: tell which RAG pipeline to trust on your own documents, and why."""

from __future__ import annotations

from ragrade.errors import BackendError, ConfigError, DataError, MissingDependency, RagradeError

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "ConfigError",
    "DataError",
    "MissingDependency",
    "RagradeError",
    "__version__",
]
