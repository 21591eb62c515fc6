"""Helpers of the kill -9 tests: read a run's journal from outside, kill a command after its first commits."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path


def committed(journal: Path) -> int:
    """Finished rows in ``journal`` (a ``journal.sqlite``), read-only; 0 while it does not exist yet."""
    if not journal.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=10.0) as db:
            return int(db.execute("SELECT COUNT(*) FROM results WHERE done").fetchone()[0])
    except sqlite3.OperationalError:  # created but no table yet
        return 0


def kill_after(cmd: list[str], env: dict[str, str], journal: Path, rows: int, deadline_s: float = 120.0) -> int:
    """Start ``cmd``, ``kill -9`` it once ``journal`` holds at least ``rows`` finished rows; the rows it then holds.

    AssertionError when the command ends (or the deadline passes) first: the kill must land mid-run.
    """
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + deadline_s
    try:
        while committed(journal) < rows:
            assert proc.poll() is None, (
                f"the command ended before the kill: {proc.stderr.read() if proc.stderr else ''!r}"
            )
            assert time.monotonic() < deadline, "no committed batch before the deadline"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, proc.returncode
    return committed(journal)


__all__ = ["committed", "kill_after"]
