"""A run folder's manifest says how the run ended, at every exit.

A grid run writes ``manifest.json`` with status ``running`` once its journal accepted the run, and
``complete`` (or ``incomplete: N failed requests missing``) when it finishes. :func:`recorded_exit` wraps the
rest of the run so that every other way out is written down too:

* an interruption (Ctrl-C, SIGTERM): ``partial: interrupted after N of M rows; rerun the same command to
  finish``, or ``interrupted: stopped before the first of M rows finished; rerun the same command`` (with the
  partial files of :func:`ragrade.run.partial.write_partial` where the run has them);
* a second signal, which ends the process at once: ``partial: stopped at once by a second signal (N of M done
  (rows)); rerun the same command to finish``, written before the process ends;
* an error: ``failed: ErrorType: message``, with the time under ``failed``.

Only a manifest this command wrote is changed: a command refused before it wrote one (another run's folder,
another provenance) leaves the folder as it found it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ragrade import interrupt
from ragrade.io import now_iso
from ragrade.run.manifest import MANIFEST_FILE, write_manifest
from ragrade.run.partial import mark_interrupted, write_partial
from ragrade.run.store import JOURNAL_FILE, Journal

Stamp = tuple[int, int, int] | None


def _stamp(path: Path) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@contextmanager
def recorded_exit(
    run_dir: str | Path,
    manifest: dict[str, object],
    order: Sequence[str],
    items: Sequence[str],
    *,
    files: bool = True,
    of: int | None = None,
) -> Iterator[None]:
    """Write how the run ended into ``manifest`` (see the module docstring) when the block is left by an
    interruption or an error, once this command wrote the manifest. ``files``: an interruption writes the
    partial responses and summaries over the journaled rows of pipelines ``order`` x ``items``; otherwise only
    the status, counting the journal's rows out of ``of`` (None: the run asks a part of the grid)."""
    run_dir = Path(run_dir)
    path = run_dir / MANIFEST_FILE
    before = _stamp(path)

    def ours() -> bool:
        now = _stamp(path)
        return now is not None and now != before

    def forced() -> None:
        if ours():
            where = interrupt.where()
            write_status(run_dir, manifest, "partial: stopped at once by a second signal" + (
                f" ({where})" if where else ""
            ) + "; rerun the same command to finish")  # fmt: skip

    with interrupt.on_forced_exit(forced):
        try:
            yield
        except BaseException as exc:
            stopped = isinstance(exc, interrupt.Interrupted | KeyboardInterrupt) or interrupt.requested()
            if not ours():
                raise
            if not stopped:
                write_status(run_dir, manifest, f"failed: {type(exc).__name__}: {exc}"[:500], failed=now_iso())
            elif manifest.get("status") == "running":  # not yet written down by the runner itself
                if files:
                    write_partial(run_dir, manifest, order, items)
                else:
                    mark_interrupted(run_dir, manifest, _journaled(run_dir), of)
            raise


def write_status(run_dir: Path, manifest: dict[str, object], status: str, **extra: object) -> None:
    """Write ``manifest`` with ``status`` (not finished) and ``extra`` entries; a failure to write is ignored
    (what ended the run is what the command reports)."""
    manifest["status"] = status
    manifest["finished"] = None
    manifest.update(extra)
    try:
        write_manifest(run_dir, manifest)
    except Exception:  # the run's own error (or the interruption) is what is reported
        return


def _journaled(run_dir: Path) -> int:
    """Finished rows in the run's journal (0 when it cannot be read)."""
    if not (run_dir / JOURNAL_FILE).is_file():
        return 0
    try:
        with Journal(run_dir / JOURNAL_FILE) as journal:
            return journal.count() + journal.count_failed()  # a failed request's row is a row, missing
    except Exception:  # a status without a count is still true
        return 0


__all__ = ["recorded_exit", "write_status"]
