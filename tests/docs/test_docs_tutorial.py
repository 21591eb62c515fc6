"""The tutorial runs as written: every command of its ``bash`` blocks, in order, offline, and each shows the
output its page says (numbers aside, since the corpus is the site itself); the run it makes has the columns the
files reference names."""

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
    """A line with its numbers masked and its spaces removed (columns pad to their widest number): what stays when
    the corpus changes."""
    return re.sub(r"\s+", "", re.sub(r"\d+(?:[.,]\d+)*", "#", line))


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
