"""`make run` on a bare machine: embedded servers, API, worker and beat come up, Ctrl-C stops all."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from hindsight.devstack.servers import free_port, reachable_base

ROOT = Path(__file__).resolve().parent.parent


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait(predicate, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return json.loads(response.read())["status"] == "healthy"
    except OSError:
        return False


@pytest.mark.timeout(240)
def test_run_starts_embedded_servers_api_worker_and_beat_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("HINDSIGHT_API_DATABASE_URL", "HINDSIGHT_API_REDIS_URL")}
    env.update({"HINDSIGHT_DEVSTACK_DATA_DIR": str(data_dir), "HINDSIGHT_API_PORT": str(port)})
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "hindsight.devstack", "run", "--web-workers", "1",
             "--worker-concurrency", "1"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        _wait(lambda: _health(port) or process.poll() is not None, 180, "the API")
        assert process.poll() is None, log_path.read_text()[-3000:]
        servers = json.loads((data_dir / "servers.json").read_text())
        printed = subprocess.run(
            [sys.executable, "-m", "hindsight.devstack", "env"], cwd=ROOT, env=env,
            capture_output=True, text=True, check=True,
        ).stdout
        assert f"export HINDSIGHT_API_DATABASE_URL={servers['database_url']}" in printed
        assert f"export HINDSIGHT_API_REDIS_URL={servers['redis_url']}" in printed
        assert servers["database_url"].startswith("postgresql://postgres@127.0.0.1:")
        pg_port = int(servers["database_url"].rsplit(":", 1)[1].split("/")[0])
        redis_port = int(servers["redis_url"].rsplit(":", 1)[1].split("/")[0])

        from celery import Celery

        probe = Celery(broker=servers["redis_url"])
        replies = _wait(lambda: probe.control.ping(timeout=1.0), 90, "a worker to answer ping")
        assert replies
        _wait(lambda: b"beat: Starting" in log_path.read_bytes(), 60, "celery-beat")
        # Beat's schedules (declared in code, created at migrate) reach the worker through Redis.
        _wait(lambda: b"operations.release_due" in log_path.read_bytes()
              and b"succeeded" in log_path.read_bytes(), 90, "a beat task to run on the worker")

        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
        for closed in (port, pg_port, redis_port):
            assert not _listening(closed), f"port {closed} still open after Ctrl-C"
        assert b"[hindsight] stopped" in log_path.read_bytes()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(reachable_base(data_dir), ignore_errors=True)
