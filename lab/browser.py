"""Headless Chromium driven over the DevTools protocol on a pipe (no extra Python packages),
and a quiet static file handler to serve a published site to it on the loopback address.

`lab.bench_publish` times the site's pages with it; the site tests drive their pages with it.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """Headless Chromium over the DevTools protocol (``--remote-debugging-pipe``)."""

    # Chromium's first start with an empty HOME builds its font and profile caches: on a busy
    # 2-core machine that has taken over 30 s. A start that does not answer is retried once.
    STARTUP_TIMEOUT_S = 90.0
    STARTS = 2

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed (scripts/install.sh installs Debian's chromium)")
        for start in range(1, self.STARTS + 1):
            self._launch()
            try:
                target = self.call("Target.createTarget", timeout=self.STARTUP_TIMEOUT_S, url="about:blank")
                break
            except (TimeoutError, RuntimeError) as error:
                log = self._stop()
                if start == self.STARTS:
                    raise RuntimeError(
                        f"chromium did not start in {self.STARTS} tries of {self.STARTUP_TIMEOUT_S:.0f} s: "
                        f"{error}; its last output: {log[-2000:]!r}"
                    ) from error
        attached = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _launch(self) -> None:
        assert CHROMIUM is not None
        self.profile = tempfile.mkdtemp(prefix="benchkit-chromium-")
        self._log = tempfile.TemporaryFile()
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def pipes_on_3_and_4() -> None:  # Chromium reads commands on fd 3, answers on fd 4
            read_end, write_end = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                 f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"]  # fmt: skip
        self.proc = subprocess.Popen(
            [CHROMIUM, *flags],
            preexec_fn=pipes_on_3_and_4,
            close_fds=False,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []

    def _stop(self) -> str:
        """Ends Chromium (politely, then not), frees its pipes and profile; returns its output."""
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)
        self._log.seek(0)
        output = self._log.read().decode(errors="replace")
        self._log.close()
        return output

    def _read_message(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_chrome], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe (it crashed or exited)")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, session: bool = False, timeout: float = 30, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "document.readyState === 'complete'", timeout: float = 30) -> None:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for(ready, timeout)

    def wait_for(self, condition: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ready = self.evaluate(f"!!({condition})")
            except RuntimeError as error:  # the page is moving on (a redirect): not ready yet
                if "navigated or closed" not in str(error):
                    raise
                ready = False
            if ready:
                time.sleep(0.2)  # let late console messages arrive
                self.evaluate("1")
                return
            time.sleep(0.1)
        raise AssertionError(f"page never satisfied {condition!r}; errors: {self.errors()}")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads since the last `open`."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append(f"exception: {details.get('exception', {}).get('description') or details}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a)) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.loadingFailed" and not params.get("canceled"):
                found.append(f"load failed: {params.get('errorText')}")
        return found

    def requested_urls(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def assert_clean(self, page: str) -> None:
        """No console error, uncaught exception or failed load, and no request off this machine."""
        errors = self.errors()
        assert not errors, f"{page}: browser reported errors: {errors}"
        local = ("file://", "http://127.0.0.1", "data:")
        outside = [u for u in self.requested_urls() if not u.startswith(local)]
        assert not outside, f"{page}: requests left the machine: {outside}"

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", session=True, **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self._stop()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """A static file handler that keeps its request log off the test output."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """A static server of `directory` on the loopback address; yields its base URL."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
