"""A demo corpus that needs no download: the docstrings of the installed Python standard library.

One document per documented module, class (its docstring followed by those
of its public methods) and public function. Only standard-library modules
are read (names in ``sys.stdlib_module_names`` and their submodules, loaded
from the standard library's own folder); modules with side effects on import
(``antigravity``, ``this``, GUI toolkits, test suites, ``__main__`` modules,
...) are never imported, and a module that fails to import is skipped and
counted. The imports happen in a separate, isolated interpreter
(:mod:`ragrade.corpus._stdlib_docs`, run with ``python -I -S``), so the
result does not depend on what the calling process imported or patched, and
their side effects stay out of it. Documents are deterministic for one Python
installation, sorted by module and qualified name. Default values of
parameters that are not plain literals are shown as ``...`` (a default such as
``os.environ`` would otherwise copy the environment into the corpus).

Metadata: ``topic`` (top-level module, e.g. ``email`` for ``email.mime.text``),
``module``, ``title`` (qualified name), ``kind`` (module, class, function).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ragrade.corpus.clean import clean_text
from ragrade.corpus.load import make_doc_id
from ragrade.corpus.types import Document
from ragrade.errors import DataError

MIN_CHARS = 80
TIMEOUT_S = 300


@dataclass
class DemoStats:
    """What the demo build imported and skipped."""

    modules: int = 0
    import_failures: list[tuple[str, str]] = field(default_factory=list)
    short_or_duplicate: int = 0


@lru_cache(maxsize=1)
def _collect_in_child() -> dict[str, Any]:
    """The standard-library scan (cached per process: its result depends only on the installation)."""
    script = Path(__file__).with_name("_stdlib_docs.py")
    with tempfile.TemporaryDirectory(prefix="ragrade-demo-") as tmp:
        out = Path(tmp) / "stdlib.json"
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-S", str(script), str(out)],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                cwd=tmp,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DataError(f"cannot build the demo corpus: the standard-library scan failed ({exc})") from exc
        if proc.returncode != 0 or not out.exists():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise DataError(f"cannot build the demo corpus: the standard-library scan failed ({last})")
        data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def build_demo_corpus(limit: int | None = None, *, stats: DemoStats | None = None) -> list[Document]:
    """Documents from the standard library's docstrings (see the module docstring).

    ``limit`` keeps that many documents, spread evenly over the topics
    (round-robin over top-level modules) and then sorted again.
    """
    stats = stats if stats is not None else DemoStats()
    data = _collect_in_child()
    stats.modules = len(data["modules"])
    stats.import_failures = [(str(n), str(w)) for n, w in data["failures"]]
    docs: list[Document] = []
    seen: set[str] = set()
    for modname, qual, kind, raw in data["objects"]:
        text = clean_text(raw)
        if len(text) < MIN_CHARS or text in seen:
            stats.short_or_duplicate += 1
            continue
        seen.add(text)
        source = f"python-stdlib:{modname}" + (f"#{qual[len(modname) + 1 :]}" if qual != modname else "")
        meta = {"topic": modname.split(".")[0], "module": modname, "title": qual, "kind": kind, "format": "docstring"}
        docs.append(Document(id=make_doc_id(qual, text), text=text, source=source, metadata=meta))
    docs.sort(key=lambda d: (d.metadata["module"], d.metadata["title"]))
    if limit is not None and limit < len(docs):
        docs = _spread(docs, max(limit, 0))
    return docs


def _spread(docs: list[Document], limit: int) -> list[Document]:
    """``limit`` documents taken round-robin over topics (deterministic), in sorted order."""
    by_topic: dict[str, list[Document]] = {}
    for d in docs:
        by_topic.setdefault(str(d.metadata["topic"]), []).append(d)
    queues = [list(v) for _, v in sorted(by_topic.items())]
    picked: list[Document] = []
    depth = 0
    while len(picked) < limit:
        for q in queues:
            if depth < len(q) and len(picked) < limit:
                picked.append(q[depth])
        depth += 1
    picked.sort(key=lambda d: (d.metadata["module"], d.metadata["title"]))
    return picked


__all__ = ["DemoStats", "build_demo_corpus"]
