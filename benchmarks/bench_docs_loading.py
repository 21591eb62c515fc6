"""Documentation as it is written: MkDocs Material and Sphinx sources loaded as their readers see them.

Loads the two documentation sites written for ragrade's tests (tests/data/docsites/: "tern", a
MkDocs Material site with tabs, admonitions, snippets, autorefs, annotations, front matter, nav
titles, a page without ``#``, ``:::`` pages, macros and theme overrides; "heron", Sphinx docs with
include, literalinclude, autodoc, ``.``/``~`` role targets and toctree titles), chunks them and prints:

* markup left in chunks (MkDocs/Sphinx syntax that the built site does not show), target 0;
* included files missing without a warning (an include/snippet whose text is absent from its page
  and that no warning names), target 0;
* pages whose title is wrong (against the titles the sites show), target 0;
* code fences split although they fit in one chunk, target 0 (at two chunk sizes);

then what the load summary counts (left out, warnings). The baseline, measured in the same run, is the
markup in the source pages as written (what loading them as plain text would leave). Exit status 1
when a target is missed.

    .venv/bin/python benchmarks/bench_docs_loading.py [--sizes 60,200]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.load import LoadReport, load_corpus
from ragrade.corpus.structure import parse_structure
from ragrade.corpus.tokens import get_counter
from ragrade.corpus.types import Chunk, Document

SITES = Path(__file__).resolve().parents[1] / "tests" / "data" / "docsites"

# the titles the built sites show for each page (nav / toctree labels, front matter, headings, file names)
TITLES = {
    "tern": {
        "index.md": "Home",
        "install.md": "Installing Tern",
        "errors.md": "Validation errors",
        "guide/queue.md": "Queues",
        "guide/workers.md": "Worker pools",
        "guide/scheduling.md": "scheduling",
        "guide/options.md": "Queue options",
        "reference/client.md": "Client module",
        "changelog.md": "Changelog",
    },
    "heron": {
        "index.rst": "Heron",
        "start.rst": "Getting started",
        "changes.rst": "Release notes",
        "license.rst": "License",
        "retries.rst": "Retrying requests",
    },
}
# (page, words of the included file that must reach the page or None for a file that is missing, file name)
INCLUDED = {
    "tern": [
        ("install.md", 'python -m pip install "tern>=2.4"', "install.sh"),
        ("guide/queue.md", "raises `QueueFull`", "limits.md"),
        ("guide/queue.md", "The default limit is one thousand jobs.", "limits.md"),
        ("changelog.md", "Workers retry a failed job", "CHANGELOG.md"),
        ("changelog.md", None, "RELEASING.md"),
    ],
    "heron": [
        ("start.rst", "Send the same request twice", "send.py"),
        ("changes.rst", "follows redirects by default", "CHANGES.rst"),
        ("license.rst", "Permission is granted", "LICENSE.txt"),
        ("changes.rst", None, "AUTHORS.rst"),
    ],
}

_CODE_BODY = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
PROSE_MARKUP = {
    "tab or admonition": re.compile(r"^[ \t]*(?:===|!!!|\?\?\?)[+!]?[ \t]", re.M),
    "autoref": re.compile(r"\]\["),
    "snippet": re.compile(r"-+8<-+"),
    "mkdocstrings": re.compile(r"^[ \t]*:::[ \t]+\w", re.M),
    "YAML options": re.compile(r"^[ \t]*(?:options|handler|members|show_\w+):", re.M),
    "macro": re.compile(r"\{\{|\{%|\{#"),
    "reST directive": re.compile(r"^[ \t]*\.\.[ \t]+[\w:.-]+::", re.M),
    "attribute list": re.compile(r"\{:?[ \t]*(?:[#.][\w-]|[\w-]+=|data-[\w-]+[ \t]*\})|\{:[ \t]"),
    "icon shortcode": re.compile(r":(?:material|octicons|fontawesome|simple)-[\w-]+:"),
    "footnote": re.compile(r"\[\^[^\]\n]+\]"),
    "substitution": re.compile(r"\|(?:release|version|today)\|"),
}
INLINE_MARKUP = {
    "reST role": re.compile(r":[\w:.-]+:`"),
    "inlinehilite prefix": re.compile(r"`(?:#!|:::)[\w+-]+ "),
    "definition list": re.compile(r"^[ \t]*:[ \t]+\S", re.M),
}  # checked before inline code is taken out
_BARE_REF_RE = re.compile(r":ref:`([\w-]+)`")  # a reference to a label without a title of its own
CODE_MARKUP = {
    "annotation marker": re.compile(r"(?:#|//)[ \t]*\(\d+\)!?[ \t]*$", re.M),
    "fence attributes": re.compile(r"^[ \t]*`{3,}[^\n`]*[{=]", re.M),
    "role target": re.compile(r"`[.~!][A-Za-z_]"),
}


def markup_left(text: str) -> dict[str, int]:
    """Occurrences of source markup in a chunk's text, by kind (code bodies are checked only for code markup)."""
    outside = _CODE_BODY.sub("", text)
    prose = _INLINE_CODE.sub("", outside)
    found = {kind: len(rx.findall(prose)) for kind, rx in PROSE_MARKUP.items()}
    found.update({kind: len(rx.findall(outside)) for kind, rx in INLINE_MARKUP.items()})
    found.update({kind: len(rx.findall(text)) for kind, rx in CODE_MARKUP.items()})
    return {k: v for k, v in found.items() if v}


