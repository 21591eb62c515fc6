"""Run manifests: what was run, with which components, seeds, inputs and software.

Every stage that writes a run directory (exam sweeps, free-text QA, robustness
testbeds, IRT fits, reports) records a ``manifest.json`` built by
:func:`build_manifest` and closed by :func:`finish_manifest`. The layout is::

    {
      "version": 1,
      "kind": "exam-sweep",
      "config": {...},                 # the full, merged configuration
      "llm_options": {...},            # how the run reached its LLMs (ragrade.llm.options.LLMOptions, all fields)
      "components": {"llm:offline/student": {...describe()...}, ...},
      "seeds": {"icl": 0, ...},
      "inputs": {...},                 # every input path with its size and sha256
      "exam": {"path": "...", ...},    # when an exam was taken
      "indexes": {"recursive-200": "path/to/index", ...},
      "software": {"python": ..., "platform": ..., "packages": {...}, "git": {...}},
      "started": "2025-...Z", "finished": "2025-...Z" | null,
      "status": "running" | "complete" | "incomplete: 3 failed requests missing, rerun to retry" | ...,
      "missing": 3                     # failed requests (missing answers) of a finished run
    }

Nothing here fails because of the environment: a missing package, no git
checkout or no ``git`` binary all just leave the field ``null``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from ragrade.io import JSONValue, now_iso, read_json, write_json

MANIFEST_VERSION = 1
MANIFEST_FILE = "manifest.json"


class GitInfo(TypedDict):
    """The git checkout a run came from."""

    revision: str
    root: str | None
    dirty: bool | None


class FileFingerprint(TypedDict, total=False):
    """What a manifest records of an input file or folder (``missing`` when it does not exist)."""

    path: str
    bytes: int
    sha256: str  # a file up to the hashing limit
    listing_sha256: str  # a folder: its file names, sizes and modification times
    missing: bool


# distributions reported when installed; torch & co. only when already imported (importing them is slow)
_ALWAYS = ("ragrade", "numpy", "scipy", "pandas", "pyarrow", "pydantic", "typer")
_IF_IMPORTED = {
    "torch": "torch",
    "transformers": "transformers",
    "sentence_transformers": "sentence-transformers",
    "bm25s": "bm25s",
    "faiss": "faiss-cpu",
    "onnxruntime": "onnxruntime",
    "openai": "openai",
    "httpx": "httpx",
    "ray": "ray",
    "girth": "girth",
    "bert_score": "bert-score",
    "usearch": "usearch",
    "chromadb": "chromadb",
}


def package_versions() -> dict[str, str | None]:
    """Versions of ragrade's main dependencies (heavy ones only when imported in this process)."""
    out: dict[str, str | None] = {}
    names = list(_ALWAYS) + [dist for mod, dist in _IF_IMPORTED.items() if mod in sys.modules]
    for dist in names:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    if out.get("ragrade") is None:
        from ragrade._version import __version__

        out["ragrade"] = __version__
    return out


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip()


def git_info(path: str | Path | None = None) -> GitInfo | None:
    """Revision and dirty flag of the git checkout holding ``path`` (or the cwd, then the package); None if none."""
    candidates: list[Path] = []
    if path is not None:
        candidates.append(Path(path))
    candidates.append(Path.cwd())
    candidates.append(Path(__file__).resolve().parent)
    for where in candidates:
        if not where.is_dir():
            continue
        rev = _git(["rev-parse", "HEAD"], where)
        if not rev:
            continue
        root = _git(["rev-parse", "--show-toplevel"], where)
        status = _git(["status", "--porcelain", "--untracked-files=no"], where)
        return {"revision": rev, "root": root, "dirty": bool(status) if status is not None else None}
    return None


def software_info() -> dict[str, object]:
    """Python, platform, package versions and git revision."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        "git": git_info(),
    }


def file_fingerprint(path: str | Path, *, max_hash_bytes: int = 256 * 1024 * 1024) -> FileFingerprint:
    """Path, size and sha256 of a file (or of a directory's file list, sizes and hashes)."""
    p = Path(path)
    info: FileFingerprint = {"path": str(p)}
    if p.is_file():
        info["bytes"] = p.stat().st_size
        if info["bytes"] <= max_hash_bytes:
            h = hashlib.sha256()
            with p.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            info["sha256"] = h.hexdigest()
    elif p.is_dir():
        h = hashlib.sha256()
        total = 0
        for f in sorted(x for x in p.rglob("*") if x.is_file()):
            size = f.stat().st_size
            total += size
            h.update(f"{f.relative_to(p)}\0{size}\0{int(f.stat().st_mtime)}\n".encode())
        info["bytes"] = total
        info["listing_sha256"] = h.hexdigest()
    else:
        info["missing"] = True
    return info


def _jsonable(value: object) -> JSONValue:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "model_dump"):
        return _jsonable(value.model_dump(mode="json"))
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        listed: JSONValue = value.tolist()
        return listed
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def llm_options_record(config: object) -> dict[str, object] | None:
    """The :class:`~ragrade.llm.options.LLMOptions` of a run's config (its ``llm_options``, or a job's ``llm``),
    every field with its value, as JSON; None when the config holds none."""
    from pydantic import ValidationError

    from ragrade.llm.options import LLMOptions

    def get(name: str) -> object:
        return config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)

    for name in ("llm_options", "llm"):
        value = get(name)
        if isinstance(value, LLMOptions):
            return value.model_dump(mode="json")
        if name == "llm_options" and isinstance(value, Mapping):
            try:
                return LLMOptions.model_validate(value).model_dump(mode="json")
            except ValidationError:  # the manifest must not fail the run
                return None
    return None


