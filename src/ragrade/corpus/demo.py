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

``topics`` narrows the corpus to chosen modules or packages (``email``,
``xml.etree``, ``concurrent.futures``): a document is kept when its module is
one of them or inside one, and its ``topic`` is then the most specific chosen
name it falls under. A few related packages make a corpus in which retrieval
has to tell similar documents apart, and in which every topic holds enough
questions for per-topic accuracy to mean something; :data:`DEMO_TOPICS` is
such a set.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ragrade.corpus.clean import clean_text
from ragrade.corpus.load import LoadReport, make_doc_id
from ragrade.corpus.types import Document
from ragrade.errors import ConfigError, DataError
from ragrade.registry import did_you_mean

MIN_CHARS = 80
TIMEOUT_S = 300

#: the demo's default topics: the eight standard-library packages with the most documentation (each with
#: dozens of similar documents, so retrieval has to tell them apart and each topic gets many questions)
DEMO_TOPICS: tuple[str, ...] = ("asyncio", "email", "http", "importlib", "logging", "unittest", "urllib", "xml")


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


def build_demo_corpus(
    limit: int | None = None, *, topics: Sequence[str] | None = None, stats: DemoStats | None = None
) -> list[Document]:
    """Documents from the standard library's docstrings (see the module docstring).

    ``topics`` keeps the documents of those modules/packages only (an unknown
    name is a :class:`~ragrade.errors.ConfigError`). ``limit`` keeps that many
    documents, spread evenly over the topics (round-robin) and then sorted again.
    """
    stats = stats if stats is not None else DemoStats()
    chosen = _check_topics(topics) if topics is not None else None
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
        topic = modname.split(".")[0] if chosen is None else _topic_of(modname, chosen)
        if topic is None:
            continue
        source = f"python-stdlib:{modname}" + (f"#{qual[len(modname) + 1 :]}" if qual != modname else "")
        meta = {"topic": topic, "module": modname, "title": qual, "kind": kind, "format": "docstring"}
        docs.append(Document(id=make_doc_id(qual, text), text=text, source=source, metadata=meta))
    docs.sort(key=lambda d: (d.metadata["module"], d.metadata["title"]))
    if chosen is not None:
        empty = sorted(set(chosen) - {str(d.metadata["topic"]) for d in docs})
        if empty:
            raise DataError(f"demo topics without documents on this installation: {', '.join(empty)}")
    if limit is not None and limit < len(docs):
        docs = _spread(docs, max(limit, 0))
    return docs


def _check_topics(topics: Sequence[str]) -> list[str]:
    """The chosen topic names, checked against the scanned module names (did-you-mean on a typo)."""
    names = [str(t).strip() for t in topics if str(t).strip()]
    if not names:
        raise ConfigError("demo topics: give at least one module or package name")
    modules = list(_collect_in_child()["modules"])
    for name in names:
        if not any(m == name or m.startswith(name + ".") for m in modules):
            tops = sorted({m.split(".")[0] for m in modules} | set(modules))
            raise ConfigError(
                f"unknown demo topic '{name}': not a documented standard-library module." + did_you_mean(name, tops)
            )
    return sorted(set(names))


def _topic_of(module: str, chosen: Sequence[str]) -> str | None:
    """The most specific chosen name that ``module`` is or lies inside (None: not chosen)."""
    best: str | None = None
    for name in chosen:
        if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best)):
            best = name
    return best


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


def demo_load_report(
    limit: int | None = None, topics: Sequence[str] | None = None
) -> tuple[LoadReport, dict[str, Any]]:
    """The demo corpus as a load report (import failures as one warning) and the header record of its file."""
    stats = DemoStats()
    report = LoadReport(documents=build_demo_corpus(limit, topics=topics, stats=stats))
    report.formats["docstring"] = len(report.documents)
    if stats.import_failures:
        names = ", ".join(name for name, _ in stats.import_failures[:6])
        more = "" if len(stats.import_failures) <= 6 else ", ..."
        report.warnings.append(
            (
                "demo",
                f"{len(stats.import_failures)} standard-library modules could not "
                f"be imported on this platform and were left out ({names}{more})",
            )
        )
    header = {
        "modules": stats.modules,
        "import_failures": len(stats.import_failures),
        "limit": limit,
        "topics": list(topics) if topics is not None else None,
    }
    return report, header


__all__ = ["DEMO_TOPICS", "DemoStats", "build_demo_corpus", "demo_load_report"]
