"""The in-process llama.cpp backend's thread count: the ``n_threads`` option, else ``$RAGRADE_LLAMACPP_THREADS``,
else the cores the process may run on (its CPU affinity, not the machine's core count)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ragrade.errors import ConfigError
from ragrade.llm.llamacpp import THREADS_VAR, thread_count, usable_cores


def test_threads_follow_the_affinity_not_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_VAR, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # a big machine, of which the process may use 3 cores
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 5, 9}, raising=False)
    assert usable_cores() == (3, "cpu affinity")
    assert thread_count() == (3, "cpu affinity")
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # an OS without affinity: the core count
    assert thread_count() == (64, "os.cpu_count()")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_a_process_pinned_to_one_core_uses_one_thread() -> None:
    code = (
        "import os\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "from ragrade.llm.llamacpp import thread_count\n"
        "print(*thread_count(), sep='|')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != THREADS_VAR}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1|cpu affinity"


def test_the_option_then_the_environment_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setenv(THREADS_VAR, " 3 ")
    assert thread_count() == (3, THREADS_VAR)
    assert thread_count(5) == (5, "n_threads option")  # the option wins over the environment
    monkeypatch.setenv(THREADS_VAR, "")  # set but empty: as if unset
    assert thread_count() == (2, "cpu affinity")


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
def test_a_bad_environment_value_names_the_variable_and_the_value(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(THREADS_VAR, value)
    with pytest.raises(ConfigError) as err:
        thread_count()
    assert str(err.value) == f"RAGRADE_LLAMACPP_THREADS must be a positive whole number of threads, got '{value}'"


def test_the_backend_reports_a_bad_environment_value_before_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ik_llama_cpp")
    from ragrade.llm import create_llm

    monkeypatch.setenv(THREADS_VAR, "0")
    with pytest.raises(ConfigError, match=r"^RAGRADE_LLAMACPP_THREADS must be .* got '0'$"):
        create_llm("llamacpp/gemma-3-270m", cache=False)
    with pytest.raises(ConfigError, match=r"^llamacpp: n_threads must be a positive whole number, got 0$"):
        create_llm("llamacpp/gemma-3-270m", cache=False, n_threads=0)  # the option is checked, not skipped
