"""Versioned JSONL/JSON files, written atomically.

Every JSONL file ragrade writes starts with one header line::

    {"ragrade": {"kind": "documents", "version": 1, "created": "...", "package_version": "..."}}

followed by one record per line. Readers accept files with or without the
header (so users can bring their own JSONL) and report malformed lines with
``file:line``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragrade.errors import DataError

HEADER_KEY = "ragrade"


@dataclass(frozen=True)
class Header:
    """The header line of a ragrade JSONL file."""

    kind: str
    version: int
    meta: dict[str, Any] = field(default_factory=dict)


def _package_version() -> str:
    from ragrade import __version__

    return __version__


def now_iso() -> str:
    """The current UTC time as an ISO 8601 string."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically (credentials in URLs masked: :mod:`ragrade.redact`)."""
    from ragrade.redact import redact

    atomic_write_text(path, json.dumps(redact(obj), indent=2, ensure_ascii=False, default=_default) + "\n")


def read_json(path: str | Path) -> Any:
    """Read a JSON file, with a DataError naming the file when it is malformed or missing."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataError(f"{path}: file not found") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc


def _default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def dumps_line(record: Mapping[str, Any]) -> str:
    """One compact JSON line (no trailing newline), deterministic for equal input."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_default)


def header_record(kind: str, version: int, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The header line's record for a file of ``kind``."""
    head: dict[str, Any] = {"kind": kind, "version": version, "package_version": _package_version()}
    if meta:
        from ragrade.redact import redact

        head.update(redact(dict(meta)))
    return {HEADER_KEY: head}


def write_jsonl(
    path: str | Path,
    records: Iterable[Mapping[str, Any]],
    *,
    kind: str,
    version: int = 1,
    meta: Mapping[str, Any] | None = None,
) -> int:
    """Write a header and ``records`` to ``path`` atomically; returns the record count.

    The header holds no timestamp unless ``meta`` adds one, so equal input gives
    a byte-identical file.
    """
    lines = [dumps_line(header_record(kind, version, meta))]
    n = 0
    for rec in records:
        lines.append(dumps_line(rec))
        n += 1
    atomic_write_text(path, "\n".join(lines) + "\n")
    return n


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` for every non-empty line, header included.

    Raises DataError with ``file:line`` on a line that is not a JSON object.
    """
    path = Path(path)
    try:
        fh = path.open("r", encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError(f"{path}: file not found") from exc
    with fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
            if not isinstance(rec, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
            yield lineno, rec


def read_jsonl(path: str | Path, *, kind: str | None = None) -> tuple[Header | None, list[dict[str, Any]]]:
    """Read a JSONL file; returns its header (or None) and its records.

    When ``kind`` is given and the file has a header of another kind, raises DataError.
    """
    header: Header | None = None
    records: list[dict[str, Any]] = []
    for lineno, rec in iter_jsonl(path):
        if lineno == 1 or (header is None and not records):
            head = rec.get(HEADER_KEY) if len(rec) == 1 else None
            if isinstance(head, dict) and "kind" in head:
                meta = {k: v for k, v in head.items() if k not in ("kind", "version")}
                header = Header(kind=str(head["kind"]), version=int(head.get("version", 1)), meta=meta)
                if kind is not None and header.kind != kind:
                    raise DataError(f"{path}: expected a '{kind}' file, found a '{header.kind}' file")
                continue
        records.append(rec)
    return header, records


__all__ = [
    "HEADER_KEY",
    "Header",
    "atomic_write_bytes",
    "atomic_write_text",
    "dumps_line",
    "header_record",
    "iter_jsonl",
    "now_iso",
    "read_json",
    "read_jsonl",
    "write_json",
    "write_jsonl",
]
