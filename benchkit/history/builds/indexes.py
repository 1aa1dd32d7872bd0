"""Package indexes that answer, found once per command.

pip retries an index that does not answer for every package it looks up (five retries,
each waiting up to pip's timeout), so one firewalled or offline index turns a lookup of
seconds into minutes. Each index a command would use (pip's configured ones, the ones a
user passes, PyTorch's CPU index that benchkit adds for a CPU install) is asked once, with
a short timeout; one that does not answer is left out of every pip call of the command,
and one line says so. Standard library only (``scripts/install.sh`` runs this before
benchkit's dependencies are installed).
"""

from __future__ import annotations

import dataclasses
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence

PYPI = "https://pypi.org/simple"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE_TIMEOUT = 3.0  # seconds: an index that answers at all answers within this

_probed: dict[str, str | None] = {}  # url -> why it is unreachable (None: it answers); per process


def why_unreachable(url: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """None when the index answers (any HTTP status counts), else the reason; asked once per process."""
    if url not in _probed:
        _probed[url] = _probe(url, timeout)
    return _probed[url]


def _probe(url: str, timeout: float) -> str | None:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https"):
        return None  # a local folder costs nothing to look in
    request = urllib.request.Request(url.rstrip("/") + "/torch/", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # it answered
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, socket.gaierror):
            return f"its host {parsed.hostname} is not known here"
        if isinstance(reason, TimeoutError):
            return f"no answer within {timeout:g} s"
        return str(reason)
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as e:
        return e.strerror or type(e).__name__


@dataclasses.dataclass(frozen=True)
class ConfiguredIndexes:
    """The index URLs pip's configuration (files and PIP_* variables) gives."""

    index_url: str
    extra_index_urls: tuple[str, ...]


def configured_indexes(
    python: str = sys.executable, env: Mapping[str, str] | None = None
) -> ConfiguredIndexes:
    """What ``pip config list`` says pip uses (the environment's values win over files')."""
    done = subprocess.run(
        [python, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        env=None if env is None else dict(env),
    )
    found: dict[tuple[str, str], str] = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^([^.=]*)\.(index-url|extra-index-url)='(.*)'$", line.strip())
        if match:
            found[(match.group(1), match.group(2))] = match.group(3)

    def value(key: str) -> str | None:
        for section in (":env:", "install", "global"):
            if (section, key) in found:
                return found[(section, key)]
        return None

    return ConfiguredIndexes(value("index-url") or PYPI, tuple((value("extra-index-url") or "").split()))


@dataclasses.dataclass(frozen=True)
class IndexChoice:
    """The indexes a command uses: those that answered, in pip's order (the first is pip's index)."""

    answering: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...]  # (url, why)

    def notes(self) -> list[str]:
        return [f"package index {url} left out for this command: {why}" for url, why in self.left_out]


def choose(urls: Sequence[str]) -> IndexChoice:
    answering, left_out = [], []
    for url in dict.fromkeys(urls):  # each once, order kept
        why = why_unreachable(url)
        if why is None:
            answering.append(url)
        else:
            left_out.append((url, why))
    return IndexChoice(tuple(answering), tuple(left_out))


def pip_environ(choice: IndexChoice) -> dict[str, str]:
    """PIP_* variables that make every pip of a command use exactly the answering indexes.

    pip reads its environment over its configuration files, so child processes (asv's
    environment builds, benchkit's build step) inherit the choice. Empty when nothing
    was left out (pip's own configuration stands).
    """
    if not choice.left_out:
        return {}
    if not choice.answering:
        return {"PIP_NO_INDEX": "1"}
    first, *extra = choice.answering
    # A blank value (not an empty one) replaces the configured extra indexes with none.
    return {"PIP_INDEX_URL": first, "PIP_EXTRA_INDEX_URL": " ".join(extra) or " "}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchkit.history.builds.indexes URL...``: print the URLs that answer (one line
    each) and say on stderr which did not; for scripts/install.sh."""
    urls = list(sys.argv[1:] if argv is None else argv)
    choice = choose(urls)
    for note in choice.notes():
        print(f"benchkit: {note}", file=sys.stderr)
    for url in choice.answering:
        print(url)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
