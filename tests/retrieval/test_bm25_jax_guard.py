"""bm25s imports JAX when it is installed and starts it on its default device; on a GPU that reserves 75% of
the card for JAX. ``import_bm25s`` keeps JAX on the CPU, allocating on demand, unless the user said otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import os, sys
{pre}
from ragrade.retrieval.bm25 import import_bm25s
import_bm25s()
print(os.environ.get("JAX_PLATFORMS"), os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))
"""


def _probe(pre: str = "", **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(pre=pre)], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@pytest.mark.parametrize(
    ("pre", "env", "want"),
    [
        ("", {}, "cpu false"),  # nothing set: JAX stays on the CPU and does not reserve memory
        ("", {"JAX_PLATFORMS": "cuda", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}, "cuda true"),  # the user's choice
        ("import types; sys.modules['jax'] = types.ModuleType('jax')", {}, "None false"),  # JAX already running
    ],
)
def test_import_bm25s_keeps_jax_off_the_gpu_unless_told(pre: str, env: dict[str, str], want: str) -> None:
    assert _probe(pre, **env) == want