def build_manifest(
    kind: str,
    config: object,
    components: Mapping[str, object] | None = None,
    seeds: Mapping[str, object] | None = None,
    inputs: Mapping[str, object] | None = None,
    *,
    exam: str | Path | Mapping[str, object] | None = None,
    indexes: Mapping[str, str | Path] | None = None,
    extra: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """A new manifest for a run of ``kind`` (status ``running``; call :func:`finish_manifest` at the end).

    ``config`` may be a pydantic model or a mapping; ``components`` maps a
    component label to its ``describe()`` output; ``inputs`` maps a label to a
    path (fingerprinted when it exists) or any JSON value. ``exam`` is the exam
    path (or a mapping with ``path``), recorded under ``manifest["exam"]``;
    ``indexes`` maps a chunker/index label to its directory, recorded under
    ``manifest["indexes"]``. Both are also taken from ``inputs["exam"]`` /
    ``inputs["indexes"]`` when not given explicitly.
    """
    inputs = dict(inputs or {})
    given_exam, given_indexes = inputs.get("exam"), inputs.get("indexes")
    if exam is None and given_exam is not None:
        exam = given_exam if isinstance(given_exam, Mapping) else str(given_exam)
    if indexes is None and isinstance(given_indexes, Mapping):
        indexes = given_indexes
    fingerprints: dict[str, object] = {}
    for label, value in inputs.items():
        if isinstance(value, (str, Path)) and Path(value).exists():
            fingerprints[label] = file_fingerprint(value)
        else:
            fingerprints[label] = _jsonable(value)
    manifest: dict[str, Any] = {
        "version": MANIFEST_VERSION,
        "kind": kind,
        "config": _jsonable(config) if config is not None else {},
        **({"llm_options": options} if (options := llm_options_record(config)) is not None else {}),
        "components": _jsonable(components or {}),
        "seeds": _jsonable(seeds or {}),
        "inputs": fingerprints,
        "software": software_info(),
        "started": now_iso(),
        "finished": None,
        "status": "running",
    }
    if exam is not None:
        exam_info: dict[str, object] = dict(exam) if isinstance(exam, Mapping) else {"path": str(exam)}
        given_path = exam_info.get("path")
        exam_path = str(Path(str(given_path)).resolve()) if given_path else None
        exam_info["path"] = exam_path
        if exam_path and Path(exam_path).is_file():
            exam_info.setdefault("sha256", file_fingerprint(exam_path).get("sha256"))
        manifest["exam"] = _jsonable(exam_info)
    if indexes is not None:
        manifest["indexes"] = {str(k): str(Path(v).resolve()) for k, v in indexes.items()}
    if extra:
        manifest.update({str(k): _jsonable(v) for k, v in extra.items()})
    return manifest


MISSING_COUNTS = ("n_errors", "n_failed", "n_failed_requests")  # counts of failed requests (missing answers)


def missing_status(missing: int) -> str:
    """The status of a finished run with ``missing`` failed requests: ``complete`` only when none failed."""
    if missing <= 0:
        return "complete"
    return f"incomplete: {missing} failed request{'s' if missing != 1 else ''} missing, rerun to retry"


def finish_manifest(
    manifest: dict[str, object], *, status: str = "complete", missing: int | None = None, **counts: int
) -> dict[str, object]:
    """Stamp the end time and status (plus any ``counts``, e.g. ``n_errors=3``) on ``manifest``; returns it.

    ``missing`` (default: the sum of the ``n_errors`` / ``n_failed`` / ``n_failed_requests`` counts) is the
    number of failed requests, whose answers are missing: it is written beside the status, and a ``complete``
    run with missing answers gets the status ``incomplete: N failed requests missing, rerun to retry``.
    """
    manifest["finished"] = now_iso()
    if missing is None and any(k in counts for k in MISSING_COUNTS):
        missing = sum(int(counts.get(k) or 0) for k in MISSING_COUNTS)
    if missing is not None:
        manifest["missing"] = int(missing)
        if status == "complete":
            status = missing_status(int(missing))
    manifest["status"] = status
    if counts:
        recorded = manifest.setdefault("counts", {})
        if isinstance(recorded, dict):
            recorded.update({k: _jsonable(v) for k, v in counts.items()})
    return manifest


def write_manifest(run_dir: str | Path, manifest: Mapping[str, object]) -> Path:
    """Write ``manifest.json`` in ``run_dir`` atomically; returns its path."""
    path = Path(run_dir) / MANIFEST_FILE
    write_json(path, manifest)
    return path


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    """Read ``manifest.json`` from ``run_dir`` (or a manifest file path); DataError when missing or malformed."""
    p = Path(run_dir)
    path = p if p.is_file() else p / MANIFEST_FILE
    data = read_json(path)
    if not isinstance(data, dict):
        from ragrade.errors import DataError

        raise DataError(f"{path}: a manifest must be a JSON object")
    return data


__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_VERSION",
    "MISSING_COUNTS",
    "build_manifest",
    "file_fingerprint",
    "finish_manifest",
    "git_info",
    "missing_status",
    "package_versions",
    "read_manifest",
    "software_info",
    "write_manifest",
]
