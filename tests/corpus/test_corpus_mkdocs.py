"""MkDocs Material pages load as their authors see them: tabs, admonitions, autorefs, annotations, titles."""

from __future__ import annotations

import re

import pytest
from tests.corpus.helpers import check_invariants

from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.formats import read_markdown
from ragrade.corpus.load import LoadReport, load_corpus
from ragrade.corpus.mkdocs import drop_annotations, drop_autorefs, fence_language
from ragrade.corpus.structure import parse_structure
from ragrade.corpus.tokens import get_counter
from ragrade.corpus.types import Chunk, Document

# written for these tests: a small MkDocs Material site of an imaginary "tern" job queue
INSTALL = """---
title: Installing Tern
description: How to install the tern queue.
---

## Requirements

Tern needs CPython 3.11; the queue is [tern.Queue][] and workers are [worker objects][tern.worker.Worker].
See [the FAQ][faq] for platforms.

=== "pip"

    ```bash
    pip install tern
    ```

=== "uv"

    ```python {requires="3.12" upgrade="skip"}
    import tern  # (1)!

    queue = tern.Queue(limit=3)  # (2)
    ```

    1. Importing tern registers the default worker.
    2. The limit caps how many jobs wait at once.

    The uv tab keeps the lock file in step with the queue version.

After either tab, check the install with `tern --version`.

!!! note "Virtual environments"
    Install tern inside a virtual environment so the worker finds its plugins.

??? tip
    Collapsed tips stay text too.

## Upgrading

Upgrade with the same tool you installed with.

[faq]: https://example.org/faq
"""

ARGUMENTS = """## Positional arguments

Each job takes positional arguments in the order the worker function declares them.

### Defaults

Arguments left out take the defaults of [tern.Job.run][] and of [the job signature][tern.job.Signature].

## Keyword arguments

Keyword arguments are passed through unchanged, in the order the caller wrote them; a worker that
declares no such keyword fails the job with a clear error.
"""

QUEUE = """# Queues

A queue holds jobs until a worker takes them; see [`Queue`][tern.Queue] for the full API.

!!! warning "Shared queues"

    Two processes may share a queue.

    === "JavaScript"

        ```{ .js .annotate }
        const q = tern.connect("jobs"); // (1)!
        ```

        1. Connects to the queue named jobs.

    === "Python"

        ```python title="connect.py"
        q = tern.connect("jobs")  # (1)!
        ```

        1. The same connection from Python.

???+ note
    Queues are created on first use.

## Limits

A queue refuses jobs once its limit is reached.
"""

PAGES = {"install.md": INSTALL, "guide/arguments_type.md": ARGUMENTS, "guide/queue.md": QUEUE}

# MkDocs Material markup that must not survive loading
_LEAKS = re.compile(r"^\s*(?:===|!!!|\?\?\?)|\]\[|\(\d\)!|[#/] \(\d\)$|\{[^}]*(?:requires|\.annotate)", re.M)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> LoadReport:
    root = tmp_path_factory.mktemp("site") / "docs"
    for rel, text in PAGES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return load_corpus([root])


def _docs(report: LoadReport) -> dict[str, Document]:
    return {str(d.metadata["path"]): d for d in report.documents}


def _chunks(doc: Document, size: int = 120) -> list[Chunk]:
    chunker = create_chunker("recursive", size=size, overlap=0)
    chunks = chunker.chunk(doc)
    check_invariants(doc, chunks, chunker)
    return chunks


def _path_at(chunks: list[Chunk], words: str) -> list[str]:
    chunk = next(c for c in chunks if words in c.text)
    path = chunk.metadata["heading_path"]
    assert isinstance(path, list)
    return [str(p) for p in path]


def test_tab_group_renders_as_labelled_parts() -> None:
    text = read_markdown(INSTALL).text
    expected = (
        "pip:\n\n```bash\npip install tern\n```\n\n"
        "uv:\n\n```python\nimport tern\n\nqueue = tern.Queue(limit=3)\n```\n\n"
        "1. Importing tern registers the default worker.\n2. The limit caps how many jobs wait at once.\n\n"
        "The uv tab keeps the lock file in step with the queue version.\n\n"
        "After either tab, check the install with `tern --version`."
    )
    assert expected in text
    assert "````" not in text  # no four-backtick block around the whole group
    assert "Tern needs CPython 3.11; the queue is tern.Queue and workers are worker objects." in text
    assert "See the FAQ for platforms." in text and "https://" not in text  # a defined reference still works
    assert "Virtual environments\n\nInstall tern inside a virtual environment" in text
    assert "Tip\n\nCollapsed tips stay text too." in text


def test_no_material_markup_is_left(report: LoadReport) -> None:
    docs = _docs(report)
    assert set(docs) == set(PAGES)
    for rel, doc in docs.items():
        assert not _LEAKS.search(doc.text), (rel, _LEAKS.findall(doc.text))
        for chunk in _chunks(doc, size=40):
            assert not _LEAKS.search(chunk.text), (rel, chunk.text)
    queue = docs["guide/queue.md"].text
    assert "see `Queue` for the full API." in queue
    assert 'JavaScript:\n\n```js\nconst q = tern.connect("jobs");\n```\n\n1. Connects to the queue named jobs.' in queue
    assert 'Python:\n\n```python\nq = tern.connect("jobs")\n```\n\n1. The same connection from Python.' in queue
    assert "Note\n\nQueues are created on first use." in queue
    args = docs["guide/arguments_type.md"].text
    assert "the defaults of tern.Job.run and of the job signature." in args


