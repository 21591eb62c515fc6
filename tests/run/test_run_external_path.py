"""``--external NAME=module:function`` imports the user's code from the current folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ragrade.errors import ConfigError
from ragrade.run.executors import resolve_callable


def test_module_in_the_current_folder_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_rag_cwd_probe.py").write_text("def answer(req):\n    return {'answer': 1}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    fn = resolve_callable("my_rag_cwd_probe:answer")
    assert fn({"question": "q"}) == {"answer": 1}
    assert sys.path[0] == str(tmp_path)
    sys.modules.pop("my_rag_cwd_probe", None)


def test_missing_module_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="cannot import 'no_such_rag_module'"):
        resolve_callable("no_such_rag_module:answer")
