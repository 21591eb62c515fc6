"""Documentation Markdown cleaned as Markdown; chunkers merge fragments under the minimum size."""

from __future__ import annotations

import pytest

from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.clean import clean_text
from ragrade.corpus.formats import read_markdown
from ragrade.corpus.roles import markdown_blocks
from ragrade.corpus.types import Document

PAGE = """# Install { #install }

!!! note "Before you start"
    Tern needs **Python 3.11**.

/// tip | Fast path
Use the [wheel](https://example.org/wheel).
///

```python
# start the worker
def start(limit):
    if limit:
        return  limit * 2
```

~~~
  # indented comment
~~~

## Configure {#configure .wide}

=== "Linux"
    Run `tern up`.

??? warning
    Careful with the cache.
"""


def test_markdown_keeps_code_verbatim_and_drops_markup() -> None:
    page = read_markdown(PAGE)
    text = clean_text(page.text)
    assert page.metadata["title"] == "Install"
    assert "# start the worker\ndef start(limit):\n    if limit:\n        return  limit * 2" in text
    assert "  # indented comment" in text
    for gone in ("{", "#install", "#configure", "!!!", "///", "???", "===", "](", "**"):
        assert gone not in text, gone
    kept_parts: tuple[str, ...] = (
        "# Install\n",
        "Before you start",
        "Fast path",
        "Use the wheel.",
        "## Configure\n",
        "Linux",
    )
    kept_parts += ("Warning",)
    for kept in kept_parts:
        assert kept in text, kept


def test_markdown_blocks_split_at_fences() -> None:
    blocks = markdown_blocks("a\n```\n# x\n```\nb\n````\nunclosed")
    assert blocks == [(False, "a"), (True, "```\n# x\n```"), (False, "b"), (True, "````\nunclosed")]


@pytest.mark.parametrize("strategy", ["recursive", "sentence", "token"])
def test_fragments_under_min_size_merge_into_a_neighbour(strategy: str) -> None:
    text = "Setup\n\n" + "The worker reads the queue and writes each record to the store in order. " * 6
    doc = Document(id="d", text=text.strip(), source="d.md")
    merged = create_chunker(strategy, size=40, overlap=0).chunk(doc)
    plain = create_chunker(strategy, size=40, overlap=0, min_size=0).chunk(doc)
    assert all(c.tokens >= 10 for c in merged), [c.tokens for c in merged]
    assert all(c.tokens <= 40 for c in merged)
    assert merged[0].text.startswith("Setup") and doc.text[merged[0].start : merged[0].end] == merged[0].text
    if strategy == "recursive":
        assert plain[0].text == "Setup"  # without merging, the heading is a chunk of its own
    assert merged[0].params["min_size"] == 10 and plain[0].params["min_size"] == 0


def test_chunking_progress_advances_in_steps() -> None:
    from ragrade.corpus.chunk import chunk_documents

    docs = [Document(id=f"d{i}", text=f"Document {i} says the queue holds {i} records.", source="") for i in range(100)]
    ticks: list[int] = []
    chunks = chunk_documents(docs, create_chunker("recursive", size=40, overlap=0), progress=ticks.append)
    assert sum(ticks) == 100 and len(ticks) >= 10 and len(chunks) == 100
