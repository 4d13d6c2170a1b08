"""The suite's fork server for shared workers (tests/zygote.py): a forked child runs Celery's
command line with the request's environment, log and exit status, and a request whose
environment differs in a variable a preloaded library may read is refused."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.zygote import Zygote

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    server = Zygote(os.environ)
    yield server
    server.close()


def test_a_forked_child_runs_celerys_command_line_with_the_requests_log_and_exit_status(
    zygote: Zygote, tmp_path: Path,
) -> None:
    log = tmp_path / "version.log"
    child = zygote.spawn(["--version"], env={**os.environ, "HINDSIGHT_API_X": "own"},
                         cwd=REPO, log_path=log)
    assert child is not None
    assert child.wait(30) == 0
    import celery

    assert celery.__version__ in log.read_text()

    bad = zygote.spawn(["--no-such-option"], env=dict(os.environ), cwd=REPO,
                       log_path=tmp_path / "bad.log")
    assert bad is not None
    assert bad.wait(30) == 2  # click's usage error
    assert "No such option" in (tmp_path / "bad.log").read_text()


def test_a_request_with_another_library_variable_is_refused(
    zygote: Zygote, tmp_path: Path,
) -> None:
    env = {**os.environ, "OPENAI_BASE_URL": "http://elsewhere/v1"}
    assert zygote.spawn(["--version"], env=env, cwd=REPO, log_path=tmp_path / "x.log") is None


def test_waiting_on_a_running_child_times_out_and_a_kill_is_its_exit_status(
    zygote: Zygote, tmp_path: Path,
) -> None:
    # A worker whose broker never answers keeps retrying: it runs until killed.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hindsight.project.settings",
           "HINDSIGHT_API_REDIS_URL": "redis://127.0.0.1:1/0"}
    child = zygote.spawn(["-A", "hindsight", "worker", "--loglevel", "INFO"], env=env, cwd=REPO,
                         log_path=tmp_path / "worker.log")
    assert child is not None
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(1)
    assert os.getsid(child.pid) == child.pid  # its own session: a group to signal
    child.kill()
    assert child.wait(30) == -9
