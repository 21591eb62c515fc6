"""Loader for robustness data in the RGB JSON Lines shape.

Three record shapes are accepted (one record per line, an optional ragrade
header line first):

- **base** (noise robustness, negative rejection): ``id``, ``query``,
  ``answer``, ``positive`` (list of documents that contain the answer),
  ``negative`` (documents that do not).
- **integration**: ``positive`` is a list of groups, one group of documents per
  answer part; ``answer`` lists the parts; ``answer1``/``answer2`` (also the
  original files' misspelled ``asnwer1``) may give the parts instead, each read
  like ``answer`` (a list of several names requires all of them). A record may
  have more answer parts than groups (the benchmark's own files hold such
  records, where one group's documents give several parts): it loads, its documents come from the groups that
  exist, and it is counted in :attr:`RGBData.report`. Fewer parts than groups
  is an error.
- **counterfactual**: also ``fakeanswer`` and ``positive_wrong`` (the positives
  with the answer replaced by the fake one).

Answers are normalised to a list of parts, each a list of accepted aliases,
following the original scorer's reading: a plain string is one part with one
alias; in a list, each string is a required part and each inner list is one
part with alternative aliases. Numbers are read as strings. Every problem is
a DataError naming ``file:line``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrade.errors import DataError
from ragrade.io import JSONObject, check_file_version, iter_jsonl, write_jsonl
from ragrade.schemas import check_rgb

DATA_KIND = "robust_data"
DATA_VERSION = 1
REBUILD = "build the file again with this one (`ragrade robust build`)"
ITEM_KINDS = ("base", "integration", "counterfactual")

Answer = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class RGBItem:
    """One validated question with its document pools."""

    id: str
    query: str
    answer: Answer
    kind: str
    positive: tuple[str, ...] = ()
    positive_groups: tuple[tuple[str, ...], ...] = ()
    negative: tuple[str, ...] = ()
    positive_wrong: tuple[str, ...] = ()
    fakeanswer: Answer = ()
    where: str = ""
    meta: JSONObject = field(default_factory=dict, compare=False)

    def to_record(self) -> JSONObject:
        """The RGB-shaped JSONL record of this item (aliases kept as nested lists)."""
        rec: JSONObject = {"id": self.id, "query": self.query, "answer": [list(p) for p in self.answer]}
        if self.kind == "integration":
            rec["positive"] = [list(g) for g in self.positive_groups]
        else:
            rec["positive"] = list(self.positive)
        rec["negative"] = list(self.negative)
        if self.kind == "counterfactual":
            rec["fakeanswer"] = [list(p) for p in self.fakeanswer]
            rec["positive_wrong"] = list(self.positive_wrong)
        if self.meta:
            rec["meta"] = self.meta
        return rec


def _alias(value: object, where: str, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DataError(f"{where}: {what} must be a string or a number, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise DataError(f"{where}: {what} is an empty string")
    return text


def normalise_answer(value: object, where: str, what: str = "answer") -> Answer:
    """Parts x aliases from a string, a number, or a list mixing strings and lists of aliases."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return ((_alias(value, where, what),),)
    if not isinstance(value, list) or not value:
        raise DataError(f"{where}: {what} must be a non-empty string or list")
    parts: list[tuple[str, ...]] = []
    for i, part in enumerate(value):
        if isinstance(part, list):
            if not part:
                raise DataError(f"{where}: {what} part {i + 1} is an empty list")
            parts.append(tuple(_alias(a, where, f"{what} part {i + 1}") for a in part))
        else:
            parts.append((_alias(part, where, f"{what} part {i + 1}"),))
    return tuple(parts)


