"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on a pipe.

``--remote-debugging-pipe`` makes Chromium read protocol messages from file descriptor 3 and
write its answers and events to descriptor 4, each a JSON object ended by a NUL byte: no
driver, no port, no extra package. ``Page`` opens one local file, collects console and log
errors, evaluates expressions and takes a full-page screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

DEADLINE = 60.0
"""Seconds any one protocol answer may take."""


def executable() -> str | None:
    """Debian's ``chromium``, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One tab of a headless Chromium showing ``url``, loaded (the ``load`` event has fired)."""

    def __init__(self, url: str, width: int = 1280) -> None:
        binary = executable()
        assert binary, "chromium is not installed (apt-get install chromium)"
        self.profile = tempfile.mkdtemp(prefix="km-chromium-")
        to_browser, self.writer = os.pipe()
        self.reader, from_browser = os.pipe()
        # Above every descriptor the child's set-up might use, so the two dup2 below cannot collide.
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser, from_browser)]
        for fd in (to_browser, from_browser):
            os.close(fd)

        def wire() -> None:  # in the child: its descriptors 3 and 4 are the two pipes
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--no-first-run", f"--user-data-dir={self.profile}", "--hide-scrollbars", "about:blank"]  # fmt: skip
        self.process = subprocess.Popen(
            args, pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for fd in ends:
            os.close(fd)
        self.buffer, self.next_id, self.events = b"", 0, []
        self.errors: list[str] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session=True)
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_event("Page.loadEventFired")

    def send(self, message: dict[str, Any]) -> None:
        os.write(self.writer, json.dumps(message).encode() + b"\0")

    def receive(self, deadline: float) -> dict[str, Any]:
        """The next message from Chromium (events are recorded and console errors kept)."""
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, "chromium did not answer in time"
            ready, _, _ = select.select([self.reader], [], [], left)
            if ready:
                chunk = os.read(self.reader, 1 << 20)
                assert chunk, "chromium closed its pipe"
                self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        self.note(message)
        return message

    def note(self, message: dict[str, Any]) -> None:
        """Keep every console error, uncaught exception and error log entry."""
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(json.dumps(params.get("args")))
        elif method == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params.get("exceptionDetails")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(params["entry"].get("text", ""))
        if method:
            self.events.append(method)

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        """Send one command; its result (a protocol error fails the test)."""
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.send(message)
        deadline = time.monotonic() + DEADLINE
        while True:
            answer = self.receive(deadline)
            if answer.get("id") == self.next_id:
                assert "error" not in answer, answer
                result: dict[str, Any] = answer.get("result", {})
                return result

    def wait_event(self, method: str) -> None:
        """Wait for an event (already seen counts)."""
        deadline = time.monotonic() + DEADLINE
        while method not in self.events:
            self.receive(deadline)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        params = {"expression": expression, "returnByValue": True}
        result = self.call("Runtime.evaluate", params, session=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page (beyond the viewport) at ``path``."""
        params = {"format": "png", "captureBeyondViewport": True}
        data = self.call("Page.captureScreenshot", params, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        """Close the browser and remove its profile."""
        try:
            self.send({"id": 0, "method": "Browser.close"})
            self.process.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self.writer)
            os.close(self.reader)
            shutil.rmtree(self.profile, ignore_errors=True)
