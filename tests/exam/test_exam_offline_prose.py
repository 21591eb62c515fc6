"""The offline cloze writer asks about prose only: no code blocks, headings, table rows or list markers."""

from __future__ import annotations

import re
from typing import Any

from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.formats import read_markdown
from ragrade.corpus.types import Chunk, Document
from ragrade.exam.offline import BLANK, ClozeGenerator, extract_terms
from ragrade.exam.text import prose_mask, split_sentences

PAGE = """# Tern guide

Tern was written by Ada Lovelace in March 2019 and ships with 12 plugins.

## Installing

Install it with `pip install tern` on Python 3.11 or later; the `--user` flag keeps it local.

```bash
# Install from PyPI in 2024
pip install tern==2.1 --user
export TERN_HOME=/opt/Tern
```

- The `tern_config` file sets 42 options for Windows users.
1. Run `tern.start()` to open Port 8080 for the Dashboard.

| Option | Default | Meaning |
|--------|---------|---------|
| Workers Count | 16 | Number of Worker Threads in 2023 |

## Tuning

The scheduler built by Grace Hopper runs 256 jobs per second since January 2020.
"""

PROSE = [
    "Tern was written by Ada Lovelace in March 2019 and ships with 12 plugins.",
    "Install it with `pip install tern` on Python 3.11 or later; the `--user` flag keeps it local.",
    "The `tern_config` file sets 42 options for Windows users.",
    "Run `tern.start()` to open Port 8080 for the Dashboard.",
    "The scheduler built by Grace Hopper runs 256 jobs per second since January 2020.",
]


def _page() -> str:
    return read_markdown(PAGE).text


def test_prose_mask_keeps_offsets_and_drops_non_prose() -> None:
    text = _page()
    masked = prose_mask(text)
    assert len(masked) == len(text)
    assert all(m == c or m == "\n" for m, c in zip(masked, text, strict=True))  # only blanked, never moved
    assert [text[a:b] for a, b in split_sentences(masked)] == PROSE
    # a chunk that continues a split code block: the code before the closing fence is not prose
    tail = "value_7 = compute(7)\n# not a heading either\n```\n\nThe worker stops after 30 seconds."
    assert [tail[a:b] for a, b in split_sentences(prose_mask(tail, in_code=True))] == [
        "The worker stops after 30 seconds."
    ]
    # underlined (setext) headings and rules, tildes fences
    other = "Setup Notes\n===========\n\n~~~\nDr. Who 1963\n~~~\n\n---\n\nPlain words stay."
    assert [other[a:b] for a, b in split_sentences(prose_mask(other))] == ["Plain words stay."]


def test_terms_come_from_prose_only() -> None:
    text = _page()
    terms = extract_terms(text)
    found = {t.text for t in terms}
    assert {"Ada Lovelace", "March 2019", "tern_config", "8080", "Grace Hopper", "January 2020"} <= found
    # facts that only appear in the code block, the table or a heading are never asked about
    assert not found & {"PyPI", "2024", "TERN_HOME", "2.1", "2023", "16", "Workers Count", "Worker Threads", "Tern"}
    for t in terms:
        assert text[t.sentence[0] : t.sentence[1]] in PROSE


def _chunks() -> list[Chunk]:
    doc = Document(id="tern", text=_page(), source="tern.md", metadata={"title": "Tern guide"})
    return create_chunker("recursive", size=40, overlap=0, min_size=0).chunk(doc)


def _filler(n: int) -> list[Chunk]:
    """Other pages with same-kind facts to draw distractors from."""
    people = ["Alan Turing", "Edsger Dijkstra", "Barbara Liskov", "Ken Thompson", "Donald Knuth", "Linus Torvalds"]
    months = ["April", "May", "June", "July", "August", "October"]
    out = []
    for i in range(n):
        text = (
            f"The parser designed by {people[i % 6]} in {months[i % 6]} {2000 + i} handles {100 + 7 * i} files. "
            f"Set `option_{i}` to reach {3000 + i} requests on Port {9000 + i}."
        )
        out.append(Chunk(id=f"f{i}", doc_id=f"f{i}", text=text, start=0, end=len(text), strategy="x"))
    return out


def test_cloze_stems_are_prose(hash_embedder: Any) -> None:
    chunks = _chunks()
    assert any("```" in c.text for c in chunks) and any(c.text.lstrip().startswith("#") for c in chunks)
    gen = ClozeGenerator(chunks + _filler(12), hash_embedder, seed=1)
    asked = []
    for seed in range(6):  # several seeds: different terms are picked
        gen.seed = seed
        for raw in gen.generate_many(chunks):
            if "failure" in raw:
                continue
            stem = raw["question"].split("? ", 1)[1]
            assert "```" not in stem and not stem.startswith("#") and "|" not in stem, stem
            assert BLANK in stem and f"`{BLANK}" not in stem and f"{BLANK}`" not in stem  # backticks go with it
            answer = raw["choices"][raw["answer"]]
            assert "`" not in answer and re.search(r"\w", answer)
            assert any(stem.replace(BLANK, answer) in s.replace("`" + answer + "`", answer) for s in PROSE), stem
            asked.append(answer)
    assert len(set(asked)) >= 4  # the page does yield questions, from several sentences


def test_chunk_inside_a_split_code_block_yields_no_question(hash_embedder: Any) -> None:
    code = "\n".join(f"Retries = {i}  # Ada Lovelace wrote it in May {1990 + i}" for i in range(30))
    text = f"# Tern\n\n## Setup\n\nRun the worker.\n\n```python\n{code}\n```"
    doc = Document(id="d", text=text, source="mem", metadata={"title": "Tern"})
    inner = [c for c in create_chunker("recursive", size=60, overlap=0).chunk(doc) if "fence_open" in c.metadata]
    assert inner
    gen = ClozeGenerator(inner + _filler(12), hash_embedder)
    assert all(raw == {"failure": "no_key_term"} for raw in gen.generate_many(inner))
