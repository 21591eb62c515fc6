"""What a result depends on, and the one rule that decides what a rerun may do with a folder's results.

Every runner that writes per-item results (``exam take`` and its adaptive run, ``qa answer``, ``robust run``,
``judge``, each stage of ``ragrade run``) describes its results as a :class:`Provenance`:

``inputs``
    every input by content: ``{name: digest}`` (the exam or QA file, each index by its chunks and build settings,
    the testbed data, prompt files, a calibration or labels file);
``models``
    each model's identity: ``{label: {spec, base_url, served model, seed, extra_body, method, dtype, ...}}``;
``grid``
    the units results are kept under (pipelines, models, metrics): ``{unit id: spec}``;
``items``
    the items every unit answers, in order;
``settings``
    everything else that changes a result (answer settings, the ICL hold-out, a testbed's construction, ...);
``code``
    the ragrade release that computed them;

and records, without depending on them, the settings that change only how fast results come (``recorded``:
concurrency, timeouts, retries, request rate, cache, batch sizes, executor, the git checkout).

:func:`decide` compares a folder's provenance with a rerun's and returns one :class:`Decision`:

* ``new``: the folder holds no run (or none with a finished row);
* ``resume``: the same provenance, throughput aside: finished results are reused, the rest computed;
* ``extend``: the rerun only adds units (pipelines) or items: every existing result is kept, the new ones
  computed, and what depends on the whole grid recomputed;
* ``refuse``: anything that would alter or drop existing results; :meth:`Decision.message` names each
  difference, old and new (``k: 3 -> 5 (pipelines bm25 k=3 would be dropped)``), and the ways out.

:func:`digest` is the content address of a provenance (what derived files record of the results they read).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragrade._version import __version__
from ragrade.errors import ConfigError
from ragrade.redact import redact

PROVENANCE_VERSION = 1
#: the parts a result depends on (``recorded`` is kept beside them, never compared)
DEPENDS_ON = ("inputs", "models", "grid", "items", "settings", "code")
#: how a difference names a field the user does not type (the rest are named as they are)
_NAMES = {
    "_prompt_digest": "prompt template (digest)",
    "answer_options": "LLM options",
    "served_model": "served model",
    "ragrade": "ragrade version",
}

Action = Literal["new", "resume", "extend", "refuse"]


class ProvenanceMismatch(ConfigError):
    """A folder holds results that a rerun's inputs or settings would alter or drop (the message names each
    difference; rerun into a new folder or start over)."""


def _canon(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def provenance(
    *,
    inputs: Mapping[str, object] | None = None,
    models: Mapping[str, Mapping[str, object]] | None = None,
    grid: Mapping[str, Mapping[str, object]] | None = None,
    items: Sequence[str] = (),
    settings: Mapping[str, object] | None = None,
    recorded: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """A provenance record (JSON) of results computed by this ragrade from these parts (see the module docstring)."""
    data = {
        "version": PROVENANCE_VERSION,
        "inputs": dict(inputs or {}),
        "models": {k: dict(v) for k, v in (models or {}).items()},
        "grid": {k: dict(v) for k, v in (grid or {}).items()},
        "items": [str(i) for i in items],
        "settings": dict(settings or {}),
        "code": {"ragrade": __version__},
        "recorded": dict(recorded or {}),
    }
    # JSON all the way down (tuples become lists), as it is stored; credentials in a URL are no part of a model's
    # identity and never reach a written file
    out = redact(json.loads(_canon(data)))
    assert isinstance(out, dict)
    return out


def digest(record: Mapping[str, object]) -> str:
    """sha256 of the parts of ``record`` that results depend on (not ``recorded``): its content address."""
    return hashlib.sha256(_canon({k: record.get(k) for k in DEPENDS_ON}).encode()).hexdigest()


@dataclass(frozen=True)
class Difference:
    """One way a rerun differs from what a folder holds: ``name: old -> new`` and what it would do."""

    name: str
    old: str
    new: str
    note: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {self.old} -> {self.new}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Decision:
    """What a rerun may do with a folder's results (:func:`decide`)."""

    action: Action
    differences: list[Difference] = field(default_factory=list)
    added_units: list[str] = field(default_factory=list)
    added_items: int = 0

    def message(self, where: object, what: str = "run", finished: int | None = None, ways: str | None = None) -> str:
        """The refusal's one line: each difference, then the ways out (``ways``; default: ``$out``, ``$overwrite``)."""
        rows = f" (discards its {finished} finished results)" if finished else ""
        ways = ways or f"write to a new $out directory, or start over with $overwrite{rows}"
        return f"{where} holds a {what} with other inputs or settings: {'; '.join(map(str, self.differences))}; {ways}"

    def summary(self) -> str:
        """What an ``extend`` adds, in words (empty for the other actions)."""
        if self.action != "extend":
            return ""
        parts = []
        if self.added_units:
            shown = ", ".join(self.added_units[:4]) + (
                f", +{len(self.added_units) - 4}" if len(self.added_units) > 4 else ""
            )
            parts.append(f"{len(self.added_units)} new pipeline{'s' * (len(self.added_units) != 1)} ({shown})")
        if self.added_items:
            parts.append(f"{self.added_items} new item{'s' * (self.added_items != 1)}")
        return "extends the run with " + " and ".join(parts) + "; every finished result is kept"