@pytest.mark.parametrize("rel", sorted(PAGES))
def test_code_blocks_stay_whole_and_prose_stays_prose(report: LoadReport, rel: str) -> None:
    doc = _docs(report)[rel]
    struct = parse_structure(doc.text)
    counter = get_counter()
    chunks = _chunks(doc, size=60)
    for block in struct.code:
        assert block.closed and re.fullmatch(r"```[\w+-]*", block.opener), block.opener
        if counter.count(doc.text[block.start : block.end]) <= 60:
            assert any(c.start <= block.start and block.end <= c.end for c in chunks), block
    prose = [
        "The uv tab keeps the lock file",
        "After either tab",
        "1. Importing tern registers",
        "1. Connects to the queue",
        "Queues are created on first use.",
        "Keyword arguments are passed",
    ]
    for words in prose:
        at = doc.text.find(words)
        if at >= 0:
            assert struct.code_inside(at) is None, words


def test_titles_and_heading_paths(report: LoadReport) -> None:
    docs = _docs(report)
    install, args, queue = docs["install.md"], docs["guide/arguments_type.md"], docs["guide/queue.md"]
    assert install.metadata["title"] == "Installing Tern"  # front matter
    assert install.metadata["description"] == "How to install the tern queue."
    assert args.metadata["title"] == "arguments_type"  # no front matter, no `#`: the file name, as for text files
    assert queue.metadata["title"] == "Queues"  # the first level-1 heading
    install_chunks = _chunks(install, size=40)
    assert _path_at(install_chunks, "Tern needs CPython") == ["Installing Tern", "Requirements"]
    assert _path_at(install_chunks, "Upgrade with the same tool") == ["Installing Tern", "Upgrading"]
    args_chunks = _chunks(args, size=40)
    assert _path_at(args_chunks, "Each job takes") == ["arguments_type", "Positional arguments"]
    assert _path_at(args_chunks, "Arguments left out") == ["arguments_type", "Positional arguments", "Defaults"]
    assert _path_at(args_chunks, "Keyword arguments are") == ["arguments_type", "Keyword arguments"]
    queue_chunks = _chunks(queue, size=40)
    assert _path_at(queue_chunks, "A queue holds jobs") == ["Queues"]
    assert _path_at(queue_chunks, "refuses jobs") == ["Queues", "Limits"]


def test_a_second_level_heading_titles_a_page_only_when_it_heads_all_of_it() -> None:
    assert "title" not in read_markdown(ARGUMENTS).metadata  # two `##` sections: neither names the page
    assert read_markdown("## Overview\n\nText.\n\n### Detail\n\nMore.").metadata == {"title": "Overview"}
    assert read_markdown("## Intro\n\nText.\n\n# Real title\n\nMore.").metadata == {"title": "Real title"}
    assert read_markdown("Setext title\n============\n\n## Part\n").metadata == {"title": "Setext title"}


def test_tab_syntax_inside_code_and_tab_blocks() -> None:
    shown = '```markdown\n=== "pip"\n\n    pip install tern\n```'
    assert read_markdown(shown).text == shown  # documentation of the syntax stays code
    nested = '=== "Outer"\n\n    === "Inner"\n\n        inner text\n\n    outer text\n\nAfter.'
    assert read_markdown(nested).text == "Outer:\n\nInner:\n\ninner text\n\nouter text\n\nAfter."
    blocks = "/// tab | pip\nRun pip.\n///\n\n/// tab | uv\nRun uv.\n///"
    assert read_markdown(blocks).text == "pip:\n\nRun pip.\n\nuv:\n\nRun uv."


def test_autorefs_become_their_text() -> None:
    assert drop_autorefs("see [tern.Queue][] and [the worker][tern.worker.Worker].") == (
        "see tern.Queue and the worker."
    )
    assert drop_autorefs("[`Queue`][tern.Queue] and [`tern.Job`][]") == "`Queue` and `tern.Job`"
    assert drop_autorefs("code `[a][b.c]` stays; [two words][] stays") == "code `[a][b.c]` stays; [two words][] stays"
    assert read_markdown("Use [the queue][tern.Queue].\n\n[tern.Queue]: https://x.org/q").text == "Use the queue."


def test_annotation_markers_leave_code() -> None:
    code = "import tern  # (1)!\nq = f(1)  # (2)\nx = g(3) // (3)!\ny = 4; /* (4) */\n<!-- (5) -->\nz = h(1)"
    assert drop_annotations(code) == "import tern\nq = f(1)\nx = g(3)\ny = 4;\nz = h(1)"
    kept = 'print (1)\ns = "(1)"\nt = 2  # about (1)\n'
    assert drop_annotations(kept) == kept  # not a comment holding only a marker


@pytest.mark.parametrize(
    ("info", "lang"),
    [
        ('python {requires="3.12" upgrade="skip"}', "python"),
        ('python{requires="3.12"}', "python"),
        ("{ .js .annotate }", "js"),
        ("{.python}", "python"),
        ('py title="app.py" linenums="1"', "py"),
        ("{ #anchor }", ""),
        ("", ""),
    ],
)
def test_fence_language_drops_attributes(info: str, lang: str) -> None:
    assert fence_language(info) == lang
    fence = "`" * 3
    text = read_markdown(f"{fence}{info}\nx = 1\n{fence}").text
    assert text == f"{fence}{lang}\nx = 1\n{fence}"
