"""Stopping a long run cleanly: the first Ctrl-C (SIGINT) or SIGTERM stops it, a second one ends it at once.

The command line installs the handlers around every verb (:func:`handle_signals`). On the first signal:

- the main task of every event loop that :func:`ragrade.llm.base.run_sync` runs is cancelled: no new
  request is sent and requests in flight are dropped; the answers that already arrived are in the
  response cache (a cancelled batch flushes what it received) and every finished shard or batch is
  in the run's journal or results file;
- when no such loop runs (synchronous work in the main thread), :class:`Interrupted` is raised there
  at once, like a ``KeyboardInterrupt``.

The verb unwinds through its ``finally`` blocks (journals are closed) and the command prints one line,
``ragrade: interrupted: N of M done (UNIT); rerun the same command to resume``, and exits with code
130; N, M and UNIT are what the running stage last reported with :func:`progress`. A second signal
ends the process with ``os._exit(130)``: committed work stays (SQLite transactions are atomic; a torn
last line of an appended JSONL file is dropped when the run resumes, see
:func:`ragrade.io.drop_torn_tail`); what a runner registered with :func:`on_forced_exit` runs first (a run
folder's manifest says how the run ended).

One signal is one interruption: the same signal again within :data:`DUPLICATE_S` seconds of the first is
that signal delivered twice, not a second one. ``timeout -s INT`` sends its signal to the command and then
to the command's process group, so the command receives it twice, microseconds apart; a person's second
Ctrl-C comes later.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

EXIT_CODE = 130
RESUME = "rerun the same command to resume"
DUPLICATE_S = 0.1  # the same signal again within this time: one signal delivered twice (see the docstring)


class Interrupted(BaseException):
    """A signal stopped the run (a BaseException, so that ``except Exception`` never swallows it)."""


_stop = threading.Event()
_lock = threading.Lock()
_running: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
_keys = itertools.count()
_progress: dict[str, Any] = {"done": None, "total": None, "unit": ""}
_installed = False
_first: dict[str, Any] = {"signum": None, "at": 0.0}  # the signal that asked for the stop, and when
_forced: dict[int, Callable[[], None]] = {}  # what runs before a second signal ends the process


def requested() -> bool:
    """True once a stop was asked for (first SIGINT or SIGTERM)."""
    return _stop.is_set()


def check() -> None:
    """Raise :class:`Interrupted` when a stop was asked for (call between units of work)."""
    if _stop.is_set():
        raise Interrupted()


def progress(done: int, total: int, unit: str) -> None:
    """Record how far the running stage is (``done`` of ``total`` ``unit``), for the interruption message."""
    _progress.update(done=int(done), total=int(total), unit=str(unit))


def where() -> str:
    """How far the running stage is, as last reported (``N of M done (UNIT)``; empty when nothing was)."""
    return _where()


def _where() -> str:
    done, total, unit = _progress["done"], _progress["total"], _progress["unit"]
    if done is None or total is None:
        return ""
    return f"{done} of {total} done ({unit})" if unit else f"{done} of {total} done"


def message() -> str:
    """The one-line report of an interrupted run (without the ``ragrade:`` prefix)."""
    where = _where()
    return f"interrupted: {where}; {RESUME}" if where else f"interrupted; {RESUME}"


def register(loop: asyncio.AbstractEventLoop, task: asyncio.Future[Any]) -> int:
    """Let a stop cancel ``task`` (the main task of ``loop``); returns the key for :func:`unregister`."""
    with _lock:
        key = next(_keys)
        _running[key] = (loop, task)
    if _stop.is_set():  # asked before the loop started: it stops at its first step
        task.cancel()
    return key


def unregister(key: int) -> None:
    """Forget a loop registered with :func:`register`."""
    with _lock:
        _running.pop(key, None)


def _cancel_running() -> bool:
    """Cancel every registered task; True when there was one."""
    with _lock:
        running = list(_running.values())
    for loop, task in running:
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:  # the loop closed meanwhile
            continue
    return bool(running)


@contextmanager
def on_forced_exit(callback: Callable[[], None]) -> Iterator[None]:
    """Run ``callback`` before a second signal ends the process at once (while the block runs); its errors
    are ignored (the process is ending)."""
    with _lock:
        key = next(_keys)
        _forced[key] = callback
    try:
        yield
    finally:
        with _lock:
            _forced.pop(key, None)


def _run_forced() -> None:
    with _lock:
        callbacks = list(_forced.values())
    for callback in callbacks:
        with contextlib.suppress(BaseException):  # the process ends now whatever a callback does
            callback()


def _on_signal(signum: int, frame: Any) -> None:
    now = time.monotonic()
    if _stop.is_set():
        if signum == _first["signum"] and now - float(_first["at"]) < DUPLICATE_S:
            return  # the first signal delivered twice (`timeout` signals the command, then its group)
        where = _where()
        line = "ragrade: interrupted again, stopped at once" + (f": {where}" if where else "") + f"; {RESUME}\n"
        os.write(2, line.encode("utf-8", "replace"))
        _run_forced()
        os._exit(EXIT_CODE)
    _stop.set()
    _first.update(signum=signum, at=now)
    if not _cancel_running():
        raise Interrupted()


def reset() -> None:
    """Forget a stop request and the recorded progress (a new command starts)."""
    _stop.clear()
    _progress.update(done=None, total=None, unit="")
    _first.update(signum=None, at=0.0)


def install() -> None:
    """Install the handlers for the rest of the process (the console script: a signal while it exits still
    ends it with code 130); :func:`handle_signals` then leaves them in place."""
    global _installed
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _on_signal)
        _installed = True


@contextmanager
def handle_signals() -> Iterator[None]:
    """Install the SIGINT/SIGTERM handlers for the duration of a command (main thread only; re-entrant)."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    reset()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _on_signal)
    _installed = True
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _installed = False


__all__ = [
    "EXIT_CODE",
    "Interrupted",
    "check",
    "handle_signals",
    "install",
    "message",
    "on_forced_exit",
    "progress",
    "register",
    "requested",
    "reset",
    "unregister",
    "where",
]
