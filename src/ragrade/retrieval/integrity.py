"""An index's component files, recorded when it is built and verified when it is opened.

A run used to find a damaged index when its first search loaded the BM25 files, after its folder, journal
and manifest were written. :func:`component_files` lists every file of the index's components (``bm25/``,
``dense/``) with its size, which the build records in the index manifest under ``files``;
:func:`verify_components` checks, when the index is opened (before any run folder exists), that each is
there with that size. A cheap check (one ``stat`` per file): a deleted, cut-off or half-copied file is
found; a file changed in place to the same size is left to the reader that parses it. An index built
before sizes were recorded is checked for the files every such index has.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ragrade.errors import DataError

#: the folders of an index that hold its components (chunks.jsonl and manifest.json are read in full anyway)
COMPONENTS = ("bm25", "dense")
#: files every BM25 folder has (for indexes built before sizes were recorded)
BM25_FILES = (
    "bm25_config.json",
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
    "params.index.json",
    "vocab.index.json",
    "vocab.tokenizer.json",
)
REBUILD = "rebuild it with `ragrade index`"


def component_files(folder: str | Path) -> dict[str, int]:
    """``{relative path: size in bytes}`` of every file under the index's component folders, sorted."""
    root = Path(folder)
    out: dict[str, int] = {}
    for part in COMPONENTS:
        base = root / part
        if base.is_dir():
            for f in sorted(base.rglob("*")):
                if f.is_file():
                    out[f.relative_to(root).as_posix()] = f.stat().st_size
    return out


def _expected(manifest: Mapping[str, object]) -> dict[str, int | None]:
    """What the manifest says the folder holds: the recorded sizes, or for an older index the names it must
    have (size unknown)."""
    files = manifest.get("files")
    if isinstance(files, Mapping):
        return {str(k): int(v) if isinstance(v, int) else None for k, v in files.items()}
    out: dict[str, int | None] = {f"bm25/{name}": None for name in BM25_FILES}
    store = manifest.get("store")
    backend = store.get("backend", "exact") if isinstance(store, Mapping) else "exact"
    if manifest.get("embedder") and backend == "exact":
        out["dense/vectors.npy"] = None
    return out


def verify_components(folder: str | Path, manifest: Mapping[str, object]) -> None:
    """DataError naming the first component file of the index in ``folder`` that is missing or not of the size
    its build recorded (see the module)."""
    root = Path(folder)
    problems: list[str] = []
    for rel, size in _expected(manifest).items():
        path = root / rel
        try:
            got = path.stat().st_size
        except FileNotFoundError:
            problems.append(f"{rel} is missing")
            continue
        except OSError as exc:
            problems.append(f"{rel} cannot be read ({exc.strerror or exc})")
            continue
        if size is not None and got != size:
            problems.append(f"{rel} has {got:,} bytes, its build wrote {size:,}")
    if problems:
        _explain(root, manifest, problems[0].split(" ", 1)[0])
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        part = problems[0].split("/", 1)[0]
        what = {"bm25": "BM25", "dense": "dense vector"}.get(part, part)
        raise DataError(f"{root}: damaged {what} index: {problems[0]}{more}; {REBUILD}")


def _explain(root: Path, manifest: Mapping[str, object], rel: str) -> None:
    """The reader's own, more precise error for a damaged file it can read (a vectors file that holds too few
    rows or the wrong dimension says so); nothing for a file that is missing or that no reader checks."""
    embedder, counts = manifest.get("embedder"), manifest.get("counts")
    if rel != "dense/vectors.npy" or not (root / rel).is_file() or not isinstance(embedder, Mapping):
        return
    from ragrade.retrieval.store import load_vectors

    rows = counts.get("chunks") if isinstance(counts, Mapping) else None
    load_vectors(root / rel, int(str(embedder.get("dim"))), rows if isinstance(rows, int) else None)


__all__ = ["BM25_FILES", "COMPONENTS", "component_files", "verify_components"]
