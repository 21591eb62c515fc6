"""The documentation site builds without a warning, and its own pages make a clean corpus (no markup left in the
chunks, no exam question written from placeholder text)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_site_builds_strict_with_generated_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "ragrade exam take" in cli and "--max-failed" in cli
    config = (site / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert "pause_max_sd" in config and "[llm_options]" in config
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "take_exam" in api and "Let every pipeline of a grid take the exam" in api  # a docstring, rendered


# -- the site's own pages as a corpus -------------------------------------------------------------------------

_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)
_INLINE = re.compile(r"`[^`\n]+`")
MARKUP = {
    "link": re.compile(r"\]\("),
    "reference link": re.compile(r"\]\["),
    "image": re.compile(r"!\["),
    "emphasis": re.compile(r"\*\*|__\w"),
    "HTML tag": re.compile(r"</?[a-zA-Z][\w-]*(?:\s[^>]*)?>"),
    "table rule": re.compile(r"^\s*\|?\s*:?-{3,}:?\s*\|", re.M),
    "admonition": re.compile(r"^\s*(?:!!!|\?\?\?)", re.M),
    "snippet": re.compile(r"-+8<-+"),
    "mkdocstrings": re.compile(r"^\s*:::", re.M),
    "macro": re.compile(r"\{\{|\{%"),
    "attribute list": re.compile(r"\{:"),
    "footnote": re.compile(r"\[\^"),
}
# words the pages use as stand-ins for a value the reader supplies (PATH alone is the environment variable)
PLACEHOLDER = re.compile(
    r"\b(?:NAME|SHARE|K|N|M|DIR|CONFIG|MODEL|FILE|ANSWERS|SCORES|RUN_DIR|INDEX|VERB|PROVIDER|LABEL|METRIC)\b"
    r"|/PATH\b|\.\.\.|<[a-z ]+>|\bmy-model\b|\bTODO\b|\blorem\b",
)


def markup_left(text: str) -> dict[str, int]:
    """Markup found in a chunk's prose (code blocks and inline code, which keep their text, left aside)."""
    prose = _INLINE.sub("", _FENCE.sub("", text))
    return {kind: n for kind, rx in MARKUP.items() if (n := len(rx.findall(prose)))}


def test_markup_check_finds_markup() -> None:
    page = "See [the guide](guide.md) and **this**.\n\n| a | b |\n| --- | --- |\n\n```text\n[kept](x)\n```\n"
    assert markup_left(page) == {"link": 1, "emphasis": 2, "table rule": 1}
    assert PLACEHOLDER.search("--max-failed SHARE") and not PLACEHOLDER.search("--max-failed 0.1")


@pytest.mark.slow
def test_own_pages_load_as_a_clean_corpus(tmp_path: Path) -> None:
    import ragrade as rg

    docs = rg.load_corpus([DOCS], out=tmp_path / "docs.jsonl")
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert len(docs) == len(pages)
    titles = {d.metadata["path"]: d.metadata.get("title") for d in docs}
    assert titles["how-to/resume.md"] == "Resume and interrupt"  # the nav's title in mkdocs.yml
    chunks = rg.chunk(docs, strategy="recursive", size=200, overlap=20)
    left = {c.id: found for c in chunks if (found := markup_left(c.text))}
    assert not left, left
    index = rg.build_index(chunks, tmp_path / "idx")
    questions = rg.generate_exam(index, tmp_path / "exam.jsonl", n=200, seed=0)
    assert len(questions) >= 40
    from_placeholders = [(q.question, q.choices) for q in questions if any(map(PLACEHOLDER.search, q.choices))]
    assert not from_placeholders, from_placeholders
