"""MkDocs hooks (``hooks:`` in mkdocs.yml): add the reference pages, written from the code at build time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # mkdocs loads this file by path: make `scripts.docs` importable
    sys.path.insert(0, str(ROOT))

from scripts.docs import reference  # noqa: E402


def on_files(files: Any, config: Any) -> Any:
    """Add every page of :data:`reference.PAGES` as a generated file (nothing is written under docs/)."""
    from mkdocs.structure.files import File

    for path, function in reference.PAGES.items():
        files.append(File.generated(config, path, content=getattr(reference, function)()))
    return files
