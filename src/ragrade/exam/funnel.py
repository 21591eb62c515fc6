"""The generation funnel: how many candidates each stage removed and why; sidecar files next to an exam.

Invariant: ``generated == kept + sum(stage["removed"])`` and every removed
candidate has exactly one reason. The funnel is plain, versioned JSON
(``<exam>.funnel.json``); rejected candidates go to ``<exam>.rejected.jsonl``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragrade.errors import DataError
from ragrade.io import JSONObject, read_json, read_jsonl, write_json, write_jsonl

FUNNEL_KIND = "exam_funnel"
FUNNEL_VERSION = 1
REJECTED_KIND = "exam_rejected"
REJECTED_VERSION = 1

#: stages in the order candidates pass them
STAGES = ("generation", "parse", "self_containment", "intra_candidate", "extra_candidate", "near_duplicate", "surplus")


def build_funnel(
    generated: int,
    removed_reasons: Iterable[str],
    kept: int,
    *,
    thresholds: Mapping[str, Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> JSONObject:
    """The funnel record from one reason per removed candidate (``"stage:reason"`` strings).

    Raises ValueError when the counts do not add up (a candidate lost without a reason).
    """
    reasons = Counter(removed_reasons)
    per_stage: dict[str, Counter[str]] = {s: Counter() for s in STAGES}
    for full, count in reasons.items():
        stage, _, why = full.partition(":")
        if stage not in per_stage:
            raise ValueError(f"unknown funnel stage {stage!r} in reason {full!r}")
        per_stage[stage][why or stage] += count
    removed_total = sum(reasons.values())
    if generated != kept + removed_total:
        raise ValueError(f"funnel does not add up: generated {generated} != kept {kept} + removed {removed_total}")
    stages: list[JSONObject] = []
    remaining = generated
    for stage in STAGES:
        removed = sum(per_stage[stage].values())
        row: JSONObject = {
            "stage": stage,
            "in": remaining,
            "removed": removed,
            "out": remaining - removed,
            "reasons": dict(sorted(per_stage[stage].items())),
        }
        if thresholds and stage in thresholds:
            row["filter"] = dict(thresholds[stage])
        stages.append(row)
        remaining -= removed
    funnel: JSONObject = {
        "kind": FUNNEL_KIND,
        "version": FUNNEL_VERSION,
        "generated": generated,
        "kept": kept,
        "removed": removed_total,
        "stages": stages,
        "reasons": dict(sorted(reasons.items())),
    }
    if extra:
        funnel.update(extra)
    return funnel


def check_funnel(funnel: Mapping[str, Any], where: str = "funnel") -> JSONObject:
    """Validate a funnel record read from disk; DataError when it is not one or does not add up."""
    if not isinstance(funnel, Mapping) or funnel.get("kind") != FUNNEL_KIND:
        raise DataError(f"{where}: not an exam funnel record")
    if int(funnel.get("version", 0)) > FUNNEL_VERSION:
        raise DataError(f"{where}: funnel version {funnel.get('version')} is newer than this ragrade understands")
    try:
        removed = sum(int(s["removed"]) for s in funnel["stages"])
        if int(funnel["generated"]) != int(funnel["kept"]) + removed:
            raise DataError(f"{where}: funnel counts do not add up")
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{where}: malformed funnel ({exc!r})") from exc
    return dict(funnel)


def shortfall_line(funnel: Mapping[str, Any]) -> str | None:
    """Why an exam has fewer questions than requested, in one line with counts per reason; None when it has not.

    Read from the funnel's ``requested``, ``kept``, ``chunks``, ``rounds``, ``stopped`` and ``reasons``: every
    eligible chunk was asked (the pool is exhausted), or the LLM's request cap or rounds limit was reached.
    """
    requested, kept = funnel.get("requested"), funnel.get("kept")
    if not isinstance(requested, int) or not isinstance(kept, int) or kept >= requested:
        return None
    got = funnel.get("chunks")
    chunks: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    eligible, asked, rounds = (
        chunks.get("eligible", "?"),
        chunks.get("asked", funnel.get("generated")),
        funnel.get("rounds"),
    )
    in_rounds = f" in {rounds} round{'' if rounds == 1 else 's'}" if isinstance(rounds, int) else ""
    stopped = funnel.get("stopped")
    if stopped is None:  # an exam written before the funnel said why it stopped
        stopped = "pool" if isinstance(eligible, int) and isinstance(asked, int) and asked >= eligible else "rounds"
    why = {
        "pool": f"the pool is exhausted: all {eligible} eligible chunks were asked{in_rounds}",
        "requests": f"the request cap was reached: {asked} of {eligible} eligible chunks asked{in_rounds} "
        f"(max_requests {funnel.get('max_requests', '?')}; raise --oversample or max_requests)",
        "rounds": f"the rounds limit was reached: {asked} of {eligible} eligible chunks asked{in_rounds} "
        "(raise max_rounds or --oversample)",
        "dry_run": f"a dry run asks one round only ({asked} of {eligible} eligible chunks)",
    }.get(str(stopped), f"{asked} of {eligible} eligible chunks asked{in_rounds}")
    got = funnel.get("reasons")
    reasons: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    lost = sorted(
        ((str(k), v) for k, v in reasons.items() if not str(k).startswith("surplus") and isinstance(v, int) and v),
        key=lambda kv: (-kv[1], kv[0]),
    )
    short = chunks.get("too_short")
    shorter = f"; {short} chunks too short to ask about" if isinstance(short, int) and short else ""
    filler = chunks.get("placeholder")
    shorter += f"; {filler} chunks of placeholder text (lorem ipsum)" if isinstance(filler, int) and filler else ""
    return f"{kept} of {requested} requested questions: {why}{shorter}; candidates removed: " + (
        ", ".join(f"{k} {v}" for k, v in lost) or "none"
    )


def sidecar_paths(exam_path: str | Path) -> tuple[Path, Path]:
    """``(<exam>.funnel.json, <exam>.rejected.jsonl)`` for an exam file (its suffix replaced)."""
    p = Path(exam_path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.stem
    return p.with_name(f"{stem}.funnel.json"), p.with_name(f"{stem}.rejected.jsonl")


def write_sidecars(
    exam_path: str | Path, funnel: Mapping[str, object], rejected: Iterable[Mapping[str, object]]
) -> None:
    """Write the funnel JSON and the rejected-candidates JSONL next to ``exam_path``."""
    funnel_path, rejected_path = sidecar_paths(exam_path)
    write_json(funnel_path, dict(funnel))
    write_jsonl(rejected_path, rejected, kind=REJECTED_KIND, version=REJECTED_VERSION)


def read_funnel(exam_path: str | Path, header_meta: Mapping[str, Any] | None = None) -> JSONObject | None:
    """The funnel of an exam: the sidecar when present, else the exam header's copy, else None."""
    funnel_path, _ = sidecar_paths(exam_path)
    if funnel_path.exists():
        return check_funnel(read_json(funnel_path), str(funnel_path))
    if header_meta and isinstance(header_meta.get("funnel"), Mapping):
        return check_funnel(header_meta["funnel"], f"{exam_path} (header)")
    return None


def read_rejected(exam_path: str | Path) -> list[JSONObject]:
    """The rejected candidates recorded next to an exam (empty when there is no sidecar)."""
    _, rejected_path = sidecar_paths(exam_path)
    if not rejected_path.exists():
        return []
    return read_jsonl(rejected_path, kind=REJECTED_KIND)[1]


__all__ = [
    "FUNNEL_KIND",
    "FUNNEL_VERSION",
    "REJECTED_KIND",
    "STAGES",
    "build_funnel",
    "check_funnel",
    "read_funnel",
    "read_rejected",
    "shortfall_line",
    "sidecar_paths",
    "write_sidecars",
]
