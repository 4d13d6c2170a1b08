"""The worker probe (``hindsight worker probe``, ``operations.probe``, the worker's
``ProbeHeartbeat`` step): exit 0 while a real worker's event loop beats, 1 once it stopped, froze
or was killed (docs/operating.md, Probes)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from operations.probe import heartbeat_path, heartbeat_touch, probe_check
from tests.workers import REPO_ROOT


def probe(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as Kubernetes runs it: a process of its own, its exit code the answer."""
    return subprocess.run(
        [sys.executable, "-m", "hindsight.surfaces.cli", "worker", "probe", *args],
        cwd=REPO_ROOT, env={**os.environ, "HINDSIGHT_API_WORKER_PROBE_DIR": str(directory)},
        capture_output=True, text=True, timeout=60,
    )


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def beat_after(path: Path, since: float) -> bool:
    return path.exists() and path.stat().st_mtime > since


def older_than(path: Path, seconds: float) -> bool:
    return time.time() - path.stat().st_mtime > seconds


@pytest.mark.parametrize("pool", ["threads", "prefork"])
def test_the_probe_passes_for_a_running_worker_and_fails_once_it_stopped(
    worker_factory, tmp_path, pool
):
    directory = tmp_path / "probe"
    worker = worker_factory(env={"HINDSIGHT_API_WORKER_PROBE_DIR": str(directory)},
                            name=f"probed-{pool}", pool=pool)
    node = f"{worker.name}@{socket.gethostname()}"
    path = heartbeat_path(directory, node)
    wait_for(path.exists)  # the event loop's first beat
    named = probe(directory, "--node", node)
    assert named.returncode == 0, named.stderr
    assert f"worker {node}: alive" in named.stdout
    assert probe(directory).returncode == 0  # the one worker of the folder
    worker.stop()  # a warm shutdown takes its heartbeat with it
    assert not path.exists()
    gone = probe(directory, "--node", node)
    assert gone.returncode == 1 and "no heartbeat of worker" in gone.stderr


def test_a_frozen_worker_fails_the_probe_until_it_resumes_and_a_killed_one_for_good(
    worker_factory, tmp_path
):
    directory = tmp_path / "probe"
    worker = worker_factory(env={"HINDSIGHT_API_WORKER_PROBE_DIR": str(directory)}, name="frozen")
    node = f"{worker.name}@{socket.gethostname()}"
    path = heartbeat_path(directory, node)
    wait_for(path.exists)
    os.kill(worker.pid, signal.SIGSTOP)  # its loop stops turning; the process is still there
    try:
        # Its last beat grows old (a beat every 2 s: within 3 s of the freeze; a worker still
        # beating never gets there).
        wait_for(lambda: older_than(path, 3))
        frozen = probe(directory, "--node", node, "--max-age", "3")
        assert frozen.returncode == 1 and "older than 3 s" in frozen.stderr
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    resumed = time.time()
    wait_for(lambda: beat_after(path, resumed))
    assert probe(directory, "--node", node, "--max-age", "3").returncode == 0
    worker.kill()  # SIGKILL: nothing removes the file, it only grows old
    wait_for(lambda: older_than(path, 3))
    assert path.exists()
    assert probe(directory, "--node", node, "--max-age", "3").returncode == 1


def test_the_check_reads_the_named_node_or_the_youngest_heartbeat(tmp_path):
    old, young = heartbeat_path(tmp_path, "a@h"), heartbeat_path(tmp_path, "b@h")
    heartbeat_touch(old)
    heartbeat_touch(young)
    os.utime(old, (time.time() - 100, time.time() - 100))
    assert probe_check(tmp_path, node=None, max_age=30).message.startswith("worker b@h: alive")
    stale = probe_check(tmp_path, node="a@h", max_age=30)
    assert not stale.alive and "older than 30 s" in stale.message
    assert not probe_check(tmp_path, node="c@h", max_age=30).alive
    assert not probe_check(tmp_path / "empty", node=None, max_age=30).alive
