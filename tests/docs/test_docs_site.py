"""The documentation site builds without a warning, its tutorial runs as written, and its own pages make a clean
corpus (no markup left in the chunks, no exam question written from placeholder text)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
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


# -- the tutorial ---------------------------------------------------------------------------------------------


def tutorial_steps() -> list[tuple[list[str], list[str]]]:
    """Each ``bash`` block's commands and the ``text`` block shown after it (its expected output, or none)."""
    text = (DOCS / "tutorial.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```(\w+)\n(.*?)^```\n(?:\n(?=```))?", text, flags=re.M | re.S)
    steps: list[tuple[list[str], list[str]]] = []
    for i, (lang, body) in enumerate(blocks):
        if lang != "bash":
            continue
        commands = [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip()]
        after = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
        shown = after[1].splitlines() if after[0] == "text" and text.find(after[1]) > text.find(body) else []
        steps.append((commands, shown))
    return steps


def _shape(line: str) -> str:
    """A line with its numbers masked and its spaces collapsed: what stays when the corpus changes."""
    return " ".join(re.sub(r"\d+(?:[.,]\d+)*", "#", line).split())


@pytest.mark.slow
@pytest.mark.llamacpp
def test_tutorial_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    steps = tutorial_steps()
    assert len(steps) >= 5
    # the run's folder is elsewhere: the tests' plugin module ($RAGRADE_PLUGINS) is found from the repository
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "RAGRADE_PROGRESS": "off", "PYTHONPATH": path}
    for commands, shown in steps:
        output = ""
        for command in commands:
            argv = shlex.split(command.split(" #")[0])
            assert argv[0] == "ragrade", command
            proc = subprocess.run(
                [sys.executable, "-m", "ragrade", *argv[1:]],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                env=env,
                timeout=900,
            )
            assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
            output += proc.stdout + proc.stderr
        lines = {_shape(line) for line in output.splitlines()}
        expected = [_shape(line) for line in shown if "..." not in line and line.strip()]
        assert [line for line in expected if line not in lines] == [], (commands, output[-3000:])
    summary = (tmp_path / "work" / "run" / "summary.csv").read_text(encoding="utf-8").splitlines()
    assert len(summary) == 1 + 4  # two models x closed book and BM25
    # the files reference names the columns the run wrote
    import pyarrow.parquet as pq
    from scripts.docs.reference import file_columns

    columns = file_columns()
    assert summary[0].split(",") == columns["summary.csv (exam take)"]
    written = pq.read_schema(tmp_path / "work" / "run" / "responses.parquet").names
    assert set(written) <= set(columns["responses.parquet"])
    assert json.loads((tmp_path / "work" / "run" / "comparisons.json").read_text(encoding="utf-8"))
    assert (tmp_path / "work" / "report.html").stat().st_size > 10_000
