"""An index that never answers costs its probe's seconds once and is left out of pip's calls.
The seconds it bounds are the probe's timeout, spent waiting, not computing: with two seconds of
slack it runs beside the other test worker. The default builds' other states are in
test_default_builds.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from benchkit.history.builds import indexes


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An index that accepts connections and never answers (a firewall that drops replies)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/simple"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def test_an_index_that_does_not_answer_costs_seconds_once_and_is_left_out(silent_server: str) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    refused = f"http://127.0.0.1:{closed.getsockname()[1]}/simple"
    closed.close()  # nothing listens there: refused at once
    began = time.monotonic()
    choice = indexes.choose(["file:///nowhere/simple", silent_server, refused, silent_server])
    took = time.monotonic() - began
    assert choice.answering == ("file:///nowhere/simple",)
    assert [url for url, _ in choice.left_out] == [silent_server, refused]
    assert "no answer within 3 s" in choice.left_out[0][1]
    assert took < indexes.PROBE_TIMEOUT + 2, took
    again = time.monotonic()
    indexes.choose([silent_server])  # asked once per process
    assert time.monotonic() - again < 0.5
    env = indexes.pip_environ(choice)
    assert env == {"PIP_INDEX_URL": "file:///nowhere/simple", "PIP_EXTRA_INDEX_URL": " "}
    assert any("left out for this command" in note for note in choice.notes())
