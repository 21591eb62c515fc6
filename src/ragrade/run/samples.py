"""``samples.jsonl``: what an exam run sent to the LLM and what came back, one line per request.

Each line (after the versioned header) holds the pipeline, the item id, the LLM, the method and the
exact request: for log-likelihood scoring the context and the continuations scored, for letter
generation the chat messages with the generation settings; and the raw reply: the summed
log-probabilities, token counts, how they were obtained (``ll_source``) and the prompt tokens, or the
reply text, its finish reason and token usage; ``error`` when the request failed.

The exam worker attaches a sample to each row under :data:`SAMPLE_KEY`; the runner takes it off before
the row is journaled and appends it here first (:class:`SampleLog`), so every journaled row has its
line even when the run is killed in between (a re-asked row simply adds a later line). When the run
finishes, :func:`compact` rewrites the file with exactly one line per row of ``responses.parquet``
(the latest), in the same order. A torn last line (a run ended at once) is dropped on resume.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ragrade.errors import DataError
from ragrade.io import HEADER_KEY, drop_torn_tail, dumps_line, header_record, loads_line
from ragrade.run.records import Sample
from ragrade.storage import writing

SAMPLES_FILE = "samples.jsonl"
SAMPLES_KIND = "exam_samples"
SAMPLES_VERSION = 1
SAMPLE_KEY = "_sample"  # the key a worker puts a row's sample under (never journaled)


class SampleLog:
    """Appends samples to ``samples.jsonl`` (header first when new; a torn last line is dropped on open)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with writing(self.path):
            drop_torn_tail(self.path)
            if not self.path.exists() or self.path.stat().st_size == 0:
                head = dumps_line(header_record(SAMPLES_KIND, SAMPLES_VERSION)) + "\n"
                self.path.write_text(head, encoding="utf-8")
                return
        _check_header(self.path)

    def append(self, samples: Sequence[Mapping[str, object]]) -> None:
        """Append ``samples`` durably (before their rows are journaled)."""
        if not samples:
            return
        data = "".join(dumps_line(s) + "\n" for s in samples).encode("utf-8")
        with writing(self.path), self.path.open("ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())


def _check_header(path: Path) -> None:
    with path.open("rb") as fh:
        first = fh.readline().decode("utf-8", "replace")
    head = loads_line(first, f"{path}:1") if first.strip() else {}
    kind = (head.get(HEADER_KEY) or {}).get("kind") if isinstance(head, dict) else None
    if kind != SAMPLES_KIND:
        raise DataError(f"{path}: not a samples file (kind {kind!r}); use $overwrite or another $out")


def _key(pipeline: object, item: object) -> tuple[str, str]:
    return str(pipeline), str(item)


_PREFIX = re.compile(rb'^\{"pipeline":("(?:[^"\\]|\\.)*"),"item_id":("(?:[^"\\]|\\.)*")')


def _line_key(raw: bytes, where: str) -> tuple[str, str] | None:
    """``(pipeline, item)`` of a sample line: read from its first two fields (written first), else parsed."""
    m = _PREFIX.match(raw)
    if m:
        return _key(json.loads(m.group(1)), json.loads(m.group(2)))
    rec = loads_line(raw.decode("utf-8"), where)
    if isinstance(rec, dict) and "pipeline" in rec and "item_id" in rec:
        return _key(rec["pipeline"], rec["item_id"])
    return None


def _last_lines(path: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """``(pipeline, item) -> (offset, length)`` of the last line of each sample (the header skipped)."""
    where: dict[tuple[str, str], tuple[int, int]] = {}
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno > 1 and raw.strip():
                key = _line_key(raw, f"{path}:{lineno}")
                if key is not None:
                    where[key] = (offset, len(raw))
            offset += len(raw)
    return where


def compact(path: str | Path, rows: Sequence[Mapping[str, object]], meta: Mapping[str, object] | None = None) -> int:
    """Rewrite ``path`` with the latest sample of each row of ``rows``, in their order; returns the lines kept.

    Rows without a sample (external answers, failed retrievals, rows journaled by a run with
    ``--no-samples``) are counted in the header as ``rows_without_sample``. The new file is streamed
    to a temporary file beside it and renamed over it (a large run's samples never sit in memory).
    """
    path = Path(path)
    if not path.exists():
        return 0
    drop_torn_tail(path)
    where = _last_lines(path)
    keys = [_key(r.get("pipeline"), r.get("item_id", r.get("question_id"))) for r in rows]
    kept = [where[k] for k in keys if k in where]
    counts = {"rows": len(rows), "rows_without_sample": len(rows) - len(kept)}
    head = header_record(SAMPLES_KIND, SAMPLES_VERSION, {**dict(meta or {}), **counts})
    tmp = path.with_name(f".{path.name}.compact.tmp")
    try:
        with writing(path), path.open("rb") as src, tmp.open("wb") as dst:
            dst.write(dumps_line(head).encode("utf-8") + b"\n")
            for offset, length in kept:
                src.seek(offset)
                line = src.read(length)
                dst.write(line if line.endswith(b"\n") else line + b"\n")
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return len(kept)


def take_samples(rows: Sequence[dict[str, object]]) -> list[Sample]:
    """Remove the samples the worker attached to ``rows`` (in place) and return them."""
    out: list[Sample] = []
    for row in rows:
        sample = row.pop(SAMPLE_KEY, None)
        if isinstance(sample, dict):  # what answer.py's *_sample functions attach
            out.append(sample)
    return out


__all__ = ["SAMPLES_FILE", "SAMPLES_KIND", "SAMPLES_VERSION", "SAMPLE_KEY", "SampleLog", "compact", "take_samples"]
