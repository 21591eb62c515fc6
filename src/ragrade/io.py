"""Versioned JSONL/JSON files, written atomically.

Every JSONL file ragrade writes starts with one header line::

    {"ragrade": {"kind": "documents", "version": 1, "created": "...", "package_version": "..."}}

followed by one record per line. Readers accept files with or without the
header (so users can bring their own JSONL) and report malformed lines with
``file:line``.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeAlias

from ragrade.errors import DataError, open_error
from ragrade.storage import write_failure

HEADER_KEY = "ragrade"

JSONScalar: TypeAlias = str | int | float | bool | None
JSONValue: TypeAlias = JSONScalar | Sequence["JSONValue"] | Mapping[str, "JSONValue"]
"""Any value :func:`json.loads` returns (parsed input before it is validated: narrow with isinstance)."""
JSONObject: TypeAlias = dict[str, JSONValue]
"""A parsed JSON object."""


@dataclass(frozen=True)
class Header:
    """The header line of a ragrade JSONL file."""

    kind: str
    version: int
    meta: dict[str, object] = field(default_factory=dict)


def _package_version() -> str:
    from ragrade._version import __version__

    return __version__


def now_iso() -> str:
    """The current UTC time as an ISO 8601 string."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@functools.cache
def _umask() -> int:
    """The process's file-creation mask (read once, at the first write)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_output_file(path: str | Path) -> Path:
    """``path`` as a file to write: DataError when it is a folder or its folder cannot be made.

    Creates the missing parent folders (like ``mkdir -p``).
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: is a folder; give a file name to write")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise DataError(f"{path}: cannot create its folder, a file of that name exists ({exc.filename})") from exc
    except NotADirectoryError as exc:
        raise DataError(f"{path}: cannot create its folder, a part of the path is a file") from exc
    except OSError as exc:
        raise DataError(f"{path}: cannot create its folder ({exc.strerror or exc})") from exc
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename).

    The file gets the permissions a plain ``open()`` would give it (0666 less the umask),
    not the private 0600 of a temporary file. DataError when ``path`` cannot be written.
    """
    path = check_output_file(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_failure(exc, path) or DataError(f"{path}: cannot write here ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), 0o666 & ~_umask())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_failure(exc, path) or DataError(f"{path}: cannot write ({exc.strerror or exc})") from exc
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, obj: object) -> None:
    """Write ``obj`` as indented JSON, atomically (credentials in URLs masked: :mod:`ragrade.redact`)."""
    from ragrade.redact import redact

    atomic_write_text(path, json.dumps(redact(obj), indent=2, ensure_ascii=False, default=_default) + "\n")


def file_in_folder(path: str | Path, name: str, hint: str) -> Path:
    """``path`` itself when it is a file; ``path/name`` when it is a folder holding one (DataError otherwise)."""
    p = Path(path)
    if p.is_dir():
        cand = p / name
        if not cand.is_file():
            raise DataError(f"{p}: a directory without {name}; {hint}")
        return cand
    if not p.is_file():
        raise DataError(f"{p}: file not found")
    return p


def read_json(path: str | Path) -> Any:
    """Read a JSON file, with a DataError naming the file when it is malformed or missing."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise open_error(path, exc, DataError, "a JSON file") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start}); is it a binary file?") from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise DataError(f"{path}: JSON nested too deeply") from exc


def read_json_object(path: str | Path, what: str = "a JSON object") -> JSONObject:
    """Read a JSON file that must hold an object (DataError naming the file otherwise)."""
    obj: JSONValue = read_json(path)
    if not isinstance(obj, dict):
        raise DataError(f"{path}: expected {what}, got {type(obj).__name__}")
    return obj


def _default(obj: object) -> object:
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def loads_line(line: str, where: str) -> Any:
    """Parse one JSON value; DataError naming ``where`` when malformed or nested too deeply."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise DataError(f"{where}: JSON nested too deeply") from exc


def dumps_line(record: Mapping[str, object]) -> str:
    """One compact JSON line (no trailing newline), deterministic for equal input."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_default)


def header_record(kind: str, version: int, meta: Mapping[str, object] | None = None) -> dict[str, dict[str, object]]:
    """The header line's record for a file of ``kind``."""
    head: dict[str, object] = {"kind": kind, "version": version, "package_version": _package_version()}
    if meta:
        from ragrade.redact import redact

        head.update(redact(dict(meta)))
    return {HEADER_KEY: head}


def check_file_version(version: object, path: str | Path, kind: str, supported: int, fix: str) -> None:
    """DataError unless a file's ``version`` is a whole number from 1 to ``supported`` (a newer ragrade's file,
    or a version that is no number, says so, naming ``fix``: how to make one this ragrade reads)."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise DataError(f"{path}: the {kind} file's version must be a positive whole number, got {version!r}")
    if version > supported:
        raise DataError(
            f"{path}: {kind} file version {version} is newer than this ragrade supports ({supported}); "
            f"upgrade ragrade, or {fix}"
        )


def write_jsonl(
    path: str | Path,
    records: Iterable[Mapping[str, object]],
    *,
    kind: str,
    version: int = 1,
    meta: Mapping[str, object] | None = None,
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


def drop_torn_tail(path: str | Path) -> int:
    """Cut a torn last line (no final newline: the writer was killed mid-write) off an appended JSONL file.

    Returns the number of bytes dropped (0 when the file is missing, empty or ends with a newline). Files
    appended line by line (robustness results, exam samples) call this before reading and appending again.
    """
    path = Path(path)
    try:
        with path.open("rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return 0
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return 0
            keep = size
            while keep > 0:  # back to the end of the last whole line
                step = min(keep, 1 << 16)
                fh.seek(keep - step)
                cut = fh.read(step).rfind(b"\n")
                if cut >= 0:
                    keep = keep - step + cut + 1
                    break
                keep -= step
            fh.truncate(keep)
            return size - keep
    except FileNotFoundError:
        return 0


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` for every non-empty line, header included.

    Raises DataError with ``file:line`` on a line that is not a JSON object.
    """
    path = Path(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise open_error(path, exc, DataError, "a JSONL file") from exc
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not UTF-8 text (byte {exc.start}); is it a binary file?") from exc
            if not line.strip():
                continue
            rec = loads_line(line, f"{path}:{lineno}")
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
    "JSONObject",
    "JSONScalar",
    "JSONValue",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_output_file",
    "drop_torn_tail",
    "dumps_line",
    "file_in_folder",
    "header_record",
    "iter_jsonl",
    "loads_line",
    "now_iso",
    "read_json",
    "read_json_object",
    "read_jsonl",
    "write_json",
    "write_jsonl",
]