def _show(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, str):
        text = value[:12] if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else value
    elif isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list)) for v in value):
        text = ",".join(_show(v) for v in value)
    else:
        text = _canon(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _name(key: str) -> str:
    return _NAMES.get(key, key)


def _flat(prefix: str, value: object) -> dict[str, object]:
    """``{dotted path: leaf}`` of nested mappings (lists are leaves)."""
    if isinstance(value, Mapping) and value:
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(_flat(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: value}


def _mapping_diffs(old: Mapping[str, object], new: Mapping[str, object], *, label: str = "") -> list[Difference]:
    flat_old, flat_new = _flat("", old), _flat("", new)
    out = []
    for key in sorted(set(flat_old) | set(flat_new)):
        a, b = flat_old.get(key), flat_new.get(key)
        if _canon(a) != _canon(b):
            name = ".".join(_name(p) for p in key.split("."))
            out.append(Difference(f"{name}{label}", _show(a), _show(b)))
    return out


def _grid_diffs(old: Mapping[str, Mapping[str, object]], new: Mapping[str, Mapping[str, object]]) -> list[Difference]:
    """Units dropped or changed: the spec fields whose values differ, with the units they would drop."""
    dropped = [u for u in old if u not in new]
    changed = [u for u in old if u in new and _canon(old[u]) != _canon(new[u])]
    out: list[Difference] = []
    for unit in changed:
        for d in _mapping_diffs(old[unit], new[unit]):
            out.append(Difference(d.name, d.old, d.new, f"pipeline {unit} was run with the old value"))
    if not dropped:
        return out
    named = ", ".join(dropped[:3]) + (f" and {len(dropped) - 3} more" if len(dropped) > 3 else "")
    note = f"pipeline{'s' * (len(dropped) != 1)} {named} would be dropped"
    added = [u for u in new if u not in old]
    moved: dict[str, tuple[set[str], set[str]]] = {}
    for unit in dropped:  # each dropped unit against the added unit nearest to it: the fields that moved
        spec = old[unit]
        if added:
            near = min(added, key=lambda v: sum(_canon(spec.get(k)) != _canon(new[v].get(k)) for k in {*spec, *new[v]}))
            keys = [k for k in sorted({*spec, *new[near]}) if _canon(spec.get(k)) != _canon(new[near].get(k))]
        else:
            keys = [k for k in sorted(spec) if all(_canon(spec.get(k)) != _canon(new[v].get(k)) for v in new)]
        for key in keys:
            was, now = moved.setdefault(key, (set(), set()))
            was.add(_show(spec.get(key)))
            now.update([_show(new[near].get(key))] if added else sorted({_show(new[v].get(key)) for v in new}))
    for key, (was, now) in moved.items():
        out.append(Difference(_name(key), ",".join(sorted(was)), ",".join(sorted(now)) or "(none)", note))
    if not moved:
        out.append(Difference("pipelines", str(len(old)), str(len(new)), note))
    return out


def _item_diffs(old: Sequence[str], new: Sequence[str]) -> tuple[list[Difference], int]:
    """(differences, items added): items may be added (an extension), never dropped or reordered away."""
    if list(old) == list(new):
        return [], 0
    gone = [i for i in old if i not in set(new)]
    if gone:
        note = f"{len(gone)} asked before would be dropped, e.g. {', '.join(gone[:3])}"
        return [Difference("questions", str(len(old)), str(len(new)), note)], 0
    return [], len(set(new) - set(old))


def decide(old: Mapping[str, Any] | None, new: Mapping[str, Any], *, extend: bool = True) -> Decision:
    """The one rule (module docstring): ``new``, ``resume``, ``extend`` (when ``extend`` allows it) or ``refuse``.

    ``old`` is the provenance the folder recorded (None: none). Models and inputs are compared where both
    name them (a new pipeline brings its own model or index: an extension); settings and the code version
    always; the grid and the items may only grow.
    """
    if old is None:
        return Decision("new")
    diffs: list[Difference] = []
    old_models, new_models = old.get("models") or {}, new.get("models") or {}
    for label in sorted(set(old_models) & set(new_models)):
        diffs += _mapping_diffs(
            old_models[label], new_models[label], label=f" of {label}" if len(new_models) > 1 else ""
        )
    old_in, new_in = old.get("inputs") or {}, new.get("inputs") or {}
    diffs += _mapping_diffs(
        {k: old_in[k] for k in old_in if k in new_in}, {k: new_in[k] for k in new_in if k in old_in}
    )
    diffs += _mapping_diffs(old.get("settings") or {}, new.get("settings") or {})
    diffs += _mapping_diffs(old.get("code") or {}, new.get("code") or {})
    old_grid, new_grid = old.get("grid") or {}, new.get("grid") or {}
    diffs += _grid_diffs(old_grid, new_grid)
    item_diffs, added_items = _item_diffs(old.get("items") or [], new.get("items") or [])
    diffs += item_diffs
    added = [u for u in new_grid if u not in old_grid]
    if diffs:
        return Decision("refuse", diffs)
    if (added or added_items) and not extend:
        what = [Difference("pipelines", str(len(old_grid)), str(len(new_grid)), "this command cannot extend a run")]
        return Decision(
            "refuse",
            what
            if added
            else [Difference("questions", str(len(old.get("items") or [])), str(len(new.get("items") or [])))],
        )
    if added or added_items:
        return Decision("extend", [], added, added_items)
    return Decision("resume")


def _sha256(path: Path) -> str | None:
    """The file's sha256 (None when unreadable), computed once per version of the file (path, inode, size, mtime):
    a report reads several derived files of one run, each checked against the same responses."""
    try:
        st = path.stat()
    except OSError:
        return None
    return _sha256_of(str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, inode: int, size: int, mtime_ns: int) -> str | None:
    del inode, size, mtime_ns  # the cache key: another version of the file (an atomic rewrite) is hashed again
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def source_record(responses: str | Path) -> dict[str, Any]:
    """What a derived file (comparisons, an IRT fit, an improvement) records of the responses it was computed
    from: the file's name and sha256, and the digest of the provenance in the ``manifest.json`` beside it."""
    path = Path(responses)
    out: dict[str, Any] = {"file": path.name, "sha256": _sha256(path)}
    try:
        manifest = json.loads((path.parent / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    prov = manifest.get("provenance") if isinstance(manifest, dict) else None
    if isinstance(prov, dict):
        out["provenance"] = digest(prov)
    return out


def stale_reason(recorded: object, responses: str | Path) -> str | None:
    """Why a derived file that recorded ``recorded`` (:func:`source_record`) no longer describes ``responses``;
    None while it does. A file written before derived files recorded their source is not judged (None)."""
    if not isinstance(recorded, Mapping) or not recorded.get("sha256"):
        return None
    path = Path(responses)
    if not path.is_file():
        return f"computed from {recorded.get('file', 'responses')} that is no longer there"
    if recorded["sha256"] == _sha256(path):
        return None
    return f"computed from other responses than the current {path.name} (the run was extended, resumed or rerun since)"


__all__ = [
    "DEPENDS_ON",
    "PROVENANCE_VERSION",
    "Decision",
    "Difference",
    "ProvenanceMismatch",
    "decide",
    "digest",
    "provenance",
    "source_record",
    "stale_reason",
]
