"""`make run` on a bare machine: embedded servers, API, worker and beat come up, Ctrl-C stops all.

One start serves several checks (a start costs tens of seconds on two cores): static files and
offline docs under gunicorn, one secret key for every process, manage.py finding the servers by
itself, no noise in the log, and on the next run the same ports.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from hindsight.devstack.servers import free_port, reachable_base
from hindsight.devstack.stack import Stack, StartupFailed
from tests.test_docs import page_assets

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE_VARIABLES = ("HINDSIGHT_API_DATABASE_URL", "HINDSIGHT_API_REDIS_URL",
                     "HINDSIGHT_API_SECRET_KEY")


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


def _bare_env(data_dir: Path, port: int) -> dict[str, str]:
    """A shell with nothing exported but where this test keeps its dev data (no URLs, no key)."""
    env = {k: v for k, v in os.environ.items() if k not in OUTSIDE_VARIABLES}
    env.update({"HINDSIGHT_DEVSTACK_DATA_DIR": str(data_dir), "HINDSIGHT_API_PORT": str(port)})
    return env


def _start(env: dict[str, str], log_path: Path, web_workers: int = 1,
           cpu_worker: bool = True) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "hindsight.devstack", "run", "--web-workers", str(web_workers),
             "--worker-concurrency", "1", *([] if cpu_worker else ["--cpu-worker-concurrency", "0"])],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )


def _manage_started(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """``manage.py ARGS`` started, not awaited: each sets Django up for seconds, which the
    start-up test spends on its other checks of the stack meanwhile."""
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finished(started: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = started.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        started.kill()
        started.communicate()
        raise
    return subprocess.CompletedProcess(started.args, started.returncode, stdout, stderr)


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return _finished(_manage_started(env, *args))


def _get(url: str, opener: urllib.request.OpenerDirector | None = None
         ) -> tuple[int, str, bytes]:
    opener = opener or urllib.request.build_opener()
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


def _admin_login(base: str, username: str, password: str) -> tuple[urllib.request.OpenerDirector,
                                                                    http.cookiejar.CookieJar]:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect())
    status, _, body = _get(f"{base}/admin/login/", opener)
    assert status == 200
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', body)
    assert token
    form = urllib.parse.urlencode({"username": username, "password": password,
                                   "csrfmiddlewaretoken": token.group(1).decode(),
                                   "next": "/admin/"}).encode()
    request = urllib.request.Request(f"{base}/admin/login/", data=form,
                                     headers={"Referer": f"{base}/admin/login/"})
    try:
        opener.open(request, timeout=10)
    except urllib.error.HTTPError as exc:
        assert exc.code == 302, exc.read()[:500]  # logged in: redirected to /admin/
    assert any(c.name == "sessionid" for c in jar)
    return opener, jar


def _inspect(probe: Any) -> Any:
    """Asks the run's two workers (the ping census found them): the answer is back once both
    replied, not after a fixed collection window."""
    return probe.control.inspect(timeout=10.0, limit=2)


def _retained_on_the_cpu_worker(base_url: str, probe: Any) -> None:
    """An async retain runs on the CPU queue's worker, none on the other (Celery's own count of
    the tasks each worker ran)."""
    request = urllib.request.Request(
        f"{base_url}/v1/default/banks/devstack-cpu/memories", method="POST",
        data=json.dumps({"async": True, "items": [
            {"content": "The CPU worker stores this.", "strategy": "verbatim"}]}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        operation_id = json.loads(response.read())["operation_id"]
    _wait(lambda: _get(f"{base_url}/v1/default/banks/devstack-cpu/operations/{operation_id}")[2]
          .find(b'"completed"') >= 0, 60, "the async retain to complete")
    ran = {node.split("@")[0]: stats["total"].get("operations.run", 0)
           for node, stats in (_inspect(probe).stats() or {}).items()}
    assert ran == {"celery": 0, "cpu": 1}, ran


# In a manage.py shell of another shell, nothing exported: the system checks, those that read
# the database included (as `manage.py check --database default`: a failure raises, the shell
# exits non-zero), pass against this run's servers, and a session the API made is valid here.
# One Django start for both.
STACK_PROBE = """
from django.core.management import call_command
call_command("check", databases=["default"])
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
session = SessionStore(session_key={key!r})
user = get_user_model().objects.get(pk=session.get("_auth_user_id"))
print("OK" if session.get("_auth_user_hash") == user.get_session_auth_hash() else "BAD")
"""


@pytest.mark.timeout(420)
def test_run_starts_embedded_servers_api_worker_and_beat_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    port = free_port()
    env = _bare_env(data_dir, port)
    log_path = tmp_path / "run.log"
    base_url = f"http://127.0.0.1:{port}"
    # Someone else holds the preferred PostgreSQL port during the first run, as another
    # checkout's `make run` would: the run takes another port, and must keep it next time.
    blocker = socket.socket()
    try:
        blocker.bind(("127.0.0.1", 54329))
        blocker.listen()
        blocked = True
    except OSError:
        # Already taken by something else (another checkout's `make run`): the effect is the
        # same while it holds it, but it may let go before this run binds.
        blocker.close()
        blocked = False
    process = _start(env, log_path, web_workers=2)
    # manage.py runs of another shell, started at once and awaited where their results count.
    manage_runs: list[subprocess.Popen[str]] = []
    try:
        _wait(lambda: _health(port) or process.poll() is not None, 180, "the API")
        assert process.poll() is None, log_path.read_text()[-3000:]
        blocker.close()
        servers = json.loads((data_dir / "servers.json").read_text())
        assert servers["pid"] == process.pid
        # manage.py in another shell, nothing exported: it finds this run's servers and key.
        making = _manage_started({**env, "DJANGO_SUPERUSER_PASSWORD": "pw-for-test-only"},
                                 "createsuperuser", "--noinput", "--username", "admin",
                                 "--email", "admin@example.com")
        manage_runs.append(making)
        printed = subprocess.run(
            [sys.executable, "-m", "hindsight.devstack", "env"], cwd=ROOT, env=env,
            capture_output=True, text=True, check=True,
        ).stdout
        assert f"export HINDSIGHT_API_DATABASE_URL={servers['database_url']}" in printed
        assert f"export HINDSIGHT_API_REDIS_URL={servers['redis_url']}" in printed
        assert servers["database_url"].startswith("postgresql://postgres@127.0.0.1:")
        pg_port = int(servers["database_url"].rsplit(":", 1)[1].split("/")[0])
        redis_port = int(servers["redis_url"].rsplit(":", 1)[1].split("/")[0])
        if blocked:
            assert pg_port != 54329

        from celery import Celery

        # Not the current app: later tests in this process publish through current_app.
        probe = Celery(broker=servers["redis_url"], set_as_current=False)
        # Two workers: the LLM-bound one, and the CPU queue's (retain, consolidation) that also
        # consumes the webhook queue (deliveries).
        def all_answer() -> list[dict[str, Any]] | None:
            replies = probe.control.ping(timeout=1.0)
            return replies if len(replies) == 2 else None

        replies = _wait(all_answer, 90, "the two workers to answer ping")
        assert {node.split("@")[0] for reply in replies for node in reply} == {"celery", "cpu"}
        # A shell that ran `eval "$(… env)"` publishes to, and would consume, the very queues
        # this run's two workers consume.
        exported = dict(re.findall(r"^export (\w+)=(\S+)$", printed, re.MULTILINE))
        consumed = {node.split("@")[0]: [queue["name"] for queue in queues] for node, queues in
                    (_inspect(probe).active_queues() or {}).items()}
        assert consumed == {"celery": [exported["HINDSIGHT_API_TASK_QUEUE"]],
                            "cpu": [exported["HINDSIGHT_API_WORKER_CPU_QUEUE"],
                                    exported["HINDSIGHT_API_TASK_QUEUE"] + ".webhooks"],
                            }, consumed
        _retained_on_the_cpu_worker(base_url, probe)

        made = _finished(making)
        assert made.returncode == 0, made.stderr
        # One key for every process: a session the API made is valid in another process
        # (a manage.py shell), and every request of the session is let in, whichever of the
        # two gunicorn workers answers it.
        opener, jar = _admin_login(base_url, "admin", "pw-for-test-only")
        session_key = next(c.value for c in jar if c.name == "sessionid")
        probing = _manage_started(env, "shell", "-c", STACK_PROBE.format(key=session_key))
        manage_runs.append(probing)
        statuses = [_get(f"{base_url}/admin/", opener)[0] for _ in range(12)]
        assert statuses == [200] * 12

        _wait(lambda: b"beat: Starting" in log_path.read_bytes(), 60, "celery-beat")
        # Beat's schedules (declared in code, created at migrate) reach the worker through Redis.
        _wait(lambda: b"operations.release_due" in log_path.read_bytes()
              and b"succeeded" in log_path.read_bytes(), 90, "a beat task to run on the worker")

        # Static files and the offline docs, served by the gunicorn `make run` started.
        status, content_type, css = _get(f"{base_url}/static/admin/css/base.css")
        assert (status, content_type.split(";")[0]) == (200, "text/css") and css
        for page in ("/docs", "/docs/"):
            status, _, html = _get(base_url + page)
            assert status == 200, page
            assets = page_assets(html.decode())
            assert assets
            for asset in assets:
                assert asset.startswith("/static/"), asset
                assert _get(base_url + asset)[0] == 200, asset

        probed = _finished(probing)
        assert probed.returncode == 0, probed.stderr
        assert probed.stdout.strip().splitlines()[-1:] == ["OK"], probed.stdout + probed.stderr

        # gunicorn's control socket lives with this checkout's data, not in ~/.gunicorn.
        socket_path = reachable_base(data_dir) / "gunicorn.ctl"
        if len(str(socket_path)) <= 100:
            assert socket_path.exists()

        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
        for closed in (port, pg_port, redis_port):
            assert not _listening(closed), f"port {closed} still open after Ctrl-C"
        log = log_path.read_bytes()
        assert b"[hindsight] stopped" in log
        # Announced once gunicorn had bound the port, not while it was still starting.
        assert log.index(b"Listening at: " + base_url.encode()) < log.index(b"serving on")
        for noise in (b"XDG_RUNTIME_DIR", b"superuser privileges", b"No directory at"):
            assert noise not in log, noise

        # Nothing runs now: manage.py says so in one line.
        stopped = _manage(env, "check")
        assert stopped.returncode != 0
        assert len(stopped.stderr.strip().splitlines()) == 1, stopped.stderr
        assert "make run" in stopped.stderr and "Traceback" not in stopped.stderr

        # The next run gets the same ports (they are free again), so exported URLs stay right.
        process = _start(env, log_path, cpu_worker=False)
        _wait(lambda: _health(port) or process.poll() is not None, 180, "the API again")
        assert process.poll() is None, log_path.read_text()[-3000:]
        again = json.loads((data_dir / "servers.json").read_text())
        assert (again["database_url"], again["redis_url"]) == (servers["database_url"],
                                                               servers["redis_url"])
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
    finally:
        blocker.close()
        for started in manage_runs:
            if started.poll() is None:
                started.kill()
                started.communicate()
        if process.poll() is None:
            # Its own shutdown stops gunicorn, the worker, beat and the servers; a SIGKILL
            # would leave them all running, orphaned.
            process.send_signal(signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(reachable_base(data_dir), ignore_errors=True)


def test_manage_py_with_nothing_running_and_no_url_fails_in_one_line(tmp_path: Path) -> None:
    env = _bare_env(tmp_path / "nothing-here", free_port())
    result = _manage(env, "check")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "HINDSIGHT_API_DATABASE_URL" in lines[0] and "make run" in lines[0]
    assert result.stdout == ""


def test_manage_py_ignores_a_servers_file_whose_run_has_stopped(tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    data_dir.mkdir()
    # A stopped run's record: the URLs stay (for the ports) but no pid.
    (data_dir / "servers.json").write_text(json.dumps({
        "database_url": f"postgresql://postgres@127.0.0.1:{free_port()}/hindsight",
        "redis_url": "redis://127.0.0.1:1/0", "pid": None,
    }))
    result = _manage(_bare_env(data_dir, free_port()), "migrate")
    assert result.returncode == 2 and "make run" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_commands_without_a_database_run_with_nothing_running(tmp_path: Path) -> None:
    result = _manage(_bare_env(tmp_path / "nothing-here", free_port()), "help")
    assert result.returncode == 0, result.stderr


def _run_at_once(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A run expected to stop by itself (a refusal), its output captured."""
    return subprocess.run([sys.executable, "-m", "hindsight.devstack", "run"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def _nothing_started(data_dir: Path) -> None:
    # No secret key made, no PostgreSQL or Valkey data folder: the run stopped before them.
    assert not data_dir.exists(), sorted(data_dir.rglob("*"))
    assert not reachable_base(data_dir).exists()


def test_run_refuses_a_taken_api_port_in_one_line_before_starting_anything(tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        result = _run_at_once(_bare_env(data_dir, port))
        took = time.monotonic() - started
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        f"[hindsight] port {port} on 127.0.0.1 is in use: stop what holds it, or set "
        "HINDSIGHT_API_PORT to a free port"]
    _nothing_started(data_dir)
    assert took < 20, f"{took:.1f}s: it must not wait for servers to start"


def test_run_with_an_invalid_setting_says_the_check_in_one_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "devdata"
    result = _run_at_once({**_bare_env(data_dir, free_port()),
                           "HINDSIGHT_API_LLM_PROVIDER": "bogus"})
    assert result.returncode != 0
    said = (result.stdout + result.stderr).strip().splitlines()
    assert len(said) == 1, said
    assert "HINDSIGHT_API_LLM_PROVIDER" in said[0] and "bogus" in said[0], said
    assert "Traceback" not in result.stdout + result.stderr
    _nothing_started(data_dir)


def test_a_check_failing_at_migrate_is_its_own_line_not_a_traceback(tmp_path: Path) -> None:
    # Checks that need the database run only at migrate, after the servers: what reaches the
    # user is each failed check's line (here the database is unreachable, so the embedding
    # profile check fails too), not the subprocess's traceback.
    stack = Stack(tmp_path, database_url=f"postgresql://postgres@127.0.0.1:{free_port()}/x",
                  redis_url="redis://127.0.0.1:1/0",
                  env={"HINDSIGHT_API_LLM_PROVIDER": "bogus", "HINDSIGHT_API_SECRET_KEY": "k"})
    with pytest.raises(StartupFailed) as failed:
        stack.migrate()
    lines = str(failed.value).splitlines()
    assert any(line.startswith("HINDSIGHT_API_LLM_PROVIDER: (hindsight.E001) ")
               for line in lines), lines
    assert all("(hindsight.E" in line for line in lines), lines
    assert "Traceback" not in str(failed.value)