def _texts(value: object, where: str, key: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    if value is None:
        value = []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{where}: '{key}' must be a list of strings")
    if not allow_empty and not value:
        raise DataError(f"{where}: '{key}' is empty")
    return tuple(value)


def detect_kind(rec: Mapping[str, object]) -> str:
    """The shape of a record: counterfactual, integration or base."""
    if "positive_wrong" in rec or "fakeanswer" in rec:
        return "counterfactual"
    pos = rec.get("positive")
    if isinstance(pos, list) and pos and any(isinstance(p, list) for p in pos):
        return "integration"
    return "base"


def _integration_answer(rec: Mapping[str, object], where: str) -> Answer:
    if rec.get("answer") is not None:
        return normalise_answer(rec["answer"], where)
    parts: list[tuple[str, ...]] = []
    for n in range(1, 10):
        value = rec.get(f"answer{n}", rec.get("asnwer1") if n == 1 else None)
        if value is None:
            break
        parts.extend(normalise_answer(value, where, f"answer{n}"))  # several names: all are required
    if not parts:
        raise DataError(f"{where}: missing 'answer' (or 'answer1', 'answer2', ...)")
    return tuple(parts)


def parse_item(rec: Mapping[str, Any], where: str) -> RGBItem:
    """Validate one record and build an :class:`RGBItem`."""
    check_rgb(rec, where)
    for key in ("id", "query"):
        if key not in rec:
            raise DataError(f"{where}: missing '{key}'")
    item_id = rec["id"]
    if isinstance(item_id, bool) or not isinstance(item_id, (str, int)) or str(item_id).strip() == "":
        raise DataError(f"{where}: 'id' must be a non-empty string or an integer")
    query = rec["query"]
    if not isinstance(query, str) or not query.strip():
        raise DataError(f"{where}: 'query' must be a non-empty string")
    kind = detect_kind(rec)
    negative = _texts(rec.get("negative"), where, "negative")
    meta = dict(rec["meta"]) if isinstance(rec.get("meta"), dict) else {}
    common: dict[str, Any] = {
        "id": str(item_id),
        "query": query.strip(),
        "kind": kind,
        "negative": negative,
        "where": where,
        "meta": meta,
    }
    if kind == "integration":
        groups_raw = rec.get("positive")
        if not isinstance(groups_raw, list) or not all(isinstance(g, list) for g in groups_raw):
            raise DataError(f"{where}: integration 'positive' must be a list of lists of documents")
        groups = tuple(_texts(g, where, f"positive[{i}]") for i, g in enumerate(groups_raw))
        answer = _integration_answer(rec, where)
        if len(answer) < len(groups):
            raise DataError(f"{where}: {len(answer)} answer parts but {len(groups)} groups of positive documents")
        return RGBItem(answer=answer, positive_groups=groups, **common)
    if "answer" not in rec:
        raise DataError(f"{where}: missing 'answer'")
    answer = normalise_answer(rec["answer"], where)
    positive = _texts(rec.get("positive"), where, "positive")
    if kind == "counterfactual":
        if "fakeanswer" not in rec or "positive_wrong" not in rec:
            raise DataError(f"{where}: a counterfactual record needs both 'fakeanswer' and 'positive_wrong'")
        fake = normalise_answer(rec["fakeanswer"], where, "fakeanswer")
        wrong = _texts(rec["positive_wrong"], where, "positive_wrong")
        return RGBItem(answer=answer, positive=positive, positive_wrong=wrong, fakeanswer=fake, **common)
    return RGBItem(answer=answer, positive=positive, **common)


@dataclass(frozen=True)
class RGBData:
    """The items of one file, all of one kind, and the loader's report on them.

    ``report`` holds ``records`` (items loaded) and, for integration files,
    ``more_answer_parts_than_groups``: ``{"count", "ids"}`` of the records whose
    answer has more parts than groups of positive documents.
    """

    path: str
    kind: str
    items: tuple[RGBItem, ...]
    report: dict[str, Any] = field(default_factory=dict, compare=False)
    meta: dict[str, Any] = field(default_factory=dict, compare=False)  # the ragrade header (none: {})

    @property
    def built_from_corpus(self) -> bool:
        """True for a file ``robust build`` wrote from a user's exam or QA file and index (its header's source)."""
        return isinstance(self.meta.get("source"), dict)


def load_rgb(path: str | Path, *, kind: str | None = None, limit: int | None = None) -> RGBData:
    """Read and validate an RGB-shaped JSONL file; ``kind`` checks the shape when given.

    A file must hold records of one shape and unique ids; an empty file is an error.
    """
    path = Path(path)
    items: list[RGBItem] = []
    kinds: Counter[str] = Counter()
    first_where: dict[str, str] = {}
    meta: dict[str, Any] = {}
    for lineno, rec in iter_jsonl(path):
        if lineno == 1 and len(rec) == 1 and isinstance(rec.get("ragrade"), dict):
            meta = dict(rec["ragrade"])
            head_kind = rec["ragrade"].get("kind")
            if head_kind != DATA_KIND:
                raise DataError(f"{path}: expected a '{DATA_KIND}' file, found a '{head_kind}' file")
            check_file_version(rec["ragrade"].get("version", 1), path, DATA_KIND, DATA_VERSION, REBUILD)
            continue
        where = f"{path}:{lineno}"
        item = parse_item(rec, where)
        kinds[item.kind] += 1
        first_where.setdefault(item.kind, where)
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise DataError(f"{path}: no records")
    if len(kinds) > 1:
        desc = ", ".join(f"{k} (first at {first_where[k]})" for k in kinds)
        raise DataError(f"{path}: records of different shapes in one file: {desc}")
    found = next(iter(kinds))
    if kind is not None and found != kind:
        raise DataError(f"{path}: expected {kind} records, found {found} records")
    seen: dict[str, str] = {}
    for it in items:
        if it.id in seen:
            raise DataError(f"{it.where}: duplicate id '{it.id}' (first at {seen[it.id]})")
        seen[it.id] = it.where
    return RGBData(path=str(path), kind=found, items=tuple(items), report=_load_report(found, items), meta=meta)


def fake_equals_answer(item: RGBItem) -> bool:
    """A counterfactual item whose fake answer says what its answer says (part for part, numbers by value).

    Such an item cannot tell a model that follows the documents from one that corrects them.
    """
    from ragrade.robust.match import same_text

    if item.kind != "counterfactual" or len(item.fakeanswer) != len(item.answer):
        return False
    return all(
        any(same_text(a, f) for a in gold for f in fake)
        for gold, fake in zip(item.answer, item.fakeanswer, strict=True)
    )


def _load_report(kind: str, items: Sequence[RGBItem]) -> JSONObject:
    """What the loader noticed: the record count; integration records with extra answer parts;
    counterfactual records whose fake answer equals the answer (``fake_equals_answer``)."""
    report: JSONObject = {"records": len(items)}
    if kind == "integration":
        ids = [it.id for it in items if len(it.answer) > len(it.positive_groups)]
        report["more_answer_parts_than_groups"] = {"count": len(ids), "ids": ids}
    if kind == "counterfactual":
        ids = [it.id for it in items if fake_equals_answer(it)]
        report["fake_equals_answer"] = {"count": len(ids), "ids": ids}
    return report


def _ids(found: Mapping[str, Any]) -> str:
    return ", ".join(found["ids"][:12]) + (", ..." if found["count"] > 12 else "")


def describe_report(data: RGBData) -> list[str]:
    """One line per noteworthy finding of the loader (nothing when the file held no surprises)."""
    notes = []
    extra = data.report.get("more_answer_parts_than_groups") or {}
    if extra.get("count"):
        notes.append(
            f"{data.path}: {extra['count']} record(s) have more answer parts than groups of positive "
            f"documents (ids {_ids(extra)}); their documents come from the groups that exist"
        )
    same = data.report.get("fake_equals_answer") or {}
    if same.get("count"):
        notes.append(
            f"{data.path}: {same['count']} counterfactual record(s) have a fake answer equal to the answer "
            f"(ids {_ids(same)}); they cannot test anything and are left out of the counterfactual "
            "metrics (counted as 'untestable'; --scoring rgb keeps them, as the original did)"
        )
    return notes


def write_rgb(path: str | Path, items: Sequence[RGBItem], meta: Mapping[str, object] | None = None) -> int:
    """Write items as an RGB-shaped JSONL file with a ragrade header; returns the count."""
    return write_jsonl(path, (it.to_record() for it in items), kind=DATA_KIND, version=DATA_VERSION, meta=meta)


__all__ = [
    "DATA_KIND",
    "DATA_VERSION",
    "ITEM_KINDS",
    "Answer",
    "RGBData",
    "RGBItem",
    "describe_report",
    "detect_kind",
    "fake_equals_answer",
    "load_rgb",
    "normalise_answer",
    "parse_item",
    "write_rgb",
]
