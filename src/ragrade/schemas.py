"""File schemas in one place: one validator per file kind, used by every reader.

Each ``check_*`` function takes one decoded record (or object) and ``where``
(``file:line``) and raises :class:`~ragrade.errors.DataError` with one line that
names the place, the kind of record and the bad field, so a malformed record
fails the same way in every command. The validators check shape and types only;
readers keep their own cross-record checks (duplicate ids, empty files).

Answers files (any system's field names, mapped with ``--field``) are validated by
:func:`ragrade.judge.inputs.read_answers`, their only reader, with the same ``file:line`` messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

from ragrade.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

N_CHOICES = 4  # exams are four-option multiple choice (letters A-D)

# Stated size limits (in characters; the README quotes them). A question past its limit fills a model's
# context by itself and slows every step after it (a 1,000,189-character question ran 2.3 times as long, at
# 1.5 GB); a model spec is a provider, a name or a path.
#: the longest question: an exam's or a QA file's question, an RGB query, the question of ``ragrade ask``
MAX_QUESTION_CHARS = 20_000
#: the longest candidate answer of an exam question
MAX_CHOICE_CHARS = 5_000
#: the longest model spec (``PROVIDER/MODEL``, a model file's path included)
MAX_SPEC_CHARS = 1_000
#: how much of a user's input an error message quotes
QUOTE_CHARS = 80


def quoted(text: str, limit: int = QUOTE_CHARS) -> str:
    """``'text'`` for an error message, cut to ``limit`` characters with how long it is when longer."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[: limit - 3]!r}... ({len(text):,} characters)"


def cut_long_words(message: str, longest: int = 200) -> str:
    """``message`` with each run of more than ``longest`` characters without a space cut to a readable length
    (the last resort for an error that quotes a huge input: a 100,000-character spec was printed in full)."""
    import re

    def cut(m: re.Match[str]) -> str:
        word = m.group(0)
        return f"{word[:QUOTE_CHARS]}...({len(word):,} characters)"

    return re.sub(rf"\S{{{longest + 1},}}", cut, message)


def size_error(what: str, text: str, limit: int) -> str | None:
    """The message for ``text`` (``what`` it is: "the question") longer than ``limit`` characters, else None."""
    if len(text) <= limit:
        return None
    return f"{what} has {len(text):,} characters, more than the limit of {limit:,}: {quoted(text)}"


def _size(rec: Mapping[str, object], key: str, limit: int, where: str, kind: str) -> None:
    value = rec.get(key)
    message = size_error(f"'{key}'", value, limit) if isinstance(value, str) else None
    if message is not None:
        raise _fail(where, kind, message)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _fail(where: str, kind: str, message: str) -> DataError:
    return DataError(f"{where}: bad {kind} record: {message}")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def need_text(rec: Mapping[str, object], key: str, where: str, kind: str, *, empty_ok: bool = False) -> str:
    """``rec[key]`` as a string; DataError when missing, not a string, or (unless ``empty_ok``) blank."""
    if key not in rec:
        raise _fail(where, kind, f"missing '{key}'")
    value = rec[key]
    if not isinstance(value, str):
        raise _fail(where, kind, f"'{key}' must be a string, got {_type_name(value)}")
    if not empty_ok and not value.strip():
        raise _fail(where, kind, f"'{key}' is empty")
    return value


def need_id(rec: Mapping[str, object], key: str, where: str, kind: str, *, required: bool = True) -> None:
    """``rec[key]`` must be a non-empty string or an integer (when present, or always when ``required``)."""
    if key not in rec:
        if required:
            raise _fail(where, kind, f"missing '{key}'")
        return
    value = rec[key]
    if not required and value is None:
        return
    if _is_int(value) or (isinstance(value, str) and value.strip()):
        return
    raise _fail(where, kind, f"'{key}' must be a non-empty string or an integer, got {_type_name(value)} {value!r:.40}")


def _optional(rec: Mapping[str, object], key: str, types: tuple[type, ...], where: str, kind: str, what: str) -> None:
    value = rec.get(key)
    if value is not None and not isinstance(value, types):
        raise _fail(where, kind, f"'{key}' must be {what}, got {_type_name(value)}")


def _str_list(value: object, key: str, where: str, kind: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, kind, f"'{key}' must be a list of strings, got {_type_name(value)} {value!r:.60}")
    return value


