"""Reading answers to judge, from our own runs or any system's JSONL outputs.

Each line is one answer. The fields are found under their usual names
(``query``/``question``, ``answer``/``response``, ``contexts``, ``reference``,
``pipeline``/``config``, ``id``) or under the names a field map gives
(``--field query=q --field answer=resp``; dotted paths such as
``retrieval.passages`` reach into nested objects). Contexts may be a string,
a list of strings, or a list of objects with a ``text`` (or ``content``,
``page_content``, ``chunk``) field; a reference may be a string or a list of
acceptable strings.

A record that lacks an answer or carries an answer-side error is kept and
later reported as ``skipped`` with its reason: never silently dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ragrade.errors import ConfigError, DataError
from ragrade.io import JSONObject, iter_jsonl

DEFAULT_CONFIG = "all"
# target -> names tried in order when no field map entry is given
DEFAULT_FIELDS: dict[str, tuple[str, ...]] = {
    "id": ("id", "answer_id", "qid", "question_id"),
    "query": ("query", "question", "user_input", "input", "prompt"),
    "answer": ("answer", "response", "prediction", "output", "generated_answer"),
    "contexts": ("contexts", "context", "retrieved_contexts", "passages", "documents"),
    "reference": ("reference", "reference_answer", "ground_truth", "gold", "gold_answer", "expected_output"),
    "config": ("pipeline", "config", "configuration", "system"),
    "error": ("error",),
}
_CONTEXT_TEXT_KEYS = ("text", "content", "page_content", "chunk", "passage")


@dataclass(frozen=True)
class AnswerItem:
    """One answer to judge; ``key`` = (config, id) is unique within a file."""

    id: str
    config: str
    query: str | None
    answer: str | None
    contexts: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    error: str | None = None
    line: int = 0
    extra: JSONObject = field(default_factory=dict, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        """(config, id)."""
        return (self.config, self.id)


def parse_field_map(pairs: Sequence[str] | None) -> dict[str, str]:
    """Parse ``["query=q", "answer=resp"]`` into ``{"query": "q", ...}`` with clear errors."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        target, sep, source = pair.partition("=")
        target, source = target.strip(), source.strip()
        if not sep or not target or not source:
            raise ConfigError(f"$fields expects TARGET=SOURCE (e.g. query=q), got '{pair}'")
        if target not in DEFAULT_FIELDS:
            raise ConfigError(f"$fields: target '{target}' is unknown; valid targets: {', '.join(DEFAULT_FIELDS)}")
        out[target] = source
    return out


_MISSING = object()


def _get(record: Mapping[str, object], path: str) -> object:
    cur: object = record
    for part in path.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _as_texts(value: object, where: str, what: str) -> tuple[str, ...]:
    if value is None or value is _MISSING:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, Mapping):
        value = [value]
    if isinstance(value, list):
        texts: list[str] = []
        for v in value:
            if isinstance(v, str):
                texts.append(v)
            elif isinstance(v, Mapping):
                found = next((v[k] for k in _CONTEXT_TEXT_KEYS if isinstance(v.get(k), str)), None)
                if found is None:
                    raise DataError(f"{where}: a {what} object has none of the fields {', '.join(_CONTEXT_TEXT_KEYS)}")
                texts.append(found)
            elif isinstance(v, (int, float)):
                texts.append(str(v))
            else:
                raise DataError(f"{where}: unexpected {what} entry of type {type(v).__name__}")
        return tuple(t for t in texts if t.strip())
    if isinstance(value, (int, float)):
        return (str(value),)
    raise DataError(f"{where}: {what} must be a string or a list, got {type(value).__name__}")


def _as_text(value: object, where: str, what: str) -> str | None:
    if value is None or value is _MISSING:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise DataError(f"{where}: {what} must be a string, got {type(value).__name__}")


class _Resolver:
    """Finds each target field in a record, using the map or the default names."""

    def __init__(self, field_map: Mapping[str, str]) -> None:
        self.field_map = dict(field_map)
        self.seen: dict[str, int] = dict.fromkeys(self.field_map, 0)

    def get(self, record: Mapping[str, object], target: str) -> object:
        if target in self.field_map:
            value = _get(record, self.field_map[target])
            if value is not _MISSING:
                self.seen[target] += 1
            return value
        for name in DEFAULT_FIELDS[target]:
            if name in record:
                return record[name]
        return _MISSING


def _auto_id(config: str, query: str | None, answer: str | None) -> str:
    digest = hashlib.sha256(f"{config}\x1f{query}\x1f{answer}".encode()).hexdigest()
    return f"a-{digest[:12]}"


def _item(record: Mapping[str, object], resolver: _Resolver, where: str, lineno: int) -> AnswerItem:
    config_v = _as_text(resolver.get(record, "config"), where, "config")
    config = config_v if config_v else DEFAULT_CONFIG
    query = _as_text(resolver.get(record, "query"), where, "query")
    answer = _as_text(resolver.get(record, "answer"), where, "answer")
    error = _as_text(resolver.get(record, "error"), where, "error")
    raw_id = resolver.get(record, "id")
    item_id = _as_text(raw_id, where, "id") if raw_id is not _MISSING else None
    return AnswerItem(
        id=item_id or _auto_id(config, query, answer),
        config=config,
        query=query,
        answer=answer,
        contexts=_as_texts(resolver.get(record, "contexts"), where, "contexts"),
        references=_as_texts(resolver.get(record, "reference"), where, "reference"),
        error=error or None,
        line=lineno,
        extra={"auto_id": not item_id},
    )


def read_answers(path: str | Path, field_map: Mapping[str, str] | None = None) -> list[AnswerItem]:
    """Read an answers JSONL (a ragrade header line is skipped); DataError/ConfigError on bad input.

    A field map entry that matches no record at all is a ConfigError naming
    the fields that do occur, since it is almost certainly a typo.
    """
    path = Path(path)
    resolver = _Resolver(field_map or {})
    items: list[AnswerItem] = []
    keys_seen: set[str] = set()
    for lineno, record in iter_jsonl(path):
        if lineno == 1 and len(record) == 1 and isinstance(record.get("ragrade"), dict):
            continue
        keys_seen.update(record)
        items.append(_item(record, resolver, f"{path}:{lineno}", lineno))
    if not items:
        raise DataError(f"{path}: no answers to judge")
    for target, count in resolver.seen.items():
        if count == 0:
            raise ConfigError(
                f"$fields {target}={resolver.field_map[target]}: no record of {path} has that field; "
                f"fields present: {', '.join(sorted(keys_seen))}"
            )
    if all(it.answer is None and it.error is None for it in items):
        raise ConfigError(
            f"{path}: no record has an answer field; map yours with $fields answer=NAME "
            f"(fields present: {', '.join(sorted(keys_seen))})"
        )
    dedup: dict[tuple[str, str], int] = {}
    for n, it in enumerate(items):
        if it.key in dedup and it.extra.get("auto_id"):
            k = 2
            while (it.config, f"{it.id}-{k}") in dedup:
                k += 1
            it = items[n] = replace(it, id=f"{it.id}-{k}")
        if it.key in dedup:
            raise DataError(
                f"{path}:{it.line}: duplicate answer id '{it.id}' for configuration '{it.config}' "
                f"(first on line {dedup[it.key]})"
            )
        dedup[it.key] = it.line
    return items


__all__ = ["DEFAULT_CONFIG", "DEFAULT_FIELDS", "AnswerItem", "parse_field_map", "read_answers"]
