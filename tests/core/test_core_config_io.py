from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from ragrade.config import build_config, deep_merge
from ragrade.errors import ConfigError, DataError
from ragrade.io import read_jsonl, write_jsonl


def test_deep_merge_none_means_not_given_at_every_level() -> None:
    base = {"a": 1, "sub": {"x": 1, "y": 2}}
    over = {"a": None, "sub": {"x": None, "y": 0}, "new": {"p": None, "q": False}}
    assert deep_merge(base, over) == {"a": 1, "sub": {"x": 1, "y": 0}, "new": {"q": False}}


class _Cfg(BaseModel):
    n: int = 3
    name: str = "x"


def test_build_config_layers_and_errors() -> None:
    cfg = build_config(_Cfg, {"n": 5}, {"name": "file"}, {"n": 0, "name": None})
    assert cfg.n == 0 and cfg.name == "file"
    with pytest.raises(ConfigError, match="n:"):
        build_config(_Cfg, {"n": "many"})


def test_jsonl_header_roundtrip_and_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    assert write_jsonl(path, [{"a": 1}, {"a": 2}], kind="things", version=3) == 2
    header, recs = read_jsonl(path, kind="things")
    assert header is not None and header.kind == "things" and header.version == 3
    assert recs == [{"a": 1}, {"a": 2}]
    with pytest.raises(DataError, match="expected a 'other' file"):
        read_jsonl(path, kind="other")
    path.write_text(json.dumps({"a": 1}) + "\n{broken\n")
    with pytest.raises(DataError, match=r"f\.jsonl:2"):
        read_jsonl(path)


def test_drop_torn_tail_cuts_only_a_half_written_last_line(tmp_path: Path) -> None:
    from ragrade.io import drop_torn_tail

    path = tmp_path / "a.jsonl"
    assert drop_torn_tail(path) == 0  # missing
    path.write_bytes(b"")
    assert drop_torn_tail(path) == 0
    whole = b'{"ragrade": {"kind": "x"}}\n{"a": 1}\n'
    path.write_bytes(whole)
    assert drop_torn_tail(path) == 0 and path.read_bytes() == whole
    path.write_bytes(whole + b'{"a": 2, "b": "hal')
    assert drop_torn_tail(path) == len(b'{"a": 2, "b": "hal') and path.read_bytes() == whole
    long_tail = b'{"a": "' + b"x" * 200_000  # longer than one read block
    path.write_bytes(whole + long_tail)
    assert drop_torn_tail(path) == len(long_tail) and path.read_bytes() == whole
    path.write_bytes(b'{"ragrade": {"ki')  # even the header was torn
    assert drop_torn_tail(path) == 16 and path.read_bytes() == b""


@pytest.mark.parametrize(
    ("version", "says"),
    [(2, r"documents file version 2 is newer than this ragrade supports \(1\); upgrade ragrade, or write it"),
     ("x", "version must be a positive whole number, got 'x'"), (True, "got True"), (0, "got 0")],
)  # fmt: skip
def test_a_file_version_that_is_no_number_or_too_new_is_one_clear_error(
    tmp_path: Path, version: object, says: str
) -> None:
    # one check for documents, chunks, robust data and irt.json files (a version "x" was a ValueError before)
    from ragrade.corpus.files import read_documents

    path = tmp_path / "docs.jsonl"
    head = {"ragrade": {"kind": "documents", "version": version}}
    doc = {"id": "d1", "text": "Some text.", "source": "a.txt"}
    path.write_text(json.dumps(head) + "\n" + json.dumps(doc) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=says):
        read_documents(path)