def _span(rec: Mapping[str, object], key: str, where: str, kind: str) -> None:
    value = rec.get(key)
    if value is None:
        return
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_int(v) for v in value)):
        raise _fail(where, kind, f"'{key}' must be two integers [start, end], got {value!r:.60}")
    if not 0 <= value[0] <= value[1]:
        raise _fail(where, kind, f"'{key}' must satisfy 0 <= start <= end, got {list(value)}")


def check_document(rec: Mapping[str, object], where: str) -> None:
    """A documents-file record: ``id``, ``text`` (string), optional ``source`` and ``metadata``."""
    need_id(rec, "id", where, "document")
    need_text(rec, "text", where, "document", empty_ok=True)
    _optional(rec, "source", (str,), where, "document", "a string")
    _optional(rec, "metadata", (dict,), where, "document", "an object")


def check_chunk(rec: Mapping[str, object], where: str) -> None:
    """A chunks-file record: ``id``, ``doc_id``, ``text`` (string), integer ``start <= end``."""
    need_id(rec, "id", where, "chunk")
    need_id(rec, "doc_id", where, "chunk")
    need_text(rec, "text", where, "chunk", empty_ok=True)
    bounds: list[int] = []
    for key in ("start", "end"):
        if key not in rec:
            raise _fail(where, "chunk", f"missing '{key}'")
        value = rec[key]
        if not _is_int(value) or value < 0:
            raise _fail(where, "chunk", f"'{key}' must be a non-negative integer, got {value!r:.40}")
        bounds.append(value)
    if bounds[0] > bounds[1]:
        raise _fail(where, "chunk", f"start {rec['start']} is after end {rec['end']}")
    _optional(rec, "metadata", (dict,), where, "chunk", "an object")


def check_question(rec: Mapping[str, object], where: str) -> None:
    """An exam record: ``id``, ``question``, four distinct non-empty ``choices``, integer ``answer`` among them."""
    kind = "question"
    need_id(rec, "id", where, kind)
    need_text(rec, "question", where, kind)
    _size(rec, "question", MAX_QUESTION_CHARS, where, kind)
    if "choices" not in rec:
        raise _fail(where, kind, "missing 'choices'")
    choices = _str_list(rec["choices"], "choices", where, kind)
    for n, choice in enumerate(choices):
        _size({f"choices[{n}]": choice}, f"choices[{n}]", MAX_CHOICE_CHARS, where, kind)
    if len(choices) != N_CHOICES:
        raise _fail(where, kind, f"'choices' must hold {N_CHOICES} candidates, got {len(choices)}")
    if any(not c.strip() for c in choices):
        raise _fail(where, kind, "'choices' holds an empty candidate")
    if len({" ".join(c.split()).casefold() for c in choices}) != len(choices):
        raise _fail(where, kind, "'choices' holds the same candidate twice")
    if "answer" not in rec:
        raise _fail(where, kind, "missing 'answer'")
    answer = rec["answer"]
    if not _is_int(answer) or not 0 <= answer < len(choices):
        raise _fail(where, kind, f"'answer' must be an integer index 0-{len(choices) - 1}, got {answer!r:.40}")
    need_id(rec, "doc_id", where, kind, required=False)
    need_id(rec, "chunk_id", where, kind, required=False)
    for key in ("tags", "generator"):
        _optional(rec, key, (dict,), where, kind, "an object")
    for key in ("source", "context"):
        _optional(rec, key, (str,), where, kind, "a string")
    _span(rec, "span", where, kind)


def check_qa(rec: Mapping[str, object], where: str) -> None:
    """A QA-file record: ``id``, ``question``; optional strings, spans and objects typed."""
    kind = "QA"
    need_id(rec, "id", where, kind)
    need_text(rec, "question", where, kind)
    _size(rec, "question", MAX_QUESTION_CHARS, where, kind)
    for key in ("reference", "reference_context", "source"):
        _optional(rec, key, (str,), where, kind, "a string")
    need_id(rec, "chunk_id", where, kind, required=False)
    need_id(rec, "doc_id", where, kind, required=False)
    for key in ("answer_span", "doc_span"):
        _span(rec, key, where, kind)
    for key in ("metadata", "generator"):
        _optional(rec, key, (dict,), where, kind, "an object")


