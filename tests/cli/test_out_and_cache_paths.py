"""Where results and the cache go (issue 52, item 8): ``--out`` naming a file says what it expects, and with
``HOME`` unset the cache's folder is said (or, for a user without a home folder, asked for)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from tests.cli.test_failed_requests import _exam

from ragrade import storage
from ragrade.cli.main import main

pytestmark = pytest.mark.usefixtures("isolated_llm_env")


def _take(exam: Path, out: Path) -> list[str]:
    return ["exam", "take", str(exam), "--out", str(out), "--llm", "offline/student", "--retrievers", "closed"]


def test_out_naming_a_file_says_a_folder_is_expected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exam, notes = _exam(tmp_path, 5), tmp_path / "notes.txt"
    notes.write_text("mine\n", encoding="utf-8")
    assert main(_take(exam, notes)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{notes} is a file, and this command writes a folder of results there" in err
    assert main(_take(exam, notes / "run")) == 2  # a file above the folder
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{notes / 'run'}: {notes} is a file, not a folder" in err
    assert notes.read_text(encoding="utf-8") == "mine\n"


def test_with_home_unset_the_cache_folder_is_said_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import pwd

    monkeypatch.delenv("RAGRADE_CACHE_DIR", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(storage, "_said", set())
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    with caplog.at_level(logging.WARNING, logger="ragrade"):
        assert storage.cache_root() == home / ".cache" / "ragrade"
        assert storage.cache_root() == home / ".cache" / "ragrade"
    said = [r.getMessage() for r in caplog.records if "HOME is not set" in r.getMessage()]
    assert said == [
        f"ragrade: warning: HOME is not set: the cache goes to {home / '.cache' / 'ragrade'} (the home folder of "
        "the user running ragrade); set RAGRADE_CACHE_DIR to choose its place"
    ]


def test_a_user_without_a_home_folder_is_asked_for_the_cache_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragrade.errors import ConfigError

    def no_home() -> Path:  # what Path.home() raises for a user the system records no home folder for
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("RAGRADE_CACHE_DIR", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    with pytest.raises(ConfigError, match="HOME is not set and this user has no home folder: set RAGRADE_CACHE_DIR"):
        storage.cache_root()
