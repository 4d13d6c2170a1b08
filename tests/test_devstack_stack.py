"""``hindsight.devstack.stack``: the one way `make run`, ``bench/`` and the tests start the service.

What it starts is checked where it runs: ``tests/test_devstack_run.py`` (``make run``),
``tests/test_chaos_bounded.py`` (the chaos stack, with its kills and restarts) and the worker
tests (``tests/workers.py``'s pool). Here: what its commands and environment are, and that
nothing else in the project starts a server, gunicorn or a Celery worker its own way.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from hindsight.devstack.stack import (
    Stack,
    api_command,
    beat_command,
    openai_compatible_env,
    worker_command,
)

ROOT = Path(__file__).resolve().parent.parent
# A process or server started other than through the stack module (a command line of its own).
OWN_START_UP = re.compile(
    r'"gunicorn", "hindsight\.wsgi|"celery", "-A", "hindsight", "(?:worker|beat)"'
    r"|\bEmbedded(?:Postgres|Valkey)\(")
# The few that must: the stack's own modules; a side of the hot-path comparison runs an older
# checkout's code, which may predate the stack; a worker whose configuration must stop its
# start-up; a broker a test kills and restarts on its own port.
ALLOWED = {
    "hindsight/devstack/stack.py", "hindsight/devstack/servers.py", "bench/bench_hotpaths.py",
    "tests/test_config.py", "tests/operations/test_broker_restart.py",
}


def test_nothing_but_the_stack_module_starts_servers_gunicorn_workers_or_beat() -> None:
    offenders = []
    for folder in ("hindsight", "mentalmodels", "operations", "bench", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative not in ALLOWED and OWN_START_UP.search(path.read_text()):
                offenders.append(relative)
    assert offenders == []


def test_the_api_runs_under_gunicorn_conf_with_its_control_socket_in_the_stack_data(
    tmp_path: Path,
) -> None:
    command = api_command(bind="127.0.0.1:1", workers=2, control_socket=tmp_path / "g.ctl")
    assert command[command.index("--config") + 1] == "python:hindsight.project.gunicorn_conf"
    assert command[command.index("--workers") + 1] == "2"
    assert command[-2:] == ["--control-socket", str(tmp_path / "g.ctl")]
    # A path sockaddr_un cannot hold: no socket rather than the shared ~/.gunicorn default.
    long_path = tmp_path / ("x" * 120) / "g.ctl"
    assert api_command(bind="127.0.0.1:1", control_socket=long_path)[-1] == "--no-control-socket"


def test_a_worker_alone_on_its_queue_skips_its_peers_and_a_deployment_worker_does_not() -> None:
    alone = worker_command(queue="q1", concurrency=3, pool="threads", name="w1")
    for pair in (["-Q", "q1"], ["--concurrency", "3"], ["-P", "threads"], ["-n", "w1@%h"]):
        assert " ".join(pair) in " ".join(alone)
    assert "--without-mingle" in alone
    # make run's: the settings' queue, pool and slots, gossip and heartbeats (Flower sees it).
    assert worker_command(alone=False) == [sys.executable, "-m", "celery", "-A", "hindsight",
                                           "worker", "--loglevel", "INFO"]
    assert beat_command(max_interval=1)[-2:] == ["--max-interval", "1"]


def test_a_stack_given_urls_starts_no_server_and_every_process_gets_one_secret_key(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("HINDSIGHT_API_SECRET_KEY", raising=False)
    with Stack(tmp_path, database_url="postgresql://postgres@127.0.0.1:1/x",
               redis_url="redis://127.0.0.1:1/0",
               env=openai_compatible_env("http://127.0.0.1:2/v1", api_key="k")) as stack:
        stack.start_servers()  # nothing to start: returns at once
    assert (stack.pg, stack.valkey) == (None, None)
    assert stack.env["HINDSIGHT_API_DATABASE_URL"] == "postgresql://postgres@127.0.0.1:1/x"
    assert stack.env["HINDSIGHT_API_REDIS_URL"] == "redis://127.0.0.1:1/0"
    assert stack.env["HINDSIGHT_API_LLM_BASE_URL"] == "http://127.0.0.1:2/v1"
    assert stack.env["HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL"] == "http://127.0.0.1:2/v1"
    assert len(stack.env["HINDSIGHT_API_SECRET_KEY"]) >= 50
    given = Stack(tmp_path, env={"HINDSIGHT_API_SECRET_KEY": "kept-" + "k" * 50})
    assert given.env["HINDSIGHT_API_SECRET_KEY"] == "kept-" + "k" * 50
    assert given.pg is not None and given.valkey is not None
    assert given.env["HINDSIGHT_API_DATABASE_URL"] == given.pg.url