def check_rgb(rec: Mapping[str, object], where: str) -> None:
    """An RGB-format record's shape: ``id``, ``query`` and lists (or lists of lists) of document strings.

    Answers (strings, numbers, lists of aliases) are read by :func:`ragrade.robust.data.normalise_answer`.
    """
    kind = "RGB"
    need_id(rec, "id", where, kind)
    need_text(rec, "query", where, kind)
    _size(rec, "query", MAX_QUESTION_CHARS, where, kind)
    for key in ("positive", "negative", "positive_wrong"):
        value = rec.get(key)
        if value is not None and not _docs_shape(value):
            raise _fail(where, kind, f"'{key}' must be a list of document strings, got {value!r:.60}")


def _docs_shape(value: object, depth: int = 0) -> bool:
    if isinstance(value, str):
        return depth > 0
    return depth < 2 and isinstance(value, list) and all(_docs_shape(v, depth + 1) for v in value)


def check_index_manifest(obj: object, where: str, fmt: str = "ragrade-index") -> None:
    """An index ``manifest.json``: ``format``, integer ``version`` and ``counts``, object-valued parts.

    ``embedder`` (when the index has dense vectors) needs a ``name`` and a positive integer ``dim``.
    """

    def bad(message: str) -> DataError:
        return DataError(f"{where}: bad index manifest: {message}; rebuild the index with `ragrade index`")

    if not isinstance(obj, dict) or obj.get("format") != fmt:
        raise DataError(f"{where}: not a ragrade index manifest")
    if not _is_int(obj.get("version", 1)):
        raise bad(f"'version' must be an integer, got {obj.get('version')!r:.40}")
    counts = obj.get("counts", {})
    if not isinstance(counts, dict) or not all(_is_int(v) and v >= 0 for v in counts.values()):
        raise bad(f"'counts' must map names to non-negative integers, got {counts!r:.60}")
    for key in ("chunker", "bm25", "embedder", "store"):
        value = obj.get(key)
        if value is not None and not isinstance(value, dict):
            raise bad(f"'{key}' must be an object, got {_type_name(value)}")
    emb = obj.get("embedder")
    if emb and (not isinstance(emb.get("name"), str) or not _is_int(emb.get("dim")) or emb["dim"] < 1):
        raise bad("'embedder' needs a 'name' and a positive integer 'dim'")


RESPONSES_FILE = "responses.parquet"  # a run's per-question table
RESPONSE_COLUMNS = ("pipeline", "question_id", "correct")


def check_response_columns(columns: Iterable[str], where: str, needed: Iterable[str] = RESPONSE_COLUMNS) -> None:
    """A responses table needs the columns ``needed``; DataError naming the missing ones and those present."""
    present = list(columns)
    missing = [c for c in needed if c not in present]
    if missing:
        raise DataError(
            f"{where}: not a ragrade responses table: missing column(s) {', '.join(missing)} "
            f"(columns present: {', '.join(map(str, present[:12]))}{', ...' if len(present) > 12 else ''})"
        )


def read_responses(run_dir: str | Path) -> pd.DataFrame:
    """responses.parquet of a run dir (or a parquet path); DataError when missing or unreadable."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(run_dir)
    path = p if p.suffix == ".parquet" else p / RESPONSES_FILE
    if not path.is_file():
        raise DataError(f"{path}: no responses file (has the run finished?)")
    try:
        df: pd.DataFrame = pq.read_table(path).to_pandas()
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path}: unreadable Parquet ({exc})") from exc
    check_response_columns(df.columns, str(path))
    correct = df["correct"].dropna()
    if (
        not (pd.api.types.is_bool_dtype(correct) or pd.api.types.is_numeric_dtype(correct))
        or not correct.isin((0, 1)).all()
    ):
        raise DataError(f"{path}: column 'correct' must hold 0/1 values")
    return df


CHECKS: dict[str, Callable[[Mapping[str, object], str], None]] = {
    "documents": check_document,
    "chunks": check_chunk,
    "exam": check_question,
    "qa": check_qa,
    "rgb": check_rgb,
}


__all__ = [
    "CHECKS",
    "MAX_CHOICE_CHARS",
    "MAX_QUESTION_CHARS",
    "MAX_SPEC_CHARS",
    "N_CHOICES",
    "QUOTE_CHARS",
    "RESPONSES_FILE",
    "RESPONSE_COLUMNS",
    "check_chunk",
    "check_document",
    "check_index_manifest",
    "check_qa",
    "check_question",
    "check_response_columns",
    "check_rgb",
    "cut_long_words",
    "need_id",
    "need_text",
    "quoted",
    "read_responses",
    "size_error",
]