def source_labels(site: str) -> set[str]:
    """The labels a site's reST sources refer to without a title (the built page shows the section's title)."""
    return {m for p in (SITES / site / "docs").rglob("*.rst") for m in _BARE_REF_RE.findall(p.read_text("utf-8"))}


def labels_shown(text: str, labels: set[str]) -> int:
    """Label ids shown in prose, where the built page shows the section's title."""
    prose = _INLINE_CODE.sub("", _CODE_BODY.sub("", text))
    return sum(len(re.findall(rf"(?<![\w-]){re.escape(label)}(?![\w-])", prose)) for label in labels)


def docs_by_page(report: LoadReport) -> dict[str, Document]:
    return {str(d.metadata["path"]): d for d in report.documents}


def missing_without_warning(site: str, report: LoadReport) -> list[str]:
    docs = docs_by_page(report)
    notes = " ".join(note for _, note in report.warnings)
    out = []
    for page, words, name in INCLUDED[site]:
        doc = docs.get(page)
        present = words is not None and doc is not None and words in doc.text
        if not present and name not in notes:
            out.append(f"{page}: {name}")
    return out


def wrong_titles(site: str, report: LoadReport) -> list[str]:
    docs = docs_by_page(report)
    out = []
    for page, title in TITLES[site].items():
        got = docs[page].metadata.get("title") if page in docs else "(page not loaded)"
        if got != title:
            out.append(f"{page}: {got!r} (expected {title!r})")
    return out


def split_fences(docs: list[Document], size: int) -> tuple[int, int]:
    """(code blocks that fit in ``size`` tokens, of them split across chunks)."""
    chunker = create_chunker("recursive", size=size, overlap=min(20, size // 4))
    counter = get_counter()
    fitting = split = 0
    for doc in docs:
        chunks: list[Chunk] = chunker.chunk(doc)
        for block in parse_structure(doc.text).code:
            if counter.count(doc.text[block.start : block.end]) > size:
                continue
            fitting += 1
            if not any(c.start <= block.start and block.end <= c.end for c in chunks):
                split += 1
    return fitting, split


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="60,200", help="chunk sizes (tokens) for the fence check")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    totals = {"markup": 0, "missing": 0, "titles": 0, "split": 0}
    for site in ("tern", "heron"):
        t0 = time.perf_counter()
        report = load_corpus([SITES / site / "docs"])
        seconds = time.perf_counter() - t0
        summary = report.summary()
        print(f"== {site}: {summary['documents']} pages loaded in {seconds:.2f}s; left out {summary['left_out']}")
        for where, note in report.warnings:
            print(f"   warning: {Path(where).name}: {note}")
        source = sum(
            sum(markup_left(p.read_text(encoding="utf-8")).values())
            for p in sorted((SITES / site / "docs").rglob("*"))
            if p.suffix in (".md", ".rst")
        )
        print(f"   baseline: markup in the source pages as written: {source}")
        leaks: dict[str, int] = {}
        chunks = 0
        labels = source_labels(site)
        for size in sizes:
            chunker = create_chunker("recursive", size=size, overlap=min(20, size // 4))
            for doc in report.documents:
                for chunk in chunker.chunk(doc):
                    chunks += 1
                    found = markup_left(chunk.text)
                    heading_path = chunk.metadata.get("heading_path")
                    path = markup_left(" > ".join(map(str, heading_path)) if isinstance(heading_path, list) else "")
                    found.update({f"{k} (heading path)": v for k, v in path.items()})
                    if labels_shown(chunk.text, labels):
                        found[":ref: label id"] = labels_shown(chunk.text, labels)
                    for kind, n in found.items():
                        leaks[kind] = leaks.get(kind, 0) + n
        missing = missing_without_warning(site, report)
        titles = wrong_titles(site, report)
        print(f"   markup left in {chunks} chunks: {sum(leaks.values())} {leaks or ''}")
        print(f"   included files missing without a warning: {len(missing)} {missing or ''}")
        print(f"   pages whose title is wrong: {len(titles)} of {len(TITLES[site])} {titles or ''}")
        for size in sizes:
            fitting, split = split_fences(report.documents, size)
            print(f"   code fences split when they fit (size {size}): {split} of {fitting}")
            totals["split"] += split
        totals["markup"] += sum(leaks.values())
        totals["missing"] += len(missing)
        totals["titles"] += len(titles)
    print(
        f"TOTAL markup left {totals['markup']}, missing without warning {totals['missing']}, "
        f"wrong titles {totals['titles']}, fences split {totals['split']} (targets 0, 0, 0, 0)"
    )
    return 0 if not any(totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
