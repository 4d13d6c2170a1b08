"""The worker probe: a heartbeat file per worker node, and the check a probe command makes of it
(docs/operating.md, Probes).

A worker touches ``<dir>/<node name>.alive`` from its event loop (the timer of the loop that
consumes tasks and answers control messages: ``operations.workersteps.ProbeHeartbeat``) every
``HEARTBEAT_INTERVAL_SECONDS``, and removes it when it stops. So the file is young only while
that loop turns: a worker still starting, stopped, killed, frozen or stuck in its loop leaves no
file or an old one. The probe only reads the file's age: no broker, database or Django, so it
costs a Kubernetes exec a few milliseconds of work beyond starting Python.

Plain Python on purpose: the ``hindsight`` command line (a client that never loads Django) runs
the check.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HEARTBEAT_INTERVAL_SECONDS = 2.0
# What the probe accepts by default: several missed beats, well under a Kubernetes period.
DEFAULT_MAX_AGE_SECONDS = 30.0
SUFFIX = ".alive"


def probe_dir(configured: str) -> Path:
    """The heartbeat folder: ``HINDSIGHT_API_WORKER_PROBE_DIR``, else the system's temporary
    folder."""
    return Path(configured or tempfile.gettempdir())


def heartbeat_path(directory: Path, node: str) -> Path:
    """A node's file (``celery@host`` → ``celery@host.alive``; other characters become ``_``)."""
    return directory / (re.sub(r"[^A-Za-z0-9@._-]", "_", node) + SUFFIX)


def heartbeat_touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def heartbeat_remove(path: Path) -> None:
    path.unlink(missing_ok=True)


@dataclass(frozen=True)
class ProbeResult:
    alive: bool
    message: str


def probe_check(directory: Path, *, node: str | None, max_age: float) -> ProbeResult:
    """Whether ``node``'s heartbeat (without a node: the youngest in ``directory``, a container
    running one worker) is at most ``max_age`` seconds old."""
    if node:
        path = heartbeat_path(directory, node)
        candidates = [path] if path.exists() else []
        who = f"worker {node}"
    else:
        candidates = sorted(directory.glob("*" + SUFFIX), key=_mtime, reverse=True)
        who = "a worker"
    if not candidates:
        return ProbeResult(False, f"no heartbeat of {who} in {directory} (not started, stopped, "
                                  "or writing elsewhere: HINDSIGHT_API_WORKER_PROBE_DIR)")
    path = candidates[0]
    age = time.time() - _mtime(path)
    name = path.name.removesuffix(SUFFIX)
    if age > max_age:
        return ProbeResult(False, f"worker {name}: last heartbeat {age:.1f} s ago, older than "
                                  f"{max_age:g} s (its event loop stopped turning)")
    return ProbeResult(True, f"worker {name}: alive, last heartbeat {max(age, 0.0):.1f} s ago")


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:  # removed between the listing and now: a worker that stopped
        return 0.0
