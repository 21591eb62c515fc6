from __future__ import annotations

import subprocess
import sys

from ragrade.cli.main import main
from ragrade.errors import ConfigError
from ragrade.registry import lookup, register


def test_help_lists_verbs(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage" in out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert "ragrade" in capsys.readouterr().out


def test_unknown_verb_exits_2(capsys):
    assert main(["no-such-verb"]) == 2


def test_registry_did_you_mean():
    @register("widget", "sentence")
    def _make() -> str:
        return "x"

    try:
        lookup("widget", "sentense")
    except ConfigError as exc:
        assert "Did you mean 'sentence'" in str(exc)
        assert "valid choices: sentence" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected ConfigError")


def test_help_is_fast_and_imports_no_torch():
    code = "import sys; from ragrade.cli.main import app; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
