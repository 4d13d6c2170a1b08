"""``python -m hindsight.devstack reset`` (``make reset``): everything ``make run`` stored for a
checkout is deleted, the servers' folder a root run keeps under /var/tmp included, and nothing
while that ``make run`` is running."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from hindsight.devstack import state
from hindsight.devstack.servers import reachable_base, running_as_root

ROOT = Path(__file__).resolve().parent.parent


def _stored(data_dir: Path, *, pid: int | None) -> Path:
    """What a run leaves: servers.json, the secret key and metrics in the data folder, the
    servers' data in their folder (the same one unless root). Returns the servers' folder."""
    (data_dir / "metrics").mkdir(parents=True)
    state.servers_write(data_dir, {"database_url": "postgresql://postgres@127.0.0.1:5/x",
                                   "redis_url": "redis://127.0.0.1:6/0", "pid": pid})
    state.secret_key_ensure(data_dir)
    servers = reachable_base(data_dir)
    for server in ("pg", "valkey"):
        (servers / server).mkdir(parents=True, exist_ok=True)
        (servers / server / "data").write_text("rows")
    return servers


def _reset(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hindsight.devstack", "reset"], cwd=ROOT,
        env={**os.environ, state.DATA_DIR_VARIABLE: str(data_dir)},
        capture_output=True, text=True, timeout=60)


def test_reset_removes_the_data_folder_and_the_servers_folder_of_a_root_run(
        tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    servers = _stored(data_dir, pid=None)  # a stopped run's record
    if running_as_root():
        assert servers.is_relative_to(Path("/var/tmp/hindsight-devstack"))
    try:
        done = _reset(data_dir)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not data_dir.exists() and not servers.exists()
        assert done.stdout.splitlines() == list(dict.fromkeys(
            [f"[hindsight] removed {data_dir}", f"[hindsight] removed {servers}"]))
        again = _reset(data_dir)
        assert again.returncode == 0
        assert again.stdout.startswith("[hindsight] nothing to remove")
    finally:
        for folder in (data_dir, servers):
            shutil.rmtree(folder, ignore_errors=True)


def test_reset_refuses_in_one_line_while_make_run_runs(tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    # This test's process stands for the running `make run`: the recorded pid is alive.
    servers = _stored(data_dir, pid=os.getpid())
    try:
        done = _reset(data_dir)
        assert done.returncode == 2
        assert done.stdout.splitlines() == [
            f"[hindsight] `make run` is running for this checkout (pid {os.getpid()}): stop it "
            "(Ctrl-C) first; nothing was removed"]
        assert (data_dir / state.SECRET_KEY_FILE).exists() and (servers / "pg" / "data").exists()
        assert json.loads((data_dir / state.SERVERS_FILE).read_text())["pid"] == os.getpid()
    finally:
        for folder in (data_dir, servers):
            shutil.rmtree(folder, ignore_errors=True)
