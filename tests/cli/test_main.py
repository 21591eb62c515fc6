from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ragrade import __version__
from ragrade.cli.main import main
from ragrade.errors import ConfigError
from ragrade.registry import lookup, register

# the verbs a user reaches from `ragrade --help` (README's command list); a verb module that stops registering fails
VERBS = ("corpus", "chunk", "index", "search", "ask", "retrieval-eval", "compare", "run", "demo", "report", "label")
GROUPS = ("cache", "llm", "exam", "irt", "robust", "qa", "judge")


def test_help_lists_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage: ragrade [OPTIONS] COMMAND [ARGS]..." in out
    listed = {m.group(1) for m in re.finditer(r"^\W*([a-z][a-z-]+)\s{2,}\S", out, flags=re.M)}
    assert set(VERBS + GROUPS) <= listed, sorted(set(VERBS + GROUPS) - listed)
    assert {"--version", "--dry-run", "--quiet"} <= set(re.findall(r"--[a-z-]+", out))


def test_group_help_lists_its_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exam", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage: ragrade exam [OPTIONS] COMMAND [ARGS]..." in out
    assert {"generate", "take"} <= {m.group(1) for m in re.finditer(r"^\W*([a-z][a-z-]+)\s{2,}\S", out, flags=re.M)}


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ragrade {__version__}\n"


def test_unknown_verb_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-verb"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    # one line, naming the verb and where to find help; no traceback
    assert cap.err == "ragrade: error: No such command 'no-such-verb'. (see 'ragrade --help')\n"


def test_bad_option_of_a_verb_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--no-such-option"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "No such option: --no-such-option" in err and "(see 'ragrade report --help')" in err


def test_registry_did_you_mean() -> None:
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


def test_help_is_fast_and_imports_no_torch() -> None:
    code = "import sys; from ragrade.cli.main import app; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
