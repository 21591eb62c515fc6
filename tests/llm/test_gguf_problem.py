"""A GGUF file's header read to tell a cut-off or foreign file from one llama.cpp cannot run (issue 38.4)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from ragrade.llm.gguf import gguf_problem


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _gguf(data_bytes: int) -> bytes:
    """A GGUF v3 file written here: one key (general.alignment = 32), two f32 tensors of 16 values at data
    offsets 0 and 64, then ``data_bytes`` bytes of tensor data (128 make it whole)."""
    head = b"GGUF" + struct.pack("<IQQ", 3, 2, 1)
    head += _string("general.alignment") + struct.pack("<II", 4, 32)  # type 4: uint32
    for name, offset in (("a", 0), ("b", 64)):
        head += _string(name) + struct.pack("<IQIQ", 1, 16, 0, offset)  # 1 dimension of 16, type 0 (f32)
    head += b"\0" * (-len(head) % 32)  # the data starts at the alignment
    return head + b"\1" * data_bytes


def test_a_whole_file_has_no_problem_and_cut_ones_say_where(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(_gguf(128))
    assert gguf_problem(path) is None
    path.write_bytes(_gguf(40))  # the second tensor's data (from byte 64) is missing
    assert "before its tensor data does (cut off?)" in str(gguf_problem(path))
    path.write_bytes(_gguf(128)[:30])
    assert "header is cut off (30 bytes)" in str(gguf_problem(path))
    path.write_bytes(b"PK\3\4 not a model")
    assert "not a GGUF file" in str(gguf_problem(path))


def test_llamacpp_names_a_cut_off_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Read from the header before any runtime loads (so without llama.cpp installed too)."""
    from ragrade.cli.main import main

    path = tmp_path / "cut.gguf"
    path.write_bytes(_gguf(40))
    for provider in ("llamacpp", "hf"):
        assert main(["llm", "probe", "--llm", f"{provider}/{path}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err == f"ragrade: error: {provider}/{path}: cannot load this GGUF file: it ends (168 bytes) before " + (
            "its tensor data does (cut off?)"
        )
