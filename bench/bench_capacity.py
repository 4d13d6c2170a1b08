"""Capacity (on demand; not a test): many refreshes in flight per worker at little memory and CPU.

Starts ``make run``'s stack with its defaults (``python -m hindsight.devstack run``: embedded
PostgreSQL and Valkey, the API under gunicorn, one Celery worker with the settings' pool and
slots, celery-beat, the local embedder) in a scratch data folder, pointed at the scripted
OpenAI-compatible LLM of the chaos run (``bench.chaos_stack.ChaosLLM``) running in this process —
its CPU is the LLM's, not the stack's. Then:

1. ``--models`` (64) mental models in one bank (a few memories retained first), their first
   refreshes drained;
2. CPU per refresh: every model refreshed at once with the LLM answering at once (0 ms);
   CPU-seconds of the whole stack (every process of the tree: API, worker, beat, PostgreSQL,
   Valkey, and what they reaped) divided by the refreshes;
3. for each ``--llm-seconds`` (1, 2): every model refreshed at once with the LLM answering each
   call in that many seconds: refreshes/s (first POST → last completion), chat calls in flight
   at the peak (counted at the scripted server), LLM calls per refresh, peak PSS of the whole
   stack (``/proc/<pid>/smaps_rollup``, sampled every 0.2 s), refreshes/s per slot;
4. CPU per retained fact: ``--facts`` (200) items retained with LLM extraction (0 ms), CPU of
   the stack divided by the facts stored.
5. with ``--neighbours N``: the first ``--llm-seconds`` burst again, N asynchronous retains of
   50 items each submitted just before it (CPU-heavy work: their facts embedded, then
   consolidated): does the LLM-bound burst keep its pace beside them?

Each burst also counts PostgreSQL transactions and (ours) Valkey commands per refresh, and reports
where its refreshes spent their time (``timeline_seconds``: before the
first LLM request, between requests, after the last, the request log's insert wait), from the
rows they left.

It prints the figures next to upstream 1.1.0's as measured earlier on a 2-core machine like this one
(``WORKER_MAX_SLOTS=64``, ``UPSTREAM`` below) — or, with ``--upstream``, next to upstream
measured in the same run (``UpstreamCapacity``: hindsight-api-slim 1.1.0 from its own virtualenv,
``--upstream-venv``, against an embedded PostgreSQL and the same scripted LLM) — with the ratios
and the targets (≥ 5× refreshes/s, ≤ 1.0× peak PSS, ≤ 0.4× CPU per refresh).

    .venv/bin/python -m bench.bench_capacity
    .venv/bin/python -m bench.bench_capacity --upstream   # and upstream 1.1.0, same run
    .venv/bin/python -m bench.bench_capacity --models 32 --llm-seconds 1 --facts 50 --json out.json
    .venv/bin/python -m bench.bench_capacity --llm-seconds 1 --facts 0 --neighbours 8
    HINDSIGHT_API_WORKER_POOL=prefork HINDSIGHT_API_WORKER_CONCURRENCY=4 \\
        .venv/bin/python -m bench.bench_capacity --stack-args "--web-workers 2 --cpu-worker-concurrency 0"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.chaos_stack import ChaosLLM
from bench.harness import REPO, argument_parser, call_json, log, write_json
from fakes.llm_server import Reply
from hindsight.devstack.servers import free_port
from hindsight.devstack.stack import Stack, openai_compatible_env

# Upstream 1.1.0 measured earlier on a 2-core machine like this one (ranges of its runs); --upstream
# measures it in the same run instead, which is what a ratio should rest on.
UPSTREAM = {
    "cpu_per_refresh": (0.197, 0.204),
    "cpu_per_fact": (0.016, 0.018),
    "refreshes_per_second": (2.68, 3.45),
    "chat_in_flight": (27, 32),
    "llm_calls_per_refresh": (5.8, 6.6),
    "peak_pss_mb": (594, 698),
}
TICKS = os.sysconf("SC_CLK_TCK")
FACTS_PER_ITEM = 2  # what the scripted extraction answers for each retained item
NEIGHBOUR_ITEMS = 50  # items of each asynchronous retain beside a burst (--neighbours)


class CapacityLLM(ChaosLLM):
    """The chaos LLM with a fixed answer time, counting the chat calls in flight."""

    def __init__(self) -> None:
        super().__init__(delay=(0.0, 0.0))
        # Persistent connections, as a hosted LLM keeps them (and the stacks' clients reuse
        # them): the scripted server's own default, a connection per request (so a test's
        # scripted disconnect never poisons a pool), made each call connect — CPU a stack does
        # not spend against a provider. TCP_NODELAY: without it a kept-open connection held each
        # answer for the client's delayed ACK (the scripted server's history, 45 ms a call).
        handler = self.server._httpd.RequestHandlerClass
        self.server._httpd.RequestHandlerClass = type(
            "KeepAliveHandler", (handler,),
            {"protocol_version": "HTTP/1.1", "disable_nagle_algorithm": True})
        self.seconds = 0.0
        self.in_flight = 0
        self.peak = 0
        self.chat_calls = 0
        self.guard = threading.Lock()

    def respond(self, body: dict[str, Any]) -> Reply:
        with self.guard:
            self.in_flight += 1
            self.chat_calls += 1
            self.peak = max(self.peak, self.in_flight)
            seconds = self.seconds
        try:
            if seconds:
                time.sleep(seconds)
            fmt = body.get("response_format") or {}
            if (fmt.get("json_schema") or {}).get("name") == "retain_facts":
                return Reply.json({"facts": [
                    {"text": f"Fact {n} {uuid.uuid4().hex[:8]} about the team.",
                     "fact_type": "world", "occurred_start": None, "occurred_end": None}
                    for n in range(FACTS_PER_ITEM)]})
            return super().respond(body)
        finally:
            with self.guard:
                self.in_flight -= 1

    def phase(self, seconds: float) -> None:
        with self.guard:
            self.seconds, self.peak, self.chat_calls = seconds, 0, 0


# ---------------------------------------------------------------------------------------------
# The stack's processes: CPU and PSS


def _tree(root: int | list[int]) -> list[int]:
    """Every process of the tree(s) under ``root`` (a pid or several)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = list(root) if isinstance(root, list) else [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def _role(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    text = " ".join(argv)
    for needle, role in (("celery -A hindsight worker", "worker"), ("celery -A hindsight beat", "beat"),
                         ("hindsight-api", "upstream api+worker"),
                         ("gunicorn", "api"), ("hindsight.devstack", "devstack"),
                         ("postgres", "postgresql"), ("valkey", "valkey")):
        if needle in text:
            return role
    return os.path.basename(argv[0]) or "?"


def stack_cpu_by_role(root: int | list[int]) -> dict[str, float]:
    """CPU-seconds per role (``_role``) of the tree: utime + stime of every process, with what
    each reaped (cutime + cstime: PostgreSQL backends that exited, for one)."""
    roles: dict[str, float] = {}
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        role = _role(pid)
        roles[role] = roles.get(role, 0.0) + sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS
    return roles


def stack_cpu_seconds(root: int | list[int]) -> float:
    return sum(stack_cpu_by_role(root).values())


def stack_pss_mb(root: int | list[int]) -> float:
    total = 0
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total / 1024


def stack_breakdown(root: int | list[int]) -> dict[str, tuple[int, float]]:
    """PSS (MB) and process count per role of the stack."""
    roles: dict[str, tuple[int, float]] = {}
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                pss = next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
        count, mb = roles.get(_role(pid), (0, 0.0))
        roles[_role(pid)] = (count + 1, mb + pss / 1024)
    return {role: (n, round(mb, 1)) for role, (n, mb) in sorted(roles.items())}


class PssSampler(threading.Thread):
    def __init__(self, root: int | list[int]):
        super().__init__(daemon=True)
        self.root = root
        self.peak = 0.0
        self.at_peak: dict[str, tuple[int, float]] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            now = stack_pss_mb(self.root)
            if now > self.peak:
                self.peak, self.at_peak = now, stack_breakdown(self.root)
            self.stopped.wait(0.2)

    def stop(self) -> float:
        self.stopped.set()
        self.join()
        return self.peak


# ---------------------------------------------------------------------------------------------
# The run


class Capacity:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.llm = CapacityLLM()
        self.scratch = Path(tempfile.mkdtemp(prefix="capacity-"))
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.database_url = ""
        self.redis_url = ""  # the stack's Valkey (ours only): commands counted per refresh
        self.bank = f"cap-{uuid.uuid4().hex[:6]}"
        self.worker_line = ""
        self.models: list[str] = []

    # the stack ---------------------------------------------------------------------------------

    def start(self) -> None:
        env = {
            **os.environ,
            "HINDSIGHT_DEVSTACK_DATA_DIR": str(self.scratch),
            "HINDSIGHT_API_PORT": str(self.port),
            # With --scripted-embeddings, embeddings from the scripted server, as upstream-slim
            # (no local embedder) gets them in an --upstream run: the embedding CPU is then the
            # LLM's, not the stack's.
            **openai_compatible_env(self.llm.server.base_url, api_key="capacity",
                                    embeddings_model="scripted-embed"
                                    if self.args.scripted_embeddings else None),
            "HINDSIGHT_API_LLM_MAX_RETRIES": "0",
            "PYTHONUNBUFFERED": "1",
        }
        for name in ("HINDSIGHT_API_DATABASE_URL", "HINDSIGHT_API_REDIS_URL"):
            env.pop(name, None)  # make run's embedded servers
        out = open(self.scratch / "stack.log", "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hindsight.devstack", "run", *self.args.stack_args.split()],
            cwd=REPO, env=env,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        text = self.wait_healthy(180, ready=" ready.")
        servers = json.loads((self.scratch / "servers.json").read_text())
        self.database_url = servers["database_url"]
        self.redis_url = servers.get("redis_url", "")
        # The refresh worker's banner (make run's second worker, ``cpu@``, serves the CPU queue).
        banners: dict[str, str] = {}
        node = ""
        for line in text.splitlines():
            header = re.search(r"-{5,} (\S+@\S+) v\d", line)
            node = header.group(1) if header else node
            if ".> concurrency:" in line:
                banners.setdefault(node, line)
        worker = next((line for name, line in banners.items() if not name.startswith("cpu@")),
                      next(iter(banners.values()), ""))
        log(f"stack up ({worker.strip(' -.>')}); data in {self.scratch}")
        self.worker_line = worker.strip(" -.>")

    def wait_healthy(self, seconds: float, ready: str = "") -> str:
        """Until the stack's log says ``ready`` and ``/health`` answers; the log so far."""
        assert self.process is not None
        deadline = time.monotonic() + seconds
        while True:
            text = (self.scratch / "stack.log").read_text(errors="replace")
            if ready in text:
                try:
                    with urllib.request.urlopen(self.base_url + "/health", timeout=2):
                        return text
                except OSError:
                    pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the stack did not start:\n{text[-4000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self.llm.server.stop()
        if not self.args.keep:
            shutil.rmtree(self.scratch, ignore_errors=True)

    # The operations table and its key (upstream's differ).
    OPERATIONS, OPERATION_ID = "operations_operation", "id"
    # How the seed's memories are retained without the LLM.
    VERBATIM: dict[str, str] = {"strategy": "verbatim"}

    def slots(self) -> int:
        """Refreshes the stack runs at once (the worker's concurrency, from its banner)."""
        found = re.search(r"concurrency: (\d+)", self.worker_line)
        return int(found.group(1)) if found else 0

    def roots(self) -> list[int]:
        """The processes whose trees are the stack (``make run``'s: one, its supervisor)."""
        return [self.process.pid] if self.process else []

    # HTTP and the database ---------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return call_json(self.base_url, method, path, body, timeout=300)

    def wait_done(self, op_ids: list[str], timeout: float = 900) -> float:
        import psycopg

        deadline = time.monotonic() + timeout
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            while True:
                (left,) = conn.execute(
                    f"SELECT count(*) FROM {self.OPERATIONS} WHERE {self.OPERATION_ID} = "
                    "ANY(%s::uuid[]) AND status NOT IN ('completed', 'failed', 'cancelled')",
                    [op_ids]).fetchone()
                if left == 0:
                    done = time.monotonic()
                    (failed,) = conn.execute(
                        f"SELECT count(*) FROM {self.OPERATIONS} WHERE {self.OPERATION_ID} = "
                        "ANY(%s::uuid[]) "
                        "AND status <> 'completed'", [op_ids]).fetchone()
                    if failed:
                        log(f"warning: {failed} of {len(op_ids)} operations did not complete")
                    return done
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{left} operations still running after {timeout}s")
                time.sleep(0.05)

    def timeline(self, op_ids: list[str], started_wall: float) -> dict[str, Any]:
        """Where a burst's refreshes spent their time, from the rows they left: from the first
        POST to the first LLM request (the API, delivery, the claim and the pre-LLM reads),
        between LLM requests (the request log's row, recall, the next prompt), after the last
        (extraction-free: the fenced write and the completion), the LLM's own time, and the
        wait for the request log's insert (``ended_at`` is the insert's database clock;
        ``started_at`` + ``duration_ms`` the answer's arrival). Seconds, mean and max."""
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM o.completed_at), "
                "array_agg(extract(epoch FROM r.started_at) ORDER BY r.started_at), "
                "array_agg(r.duration_ms ORDER BY r.started_at), "
                "array_agg(extract(epoch FROM r.ended_at) ORDER BY r.started_at) "
                "FROM operations_operation o JOIN llm_llmrequest r ON r.operation_id = o.id "
                "WHERE o.id = ANY(%s::uuid[]) GROUP BY o.id", [op_ids]).fetchall()
        parts: dict[str, list[float]] = {"before_first_llm": [], "between_llm": [],
                                          "after_last_llm": [], "llm": [], "log_insert_wait": []}
        for completed, starts, durations, ends in rows:
            arrived = [float(s) + d / 1000 for s, d in zip(starts, durations, strict=True)]
            parts["before_first_llm"].append(float(starts[0]) - started_wall)
            parts["between_llm"] += [float(starts[i + 1]) - float(ends[i])
                                     for i in range(len(starts) - 1)]
            parts["after_last_llm"].append(float(completed) - float(ends[-1]))
            parts["llm"] += [d / 1000 for d in durations]
            parts["log_insert_wait"] += [float(e) - a for e, a in zip(ends, arrived, strict=True)]
        return {name: {"mean": round(sum(v) / len(v), 3), "max": round(max(v), 3)}
                for name, v in parts.items() if v}

    def counters(self) -> dict[str, int]:
        """PostgreSQL transactions (committed and rolled back) of the stack's database and
        Valkey commands served, so far: a burst reports them per refresh (the bench's own
        polling of the operations is a few of the transactions)."""
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as conn:
            (xacts,) = conn.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                "WHERE datname = current_database()").fetchone()
        out = {"pg_transactions": int(xacts)}
        if self.redis_url:
            import redis

            stats = redis.Redis.from_url(self.redis_url).info("commandstats")
            out["redis_commands"] = sum(int(v["calls"]) for v in stats.values())
        return out

    def count_memories(self) -> int:
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as conn:
            (n,) = conn.execute("SELECT count(*) FROM banks_memoryunit WHERE bank_id = %s",
                                [self.bank]).fetchone()
        return int(n)

    # phases ------------------------------------------------------------------------------------

    def seed(self) -> None:
        self.call("PUT", f"/v1/default/banks/{self.bank}", {"name": self.bank})
        self.call("POST", f"/v1/default/banks/{self.bank}/memories", {"items": [
            {"content": f"The team ships release {i} on Fridays after review.", "tags": ["team"],
             **self.VERBATIM} for i in range(8)]})
        self.llm.phase(0.0)
        op_ids = []
        for i in range(self.args.models):
            mm_id = f"m{i}-{uuid.uuid4().hex[:4]}"
            answer = self.call("POST", f"/v1/default/banks/{self.bank}/mental-models", {
                "id": mm_id, "name": mm_id, "tags": ["team"],
                "source_query": f"How does the team work? [chaos:{mm_id}]"})
            self.models.append(mm_id)
            op_ids.append(answer["operation_id"])
        self.wait_done(op_ids)
        log(f"{len(self.models)} models created, first refreshes drained")

    def worker_pid(self) -> int:
        return next(p for p in _tree(self.roots()) if _role(p) == "worker")

    def burst(self, llm_seconds: float, rounds: int = 1) -> dict[str, Any]:
        """Every model refreshed at once, ``rounds`` times in a row (CPU summed over them)."""
        self.llm.phase(llm_seconds)
        root = self.roots()
        spy = None
        if self.args.profile and llm_seconds == 0.0:
            # py-spy (pip install py-spy) samples the worker while the refreshes run.
            spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record",
                                    "-p", str(self.worker_pid()), "-o", self.args.profile,
                                    "-f", "raw", "-r", "200", "--nonblocking"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        cpu_before = stack_cpu_seconds(root)
        roles_before = stack_cpu_by_role(root)
        counters_before = self.counters()
        sampler = PssSampler(root)
        sampler.start()
        started = time.monotonic()
        op_ids: list[str] = []
        for _ in range(rounds):
            round_wall = time.time()
            with ThreadPoolExecutor(16) as pool:
                answers = list(pool.map(
                    lambda mm: self.call("POST", f"/v1/default/banks/{self.bank}/mental-models/"
                                                  f"{mm}/refresh", {}), self.models))
            ids = [a["operation_id"] for a in answers]
            done = self.wait_done(ids)
            op_ids += ids
        elapsed = done - started
        cpu = stack_cpu_seconds(root) - cpu_before
        roles_after = stack_cpu_by_role(root)
        counters = {name: round((value - counters_before[name]) / len(op_ids), 2)
                    for name, value in self.counters().items()}
        peak_pss = sampler.stop()
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
            log(f"worker profile written to {self.args.profile}")
        return {
            "llm_seconds": llm_seconds,
            "refreshes": len(op_ids),
            "elapsed_seconds": round(elapsed, 2),
            "refreshes_per_second": round(len(op_ids) / elapsed, 2),
            "chat_in_flight_peak": self.llm.peak,
            "llm_calls_per_refresh": round(self.llm.chat_calls / len(op_ids), 2),
            "cpu_per_refresh": round(cpu / len(op_ids), 4),
            "cpu_per_refresh_by_role": {
                role: round((roles_after[role] - roles_before.get(role, 0.0)) / len(op_ids), 4)
                for role in roles_after},
            **{f"{name}_per_refresh": value for name, value in counters.items()},
            "peak_pss_mb": round(peak_pss, 1),
            "peak_pss_by_role": {role: f"{n} process(es), {mb} MB"
                                 for role, (n, mb) in sampler.at_peak.items()},
            # The last round's.
            "timeline_seconds": self.timeline(ids, round_wall),
        }

    def facts(self) -> dict[str, Any]:
        self.llm.phase(0.0)
        root = self.roots()
        before_rows = self.count_memories()
        cpu_before = stack_cpu_seconds(root)
        per_request = 20
        for start in range(0, self.args.facts, per_request):
            self.call("POST", f"/v1/default/banks/{self.bank}/memories", {"items": [
                {"content": f"On day {start + i} Alice reviewed the budget and Bob shipped the "
                            f"release {uuid.uuid4().hex[:6]}.", "tags": ["team"]}
                for i in range(min(per_request, self.args.facts - start))]})
        cpu = stack_cpu_seconds(root) - cpu_before
        stored = self.count_memories() - before_rows
        return {"items": self.args.facts, "facts_stored": stored,
                "cpu_per_fact": round(cpu / max(stored, 1), 4)}

    def neighbours(self, llm_seconds: float) -> dict[str, Any]:
        """The burst at ``llm_seconds`` again, with ``--neighbours`` asynchronous retains of
        ``NEIGHBOUR_ITEMS`` items each submitted just before it: CPU-heavy work (extraction's
        facts embedded by the local embedder, their rows written, consolidation after) in the
        same worker as the LLM-bound refreshes. The refreshes' figures, and when the retains
        (not their consolidation) finished."""
        items = NEIGHBOUR_ITEMS
        retains = []
        for n in range(self.args.neighbours):
            answer = self.call("POST", f"/v1/default/banks/{self.bank}/memories", {
                "async": True, "items": [
                    {"content": f"Neighbour {n}.{i}: Carol moved the review {uuid.uuid4().hex[:6]}"
                                f" to Thursday and Dave wrote the notes.", "tags": ["team"]}
                    for i in range(items)]})
            retains.append(answer["operation_id"])
        started = time.monotonic()
        burst = self.burst(llm_seconds)
        burst["neighbour_retains"] = len(retains)
        burst["neighbour_items_each"] = items
        burst["neighbour_retains_done_after_seconds"] = round(
            self.wait_done(retains) - started, 2)
        return burst

    def run(self) -> dict[str, Any]:
        try:
            self.start()
            self.seed()
            result: dict[str, Any] = {"worker": self.worker_line, "slots": self.slots(),
                                      "load": os.getloadavg()[0]}
            instant = self.burst(0.0, rounds=self.args.instant_rounds)
            log(f"LLM 0 ms: {instant}")
            result["cpu_per_refresh"] = instant["cpu_per_refresh"]
            result["instant"] = instant
            result["bursts"] = []
            for seconds in self.args.llm_seconds:
                burst = self.burst(seconds)
                log(f"LLM {seconds:g} s: {burst}")
                result["bursts"].append(burst)
            if self.args.neighbours and self.args.llm_seconds:
                beside = self.neighbours(self.args.llm_seconds[0])
                log(f"LLM {self.args.llm_seconds[0]:g} s beside {self.args.neighbours} retains: "
                    f"{beside}")
                result["beside_retains"] = beside
            facts = self.facts() if self.args.facts else {}
            if facts:
                result["facts"] = facts
                log(f"facts: {facts}")
            result["load_after"] = os.getloadavg()[0]
            return result
        finally:
            self.stop()


class UpstreamCapacity(Capacity):
    """The same workload against upstream hindsight-api-slim 1.1.0 (``--upstream``), installed
    in a virtualenv of its own outside the project (``--upstream-venv``): its one process (API
    with the worker inside, ``HINDSIGHT_API_WORKER_MAX_SLOTS=64``) against an embedded
    PostgreSQL started the way ``make run`` starts ours (same package, pgvector, durable), the
    same scripted LLM, embeddings from the scripted server (upstream-slim has no local embedder:
    its embedding CPU is the LLM's here, ours is the stack's), reranker ``rrf`` (no model), the
    seed's memories retained in its ``chunks`` mode (no LLM). No CPU per fact (its extraction
    asks with a schema of its own)."""

    OPERATIONS, OPERATION_ID = "async_operations", "operation_id"
    VERBATIM: dict[str, str] = {}

    def __init__(self, args: argparse.Namespace):
        super().__init__(args)
        # The PostgreSQL of make run's stack (durable); upstream runs no broker of ours.
        self.servers = Stack(self.scratch, valkey=False, durable=True)
        self.pg = self.servers.pg

    def start(self) -> None:
        self.servers.start_servers()
        self.database_url = self.servers.database_url
        server = self.llm.server.base_url
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("HINDSIGHT_")},
            "HINDSIGHT_API_DATABASE_URL": self.pg.url,
            "HINDSIGHT_API_HOST": "127.0.0.1", "HINDSIGHT_API_PORT": str(self.port),
            "HINDSIGHT_API_LLM_PROVIDER": "openai", "HINDSIGHT_API_LLM_BASE_URL": server,
            "HINDSIGHT_API_LLM_API_KEY": "capacity", "HINDSIGHT_API_LLM_MODEL": "scripted",
            "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL": server,
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_API_KEY": "capacity",
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": "scripted-embed",
            "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS": "384",
            "HINDSIGHT_API_RERANKER_PROVIDER": "rrf",
            "HINDSIGHT_API_RETAIN_EXTRACTION_MODE": "chunks",
            "HINDSIGHT_API_WORKER_MAX_SLOTS": "64",
        }
        env.pop("VIRTUAL_ENV", None)
        out = open(self.scratch / "stack.log", "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(
            [str(Path(self.args.upstream_venv) / "bin" / "hindsight-api")], env=env,
            cwd=self.scratch, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_healthy(300)
        self.worker_line = "upstream hindsight-api-slim 1.1.0, WORKER_MAX_SLOTS=64"
        log(f"upstream up; data in {self.scratch}")

    def roots(self) -> list[int]:
        pids = [self.process.pid] if self.process else []
        if self.pg is not None and self.pg.process is not None:
            pids.append(self.pg.process.pid)
        return pids

    def stop(self) -> None:
        keep, self.args.keep = self.args.keep, True  # the data folder outlives the server
        try:
            super().stop()
        finally:
            self.args.keep = keep
            self.servers.stop()
            if not keep:
                self.servers.remove_data()

    def slots(self) -> int:
        return 64

    def timeline(self, op_ids: list[str], started_wall: float) -> dict[str, Any]:
        return {}  # read from our tables only

    def facts(self) -> dict[str, Any]:
        return {}


def _ratio(ours: float, theirs: tuple[float, float]) -> str:
    low, high = theirs
    return f"{ours / high:.2f}–{ours / low:.2f}×"


def _measured(theirs: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Upstream's figures of this run, in ``UPSTREAM``'s shape (a range of one value)."""
    one = next(b for b in theirs["bursts"] if b["llm_seconds"] == 1.0)
    figures = {"cpu_per_refresh": theirs["cpu_per_refresh"],
               "refreshes_per_second": one["refreshes_per_second"],
               "chat_in_flight": one["chat_in_flight_peak"],
               "llm_calls_per_refresh": one["llm_calls_per_refresh"],
               "peak_pss_mb": one["peak_pss_mb"]}
    # Not measured there (its extraction asks with a schema of its own): the issue's.
    return {"cpu_per_fact": UPSTREAM["cpu_per_fact"],
            **{key: (value, value) for key, value in figures.items()}}


def report(result: dict[str, Any]) -> str:
    theirs = result.get("upstream")
    reference = _measured(theirs) if theirs else UPSTREAM
    source = "upstream 1.1.0 (this run)" if theirs else "upstream 1.1.0 (earlier runs)"
    lines = [f"worker: {result['worker']}; load average (1 min) {result['load']:.1f} before, "
             f"{result['load_after']:.1f} after"]
    if theirs:
        lines.append(f"upstream: {theirs['worker']}; load average (1 min) {theirs['load']:.1f} "
                     f"before, {theirs['load_after']:.1f} after")
    lines += ["", f"{'':38} {'here':>10} {source:>26} {'ratio':>14}"]

    def row(name: str, ours: float, key: str) -> None:
        low, high = reference[key]
        span = f"{low:g}" if low == high else f"{low:g}–{high:g}"
        ratio = f"{ours / high:.2f}×" if low == high else _ratio(ours, reference[key])
        lines.append(f"{name:38} {ours:>10g} {span:>26} {ratio:>14}")

    row("CPU-seconds per refresh (LLM 0 ms)", result["cpu_per_refresh"], "cpu_per_refresh")
    if "facts" in result:
        row("CPU-seconds per retained fact", result["facts"]["cpu_per_fact"], "cpu_per_fact")
    slots = result.get("slots") or 0
    for burst in result["bursts"]:
        s = burst["llm_seconds"]
        lines.append(f"-- {burst['refreshes']} models refreshed at once, LLM {s:g} s per call")
        if s == 1.0:
            row("  refreshes/s", burst["refreshes_per_second"], "refreshes_per_second")
            row("  chat calls in flight at the peak", burst["chat_in_flight_peak"], "chat_in_flight")
            row("  LLM calls per refresh", burst["llm_calls_per_refresh"], "llm_calls_per_refresh")
            row("  peak PSS of the whole stack (MB)", burst["peak_pss_mb"], "peak_pss_mb")
        else:
            for key in ("refreshes_per_second", "chat_in_flight_peak", "llm_calls_per_refresh",
                        "peak_pss_mb"):
                lines.append(f"  {key:36} {burst[key]:>10g}")
        lines.append(f"  {'CPU-seconds per refresh':36} {burst['cpu_per_refresh']:>10g}")
        for key, label in (("pg_transactions_per_refresh", "PostgreSQL transactions per refresh"),
                           ("redis_commands_per_refresh", "Valkey commands per refresh")):
            if key in burst:
                lines.append(f"  {label:36} {burst[key]:>10g}")
        if slots:
            # Refreshes/s per slot × LLM seconds: the same at 1 s and 2 s when the LLM, not the
            # stack, bounds a slot (the ideal is 1 / LLM calls per refresh).
            per_slot = burst["refreshes_per_second"] / slots
            lines.append(f"  {'refreshes/s per slot (× LLM s)':36} {per_slot:>10.4f}"
                         f" ({per_slot * s:.4f})")
    one = next((b for b in result["bursts"] if b["llm_seconds"] == 1.0), None)
    if one:
        rps_low = one["refreshes_per_second"] / reference["refreshes_per_second"][1]
        pss_high = one["peak_pss_mb"] / reference["peak_pss_mb"][0]
        cpu_high = result["cpu_per_refresh"] / reference["cpu_per_refresh"][0]
        against = "upstream measured in this run" if theirs else "upstream's least favourable run"
        lines += ["", f"targets against {against}: "
                  f"refreshes/s ≥ 5× ({rps_low:.2f}×: {'met' if rps_low >= 5 else 'NOT met'}), "
                  f"peak PSS ≤ 1.0× ({pss_high:.2f}×: {'met' if pss_high <= 1.0 else 'NOT met'}), "
                  f"CPU/refresh ≤ 0.4× ({cpu_high:.2f}×: {'met' if cpu_high <= 0.4 else 'NOT met'})"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.bench_capacity", __doc__)
    parser.add_argument("--models", type=int, default=64)
    parser.add_argument("--llm-seconds", type=lambda s: [float(x) for x in s.split(",")],
                        default=[1.0, 2.0])
    parser.add_argument("--facts", type=int, default=200)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the scratch data folder")
    parser.add_argument("--stack-args", default="",
                        help="extra arguments of `python -m hindsight.devstack run`")
    parser.add_argument("--instant-rounds", type=int, default=3,
                        help="bursts with the LLM at 0 ms that CPU per refresh is averaged over")
    parser.add_argument("--profile", help="py-spy's samples of the worker during the 0 ms "
                                          "bursts, to this file (collapsed stacks)")
    parser.add_argument("--neighbours", type=int, default=0,
                        help="then the first --llm-seconds burst again beside this many "
                             f"asynchronous retains of {NEIGHBOUR_ITEMS} items (CPU-heavy work "
                             "in the same worker)")
    parser.add_argument("--scripted-embeddings", action="store_true",
                        help="our stack embeds through the scripted server (OpenAI-compatible) "
                             "instead of make run's local embedder: upstream's setup here")
    parser.add_argument("--upstream", action="store_true",
                        help="also measure upstream hindsight-api-slim 1.1.0 in this run (after "
                             "ours) and print the ratios to it instead of the earlier figures")
    parser.add_argument("--upstream-venv",
                        help="with --upstream: the virtualenv upstream is installed in (pip install "
                             "hindsight-api-slim==1.1.0; never a dependency of this project)")
    args = parser.parse_args(argv)
    if args.upstream and not args.upstream_venv:
        parser.error("--upstream needs --upstream-venv: the virtualenv hindsight-api-slim 1.1.0 is in")
    # A SIGTERM (a timeout, a kill) unwinds through each run's ``finally``, which stops the stack
    # it started in a session of its own — which would otherwise run on after this process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = Capacity(args).run()
    if args.upstream:
        result["upstream"] = UpstreamCapacity(args).run()
    print(report(result))
    write_json(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
