"""The command line is a thin layer over the Python API: a verb parses its flags, calls ``ragrade.api``, prints."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ragrade import api
from ragrade.cli.main import main


def _record(monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, dict[str, object]]], name: str) -> None:
    """Wrap ``ragrade.api.NAME`` so that each call is recorded, then runs the real function."""
    real: Callable[..., object] = getattr(api, name)

    @functools.wraps(real)
    def wrapper(*args: object, **kwargs: object) -> object:
        calls.append((name, dict(kwargs)))
        return real(*args, **kwargs)

    monkeypatch.setattr(api, name, wrapper)


def test_corpus_chunk_and_index_verbs_call_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[str, dict[str, object]]] = []
    for name in ("load_corpus", "chunk", "build_index"):
        _record(monkeypatch, calls, name)
    src = tmp_path / "docs"
    src.mkdir()
    for i, topic in enumerate(("valves", "pumps", "gauges")):
        (src / f"{topic}.md").write_text(f"# {topic}\n\nThe {topic} of unit {i} open at {10 + i} bar. " * 5)
    docs, chunks, index = tmp_path / "docs.jsonl", tmp_path / "chunks.jsonl", tmp_path / "idx"

    assert main(["corpus", str(src), "--min-chars", "5", "--out", str(docs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 3  # printed from what the API reported
    assert main(["chunk", str(docs), "--size", "20", "--overlap", "0", "--out", str(chunks), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["strategy"] == "recursive" and summary["chunks"] > 3 and summary["out"] == str(chunks)
    assert main(["index", str(chunks), "--out", str(index), "--no-dense", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chunks"] == summary["chunks"]

    assert [name for name, _ in calls] == ["load_corpus", "chunk", "build_index"]
    corpus_kwargs = dict(calls[0][1])
    config = corpus_kwargs["config"]
    assert getattr(config, "min_chars", None) == 5  # the flag went into the API's settings object
    assert corpus_kwargs["out"] == docs
    assert calls[1][1]["size"] == 20 and calls[1][1]["overlap"] == 0
    assert getattr(calls[2][1]["config"], "dense", None) is False
    assert index.is_dir() and chunks.is_file() and docs.is_file()


def test_a_dry_run_names_its_folder_in_the_settings_and_keeps_the_users_out_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[str, dict[str, object]]] = []
    _record(monkeypatch, calls, "load_corpus")
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.txt").write_text("The valve opens at ten bar.")
    out = tmp_path / "mine" / "docs.jsonl"
    out.parent.mkdir()
    assert main(["--dry-run", "corpus", str(src), "--out", str(out)]) == 0
    assert "made no LLM request" in capsys.readouterr().err
    written = calls[0][1]["out"]
    assert isinstance(written, Path) and written.name == "docs.jsonl"
    assert written.parent.name.startswith("ragrade-dry-run-") and not written.parent.exists()  # deleted after
    assert list(out.parent.iterdir()) == []
