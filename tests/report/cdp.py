"""A minimal Chrome DevTools Protocol client for browser tests (headless Chromium over a local websocket)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
]


class Browser:
    """Headless Chromium with one page, driven through CDP (flattened target sessions)."""

    def __init__(self, binary: str, profile: Path) -> None:
        websocket = pytest.importorskip("websocket")
        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and len(port_file.read_text().splitlines()) >= 2):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("Chromium did not open its DevTools port")
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=60)
        self.next_id = 0
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def send(self, method: str, params: dict[str, Any] | None = None, *, page: bool = False) -> dict[str, Any]:
        """Send one command (to the page's session when ``page``) and wait for its result."""
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if page:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, page=True)
        return res.get("result", {}).get("value")

    def wait_loaded(self) -> None:
        """Wait until the page's document is complete."""
        deadline = time.monotonic() + 30
        while self.eval("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise RuntimeError("page did not load")
            time.sleep(0.05)

    def open(self, url: str) -> None:
        """Navigate the page and wait for it."""
        self.send("Page.navigate", {"url": url}, page=True)
        time.sleep(0.2)
        self.wait_loaded()

    def reload(self) -> None:
        """Reload the page and wait until the new document (not the old one) has loaded."""
        self.eval("window.__before_reload = 1")
        self.send("Page.reload", {}, page=True)
        deadline = time.monotonic() + 30
        while self.eval("window.__before_reload === undefined && document.readyState === 'complete'") is not True:
            if time.monotonic() > deadline:
                raise RuntimeError("page did not reload")
            time.sleep(0.05)

    def key(self, key: str) -> None:
        """Press and release one key."""
        text = key if len(key) == 1 else ""
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": key, "text": text}, page=True)
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key}, page=True)

    def close(self) -> None:
        """Stop Chromium."""
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
