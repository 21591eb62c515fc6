"""A plugin that fails at import is one line naming the module and its line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BAD = {
    "raises_plugin": (
        'x = 1\nraise RuntimeError("no licence server")\n',
        r"raises_plugin.py:2: RuntimeError: no licence",
    ),
    "twice_plugin": (
        "from ragrade.registry import register\n\n\n@register('testbed', 'noise')\ndef make(**kw):\n    return None\n",
        r"twice_plugin.py:4: ValueError: testbed 'noise' is registered twice",
    ),
}


@pytest.mark.parametrize("module", sorted(BAD))
def test_a_failing_plugin_is_one_line(module: str, tmp_path: Path) -> None:
    source, expected = BAD[module]
    (tmp_path / f"{module}.py").write_text(source)
    (tmp_path / "base.jsonl").write_text('{"id": "a"}\n')
    env = {**os.environ, "RAGRADE_PLUGINS": module}
    args = ["robust", "run", "base.jsonl", "--testbed", "noise", "--llm", "offline/extractive", "--out", "o"]
    proc = subprocess.run(
        [sys.executable, "-m", "ragrade", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert f"$RAGRADE_PLUGINS: importing '{module}' failed at " in lines[0]
    import re

    assert re.search(expected, lines[0]), lines[0]
