"""Chaos run (on demand; a bounded ``--quick`` version runs in ``make test``).

Starts its own stack — embedded PostgreSQL and Valkey on free ports, the API under gunicorn,
``--workers`` Celery worker processes of ``--concurrency`` prefork children each, a real
``celery beat`` — with the scripted OpenAI-compatible LLM (``bench.chaos_stack.ChaosLLM``) answering
every call in 50–300 ms. Then, for ``--duration`` seconds, over the HTTP API:

- ``--models`` mental models (full and delta, some tagged, some ``refresh_after_consolidation``,
  some on ``refresh_cron`` with a rate floor) are refreshed in rounds (``--refreshes`` each);
- retains keep arriving (a third of them ``async``), each carrying a unique marker;
- some models are PATCHed (``source_query``) while a refresh of theirs runs;
- faults: SIGKILL of worker children (each holding a refresh, caught waiting on its LLM; some
  right after a PATCH superseded that refresh, ``--edit-kills``) and of whole worker processes
  (a new one is started each time), one broker restart (Valkey killed, its queue lost with it)
  and one PostgreSQL crash-restart (immediate shutdown). A worker process that ends by itself
  (a broker restart can end one) is named in the faults and replaced at once.

Then it drains and prints the report; every count marked ``must be 0`` that is not makes the
exit code 1. What each count means:

- lost: an operation id the API handed out that the database does not know;
- stuck: an operation not final once the drain timeout passed;
- torn: a model whose ``content`` is not one whole answer the LLM gave for it (full mode), or
  ``content != render(document)`` when a structured document is stored and
  ``mentalmodels.document.structure`` exists (delta mode, once it is built);
- overlapping refreshes: two chat requests for one model in flight at once at the scripted
  LLM, both clients alive (see ``ScriptedLLMServer.track_concurrency``);
- lost edits: a PATCH sent during a refresh (while one of its LLM requests is held, so it
  cannot finish first) that the final model does not reflect (its ``source_query``, and the
  query its last refresh ran with);
- duplicate effects: a retain marker stored in more than one memory row; lost retains: an
  acknowledged retain (sync 200, or async operation ``completed``) whose marker is in no row;
- failed although completed: an operation id that reads ``failed`` through the API although
  the operation it names as carrying its work completed;
- LLM requests per refresh operation, drain time, kill → recovered claim (p50/max): the time
  from a SIGKILL to the moment the lease of the refresh the killed process held is claimed by
  a live process (or the operation is final); after an edit, to the claim of the follow-up the
  edit queued.
- the LLM outage section (unless ``--no-outage``): the provider answers 503 to every refresh;
  requests per operation (must be ≤ 1 + MAX_RETRIES), requests while the models are paused
  (must be 0), and whether a manual refresh afterwards completes every one of them.

``--cuts`` runs network cuts instead (``CutRun``): one worker reaches PostgreSQL and the broker
only through ``bench.netcut`` proxies. ``--cut-count`` times, while that worker runs a refresh
(caught waiting on its LLM), both proxies hold its bytes for ``--cut-seconds`` (with
``--heal-when-done``: until a peer has taken the refresh over and finished it, at most that long)
— longer than its key lock's TTL and the sweep's silence threshold — then deliver them, late.
Its peers must take the refresh over while it is cut off; its late statements must never land:
no answer the LLM gave the cut worker for that model from the cut on may ever be the model's
content (a stale write); it must serve again after the heal (LLM answers to it, for other
models); nothing may be stuck after the drain. Reported: the takeover times (cut → the refresh's lease named by a peer,
or the operation final).

    .venv/bin/python -m bench.chaos                   # 50 models, 150 s, 3 workers
    .venv/bin/python -m bench.chaos --quick           # the bounded size (make test runs it)
    .venv/bin/python -m bench.chaos --models 20 --duration 60 --workers 2 --seed 3 --json r.json
    .venv/bin/python -m bench.chaos --cuts --quick    # one cut, at most 12 s (make test runs it)
    .venv/bin/python -m bench.chaos --review --quick  # the load and faults with review on

``--review`` runs the same load and faults with every model under review (``ReviewRun``; the
banks' ``mental_model_review``, proposals expiring after ``--proposal-ttl`` seconds): each refresh
that would change a page writes a proposal instead, and a reviewer thread approves most of the
pending ones it finds and rejects the rest (with a reason) while the faults happen; after the
drain it approves what is left. Must be 0 besides the counts above: proposals lost (one the API
listed that the database does not hold; an approval or a rejection the API acknowledged that the
proposal does not show), proposals applied twice (two versions recorded for one approval), two
pending at once for a model, a proposal whose refresh did not complete, and a page that is not
the last proposal approved for it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos_stack import CUT_SENDER, MAX_RETRIES, ChaosLLM, CutLinks, Stack
from bench.harness import FINAL, argument_parser, log, write_json

TAGS = ["team", "ops", "eng", "sales"]
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def holder_pid(holder: object) -> int:
    """The worker process of a lease holder: ``host:pid`` (older) or ``host:pid:task-id``."""
    parts = str(holder).split(":")
    return int(parts[1]) if len(parts) >= 3 else int(parts[-1])


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class Tracker:
    ops: dict[str, dict[str, Any]] = field(default_factory=dict)  # op id → {kind, model, bank}
    retains_sync: list[str] = field(default_factory=list)  # markers acknowledged
    retains_async: dict[str, str] = field(default_factory=dict)  # marker → op id
    retains_unacknowledged: list[str] = field(default_factory=list)
    patches: dict[tuple[str, str], str] = field(default_factory=dict)  # (bank, model) → query
    http_errors: Counter[str] = field(default_factory=Counter)
    kills: list[dict[str, Any]] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Chaos:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = random.Random(args.seed)
        self.scratch = Path(tempfile.mkdtemp(prefix="chaos-"))
        self.llm = ChaosLLM()
        self.stack = Stack(self.scratch, args.concurrency, self.llm,
                           durable=args.postgres_restart, pool=args.pool)
        self.t = Tracker()
        self.banks = ["chaos-a", "chaos-b"]
        self.models: list[tuple[str, str, str]] = []  # (bank, id, kind)
        self.stop_load = threading.Event()
        self.ended: set[int] = set()  # worker processes whose end is known (killed here)

    # HTTP ------------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None, what: str = "") -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.stack.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            with self.t.lock:
                self.t.http_errors[f"{what or method} {exc.code}"] += 1
            return None
        except OSError as exc:
            with self.t.lock:
                self.t.http_errors[f"{what or method} {type(exc).__name__}"] += 1
            return None

    def track(self, answer: Any, kind: str, bank: str, model: str | None = None) -> str | None:
        op_id = (answer or {}).get("operation_id")
        if op_id:
            with self.t.lock:
                self.t.ops.setdefault(op_id, {"kind": kind, "bank": bank, "model": model})
        return op_id

    # workload --------------------------------------------------------------------------------

    def retain(self, bank: str, *, asynchronous: bool) -> None:
        marker = f"rt-{uuid.uuid4().hex}"
        tags = self.rng.sample(TAGS, self.rng.randint(0, 2))
        answer = self.call("POST", f"/v1/default/banks/{bank}/memories", {
            "items": [{"content": f"The {tags[0] if tags else 'whole'} team noted {marker}.",
                       "tags": tags, "strategy": "verbatim"}],
            "async": asynchronous}, what="retain")
        with self.t.lock:
            if answer is None:
                self.t.retains_unacknowledged.append(marker)
            elif asynchronous:
                self.t.retains_async[marker] = answer.get("operation_id") or ""
        if answer is not None and asynchronous:
            self.track(answer, "retain", bank)
        elif answer is not None:
            with self.t.lock:
                self.t.retains_sync.append(marker)

    def create_models(self) -> None:
        for bank in self.banks:
            self.call("PUT", f"/v1/default/banks/{bank}", {"name": bank})
            for _ in range(5):
                self.retain(bank, asynchronous=False)
        kinds = ["full", "full-tagged", "delta", "after-consolidation", "cron"]
        for i in range(self.args.models):
            bank = self.banks[i % len(self.banks)]
            kind = kinds[i % len(kinds)]
            mm_id = f"mm-{i:03d}"
            trigger: dict[str, Any] = {}
            tags: list[str] = []
            if kind != "full":
                tags = [TAGS[i % len(TAGS)]]
            if kind == "delta":
                trigger = {"mode": "delta"}
            elif kind == "after-consolidation":
                trigger = {"refresh_after_consolidation": True}
            elif kind == "cron":
                trigger = {"refresh_cron": "* * * * *", "min_refresh_interval_seconds": 5}
            body = {"id": mm_id, "name": f"Model {i}", "tags": tags, "trigger": trigger,
                    "source_query": f"What does the team do? [chaos:{mm_id}]"}
            answer = self.call("POST", f"/v1/default/banks/{bank}/mental-models", body,
                               what="create")
            if answer is None:
                raise RuntimeError(f"could not create {mm_id}: {self.t.http_errors}")
            self.track(answer, "refresh", bank, mm_id)
            self.models.append((bank, mm_id, kind))

    def retain_loop(self) -> None:
        while not self.stop_load.wait(self.rng.uniform(0.2, 0.6)):
            self.retain(self.rng.choice(self.banks), asynchronous=self.rng.random() < 0.33)

    def refresh_loop(self, deadline: float) -> None:
        """Rounds of bursts: every model asked once, then a third of them asked again while
        their refresh runs (a follower queues behind it, the case a kill turns into a merge)."""
        rounds = self.args.refreshes
        span = max(0.0, deadline - time.monotonic()) / max(rounds, 1)
        for _ in range(rounds):
            round_end = time.monotonic() + span
            order = list(self.models)
            self.rng.shuffle(order)
            again = self.rng.sample(order, len(order) // 3)
            for batch in (order, again):
                for bank, mm_id, _kind in batch:
                    if self.stop_load.is_set():
                        return
                    body = {"mode": "full"} if self.rng.random() < 0.1 else None
                    answer = self.call("POST", f"/v1/default/banks/{bank}/mental-models/{mm_id}"
                                       "/refresh", body, what="refresh")
                    self.track(answer, "refresh", bank, mm_id)
                time.sleep(0.5)
            while time.monotonic() < round_end and not self.stop_load.is_set():
                time.sleep(0.1)

    def patch_loop(self) -> None:
        count = 0
        while not self.stop_load.wait(self.rng.uniform(1.0, 3.0)):
            if count >= max(2, len(self.models) // 5):
                return
            running = self.db_rows(
                "SELECT bank_id, mental_model_id, id::text FROM operations_operation "
                "WHERE status = 'processing' AND mental_model_id IS NOT NULL")
            if not running:
                continue
            bank, mm_id, op_id = self.rng.choice(running)
            # Processing when read is not running when the PATCH arrives: the refresh may have
            # finished in between (then the edit owes no refresh,
            # docs/behaviour.md#edits-during-a-running-refresh, and the model keeps its last
            # refresh's query). So the model's LLM requests are held, and the PATCH is sent only
            # once one is: a refresh waiting on its LLM cannot finish meanwhile.
            held = self.llm.hold(mm_id)
            try:
                if not self._wait_held(held, op_id):
                    continue
                query = f"What does the team do now, v{uuid.uuid4().hex[:6]}? [chaos:{mm_id}]"
                answer = self.call("PATCH", f"/v1/default/banks/{bank}/mental-models/{mm_id}",
                                   {"source_query": query}, what="patch")
            finally:
                self.llm.release(mm_id)
            if answer is not None:
                count += 1
                with self.t.lock:
                    self.t.patches[(bank, mm_id)] = query

    def _wait_held(self, held: threading.Event, op_id: str, timeout: float = 5.0) -> bool:
        """Until a held LLM request of the refresh's model says it runs (True), or the
        operation is no longer processing (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if held.wait(0.05):
                return True
            status = self.db_rows("SELECT status FROM operations_operation WHERE id = %s",
                                  [op_id])
            if not status or status[0][0] != "processing":
                return held.is_set()
        return held.is_set()

    # faults ----------------------------------------------------------------------------------

    def kill(self, whole: bool) -> None:
        target = None if whole else self._hold_a_refresh()
        try:
            self._kill(whole, target)
        finally:
            if target is not None:
                self.llm.release(target[1])

    def _hold_a_refresh(self, timeout: float = 20.0) -> tuple[str, str] | None:
        """A model (bank, id) whose refresh is running with one of its LLM requests held.

        A child chosen at random, or one that merely held a refresh when looked up, may hold
        none when the signal lands (the refreshes come in bursts and take about a second), and
        the run would then say nothing about recovering a killed refresh. So a model's LLM
        requests are held, a refresh of it is asked for, and the kill waits until one of its
        requests arrives: the refresh cannot end before it is released, after the kill."""
        with self.llm.lock:
            free = [m for m in self.models if m[2] == "full" and m[1] not in self.llm.holds]
        if not free:
            return None
        bank, mm_id, _kind = self.rng.choice(free)
        if self.refresh_held(bank, mm_id, timeout) is not None:
            return bank, mm_id
        return None

    def refresh_held(self, bank: str, mm_id: str, timeout: float) -> str | None:
        """Hold the model's LLM requests and ask for its refresh: its operation id once one of
        its requests is held (the refresh cannot end before ``llm.release``); else None, and
        the hold released."""
        held = self.llm.hold(mm_id)
        answer = self.call("POST", f"/v1/default/banks/{bank}/mental-models/{mm_id}/refresh",
                           None, what="refresh")
        op_id = self.track(answer, "refresh", bank, mm_id)
        if op_id is not None and held.wait(timeout):
            return op_id
        self.llm.release(mm_id)
        return None

    def _kill(self, whole: bool, target: tuple[str, str] | None) -> None:
        holders = self.processing_holders()
        children = self.stack.children()
        busy = [pid for pid in children if pid in holders]
        if whole:
            live = self.stack.live_workers()
            if not live:
                return
            owners = {children[pid].name for pid in busy}
            worker = next((w for w in live if w.name in owners), self.rng.choice(live))
            pids = {worker.pid, *(p for p, w in children.items() if w is worker)}
            held = {pid: holders[pid] for pid in pids if pid in holders}
            started = time.time()
            self.ended.add(worker.pid)
            worker.kill()
            self.stack.start_worker()
            what = f"SIGKILL worker process {worker.name} ({len(held)} refresh(es) held)"
        else:
            if not children:
                return
            running = {op for (op,) in self.db_rows(
                "SELECT id::text FROM operations_operation WHERE status = 'processing' "
                "AND bank_id = %s AND mental_model_id = %s", list(target))} if target else set()
            holding = [pid for pid in busy if any(op in running for _key, op in holders[pid])]
            pid = self.rng.choice(holding or busy) if busy else self.rng.choice(list(children))
            held = {pid: holders[pid]} if pid in holders else {}
            started = time.time()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            what = f"SIGKILL child {pid} ({'holding a refresh' if held else 'idle'})"
        # Only what the dead process still held after it died is a sample (a refresh that
        # completed between the look-up and the signal is not one).
        still = self.processing_holders()
        with self.t.lock:
            for pid, leases in held.items():
                for key, op_id in leases:
                    if (key, op_id) in still.get(pid, []):
                        self.t.kills.append({"at": started, "key": key, "op": op_id,
                                             "holders": list(held), "recovered": None})
            self.t.faults.append(what)
        log(what)

    def edit_then_kill(self) -> None:
        """A PATCH of ``source_query`` supersedes a running refresh (its fence bumped, a
        follow-up queued behind it), then the process running it is SIGKILLed: the follow-up
        must start within seconds, as after any kill, and carry the edit
        (docs/behaviour.md#edits-during-a-running-refresh). The sample is the follow-up's claim."""
        target = self._hold_a_refresh()
        if target is None:
            return
        bank, mm_id = target
        try:
            rows = self.db_rows(
                "SELECT o.id::text, l.key, l.holder FROM operations_operation o "
                "JOIN operations_lease l ON l.key = o.dedupe_key WHERE o.status = 'processing' "
                "AND o.bank_id = %s AND o.mental_model_id = %s", [bank, mm_id])
            if not rows or not rows[0][2]:
                return
            _op_id, key, holder = rows[0]
            pid = holder_pid(holder)
            query = f"What does the team do after the edit {uuid.uuid4().hex[:6]}? [chaos:{mm_id}]"
            if self.call("PATCH", f"/v1/default/banks/{bank}/mental-models/{mm_id}",
                         {"source_query": query}, what="patch") is None:
                return
            with self.t.lock:
                self.t.patches[(bank, mm_id)] = query
            follow = self.db_rows("SELECT id::text FROM operations_operation "
                                  "WHERE dedupe_key = %s AND status = 'pending'", [key])
            workers = {w.pid: w for w in self.stack.live_workers()}
            started = time.time()
            if pid in workers:  # a threads-pool worker runs its jobs in its own process
                self.ended.add(pid)
                workers[pid].kill()
                self.stack.start_worker()
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            what = f"PATCH then SIGKILL {pid} (its refresh of {mm_id} superseded)"
            with self.t.lock:
                if follow:
                    self.t.kills.append({"at": started, "key": key, "op": follow[0][0],
                                         "holders": [pid], "recovered": None, "edit": True})
                self.t.faults.append(what)
            log(what)
        finally:
            self.llm.release(mm_id)

    def fault_loop(self, deadline: float) -> None:
        span = deadline - time.monotonic()
        events: list[tuple[float, str]] = []
        for _ in range(self.args.child_kills):
            events.append((self.rng.uniform(0.1, 0.9) * span, "child"))
        for _ in range(self.args.edit_kills):
            events.append((self.rng.uniform(0.2, 0.8) * span, "edit-kill"))
        for _ in range(self.args.worker_kills):
            events.append((self.rng.uniform(0.15, 0.85) * span, "worker"))
        if self.args.broker_restart:
            events.append((0.4 * span, "broker"))
        if self.args.postgres_restart:
            events.append((0.65 * span, "postgres"))
        start = time.monotonic()
        for offset, kind in sorted(events):
            while time.monotonic() < start + offset:
                if self.stop_load.wait(0.05):
                    return
            try:
                if kind in ("child", "worker"):
                    self.kill(whole=kind == "worker")
                elif kind == "edit-kill":
                    self.edit_then_kill()
                elif kind == "broker":
                    self.stack.restart_broker()
                    self.t.faults.append("broker restarted (queue lost)")
                    log("broker restarted")
                else:
                    self.stack.restart_postgres()
                    self.t.faults.append("PostgreSQL crash-restarted")
                    log("PostgreSQL restarted")
            except Exception as exc:  # a fault that could not be injected is reported
                self.t.faults.append(f"{kind} fault not injected: {exc!r}")

    def recovery_monitor(self) -> None:
        while not self.stop_monitor.wait(0.1):
            try:
                self._check_recoveries()
                self._replace_exited_workers()
            except Exception as exc:  # keep measuring; say why a sample was missed
                log(f"recovery monitor: {exc!r}")

    def _replace_exited_workers(self) -> None:
        """A worker process that ended by itself (none of the faults here ends one without
        starting another) is named in the faults and replaced, as a deployment's supervisor
        would: a broker restart can end a worker (Celery's "Unrecoverable error"), and without
        a replacement the rest of the load would run, and the faults after it would be looked
        for, with no worker at all."""
        for worker in list(self.stack.workers):
            if worker.pid in self.ended or worker.alive():
                continue
            self.ended.add(worker.pid)
            what = (f"worker process {worker.name} exited by itself "
                    f"(code {worker.process.returncode}); replaced")
            with self.t.lock:
                self.t.faults.append(what)
            log(what)
            self.stack.start_worker()

    def _check_recoveries(self) -> None:
        with self.t.lock:
            waiting = [k for k in self.t.kills if k["recovered"] is None]
        if not waiting:
            return
        rows = self.db_rows(
            "SELECT l.holder, o.status FROM operations_lease l, operations_operation o "
            "WHERE o.id = %s::uuid AND l.key = %s",
            many=[(k["op"], k["key"]) for k in waiting])
        now = time.time()
        for kill, found in zip(waiting, rows):
            if not found:
                continue
            holder, status = found[0]
            pid = holder_pid(holder) if holder else None
            if status in FINAL or (pid is not None and pid not in kill["holders"]):
                kill["recovered"] = now - kill["at"]

    # the database, read directly (survives its own restart) ----------------------------------

    def db_rows(self, sql: str, params: Any = None, many: list[Any] | None = None) -> Any:
        import psycopg

        try:
            with psycopg.connect(self.stack.database_url, connect_timeout=3) as conn:
                if many is not None:
                    return [conn.execute(sql, p).fetchall() for p in many]
                return conn.execute(sql, params).fetchall()
        except psycopg.Error:
            return [] if many is None else [[] for _ in many]

    def processing_holders(self) -> dict[int, list[tuple[str, str]]]:
        rows = self.db_rows(
            "SELECT l.holder, l.key, o.id::text FROM operations_operation o "
            "JOIN operations_lease l ON l.key = COALESCE(o.dedupe_key, 'op:' || o.id::text) "
            "WHERE o.status = 'processing'")
        out: dict[int, list[tuple[str, str]]] = {}
        for holder, key, op_id in rows:
            if holder:
                out.setdefault(holder_pid(holder), []).append((key, op_id))
        return out

    # phases ----------------------------------------------------------------------------------

    def load(self) -> None:
        deadline = time.monotonic() + self.args.duration
        threads = [threading.Thread(target=self.retain_loop, daemon=True),
                   threading.Thread(target=self.patch_loop, daemon=True),
                   threading.Thread(target=self.fault_loop, args=(deadline,), daemon=True)]
        for thread in threads:
            thread.start()
        self.refresh_loop(deadline)
        while time.monotonic() < deadline:
            time.sleep(0.2)
        self.stop_load.set()
        for thread in threads:
            thread.join(timeout=60)

    def drain(self) -> float:
        """Wait until nothing is pending or processing; remember the database's clock then.

        Beat keeps ticking after the drain, so an operation created later (a cron tick) is
        work in flight, not stuck: the report counts only what existed when the drain ended.
        """
        started = time.monotonic()
        if not self.stack.live_workers():
            self.stack.start_worker()
        deadline = started + self.args.drain_timeout
        while time.monotonic() < deadline:
            rows = self.db_rows("SELECT count(*) FROM operations_operation "
                                "WHERE status IN ('pending', 'processing')")
            if rows and rows[0][0] == 0:
                break
            time.sleep(0.2)
        self.drained_at = self.db_rows("SELECT clock_timestamp()")[0][0]
        return time.monotonic() - started

    def outage(self) -> dict[str, Any]:
        """The provider answers 503 for a set of models: bounded spend, pause, manual resume."""
        chosen = [m for m in self.models if m[2] in ("cron", "after-consolidation")][:4]
        if not chosen:
            chosen = self.models[:2]
        names = {m[1] for m in chosen}
        with self.llm.lock:
            self.llm.outage = set(names)
        before = self.llm.requests_for(names)
        op_ids = []
        for bank, mm_id, _ in chosen:
            self.retain(bank, asynchronous=False)  # something new in reach, so the LLM is asked
            answer = self.call("POST", f"/v1/default/banks/{bank}/mental-models/{mm_id}/refresh")
            if answer:
                op_ids.append(answer["operation_id"])
        deadline = time.monotonic() + 120
        statuses: list[str] = []
        while time.monotonic() < deadline:
            statuses = [r[0] for r in self.db_rows(
                "SELECT status FROM operations_operation WHERE id = ANY(%s::uuid[])", [op_ids])]
            if len(statuses) == len(op_ids) and all(s in FINAL for s in statuses):
                break
            time.sleep(0.3)
        spent = self.llm.requests_for(names) - before
        per_op = spent / max(len(op_ids), 1)
        # Paused: new memories in scope and cron ticks must cost nothing.
        paused_from = self.llm.requests_for(names)
        for bank, _mm, _ in chosen:
            for _ in range(3):
                self.retain(bank, asynchronous=False)
        time.sleep(self.args.paused_seconds)
        paused_spent = self.llm.requests_for(names) - paused_from
        with self.llm.lock:
            self.llm.outage = set()
        resumed = 0
        resume_ops = []
        for bank, mm_id, _ in chosen:
            answer = self.call("POST", f"/v1/default/banks/{bank}/mental-models/{mm_id}/refresh")
            if answer:
                resume_ops.append(answer["operation_id"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = self.db_rows("SELECT status FROM operations_operation "
                                "WHERE id = ANY(%s::uuid[])", [resume_ops])
            resumed = sum(1 for r in rows if r[0] == "completed")
            if len(rows) == len(resume_ops) and all(r[0] in FINAL for r in rows):
                break
            time.sleep(0.3)
        unpaused = self.db_rows(
            "SELECT count(*) FROM mentalmodels_mentalmodel WHERE mental_model_id = ANY(%s) "
            "AND last_refresh_failed_at IS NULL", [list(names)])
        return {"models": len(chosen), "operations": len(op_ids),
                "ended_failed": statuses.count("failed"),
                "requests_per_operation_max_allowed": 1 + MAX_RETRIES,
                "requests_per_operation": round(per_op, 2),
                "requests_while_paused": paused_spent,
                "paused_seconds": self.args.paused_seconds,
                "resumed_by_manual_refresh": resumed,
                "unpaused_after_resume": unpaused[0][0] if unpaused else 0}

    # the report ------------------------------------------------------------------------------

    def report(self, drain_seconds: float) -> dict[str, Any]:
        ids = list(self.t.ops)
        rows = {r[0]: r for r in self.db_rows(
            "SELECT id::text, status, error_message, result_metadata, operation_type "
            "FROM operations_operation WHERE id = ANY(%s::uuid[])", [ids])}
        statuses = Counter(rows[i][1] if i in rows else "missing" for i in ids)
        lost = [i for i in ids if i not in rows]
        stuck = [i for i in ids if i in rows and rows[i][1] not in FINAL]
        all_stuck = [r[0] for r in self.db_rows(
            "SELECT id::text FROM operations_operation WHERE status IN ('pending', 'processing') "
            "AND created_at <= %s", [self.drained_at])]
        stuck += [i for i in all_stuck if i not in stuck]
        # What a client polling its own id sees, and whether the work it names completed.
        failed_but_done = 0
        for op_id in [i for i in ids if i in rows and rows[i][1] == "failed"]:
            seen = self.call("GET", f"/v1/default/banks/{self.t.ops[op_id]['bank']}/operations/"
                             f"{op_id}") or {}
            if seen.get("status") != "failed":
                continue
            meta = rows[op_id][3] or {}
            carrier = meta.get("superseded_by") or meta.get("carried_by")
            if not carrier:
                found = UUID_RE.findall(rows[op_id][2] or "")
                carrier = next((c for c in found if c != op_id), None)
            if carrier:
                carried = self.db_rows("SELECT status FROM operations_operation WHERE id = %s",
                                       [carrier])
                if carried and carried[0][0] == "completed":
                    failed_but_done += 1
        torn, lost_edits = self.check_models()
        duplicates, lost_retains = self.check_retains(rows)
        refresh_ops = sum(1 for i in ids if self.t.ops[i]["kind"] == "refresh")
        auto_ops = self.db_rows("SELECT count(*) FROM operations_operation "
                                "WHERE operation_type = 'refresh_mental_model'")
        chat = len(self.llm.server.requests)
        model_chat = sum(self.llm.server.requests_by_key.values())
        recoveries = [k["recovered"] for k in self.t.kills if k["recovered"] is not None]
        after_edits = [round(k["recovered"], 2) for k in self.t.kills
                       if k.get("edit") and k["recovered"] is not None]
        return {
            "size": {"models": len(self.models), "banks": len(self.banks),
                     "duration_s": self.args.duration, "workers": self.args.workers,
                     "concurrency": self.args.concurrency, "seed": self.args.seed},
            "faults": self.t.faults,
            "operations_submitted": len(ids),
            "operations_by_status": dict(statuses),
            "refresh_operations_total_in_db": auto_ops[0][0] if auto_ops else None,
            "failed_operations": dict(Counter(
                f"{r[4]}: {(r[2] or '')[:90]}" for r in rows.values() if r[1] == "failed")),
            "retains": {"sync_acknowledged": len(self.t.retains_sync),
                        "async_acknowledged": len(self.t.retains_async),
                        "refused_during_faults": len(self.t.retains_unacknowledged)},
            "http_errors": dict(self.t.http_errors),
            "must_be_zero": {
                "operations_lost": len(lost),
                "operations_stuck": len(stuck),
                "torn_documents": len(torn),
                "overlapping_refreshes": len(self.llm.server.overlaps),
                "lost_edits": len(lost_edits),
                "duplicate_effects": duplicates,
                "lost_retains": lost_retains,
                "failed_although_work_completed": failed_but_done,
            },
            "details": {"lost": lost[:10], "stuck": stuck[:10], "torn": torn[:10],
                        "lost_edits": lost_edits[:10],
                        "overlaps": self.llm.server.overlaps[:10]},
            "llm_requests": {"chat_total": chat, "for_models": model_chat,
                             "per_refresh_operation": round(model_chat / max(
                                 auto_ops[0][0] if auto_ops else refresh_ops, 1), 2)},
            "drain_seconds": round(drain_seconds, 1),
            "kill_to_recovered_claim_s": {
                "kills_holding_a_refresh": len(self.t.kills),
                "recovered": len(recoveries),
                "p50": round(statistics.median(recoveries), 2) if recoveries else None,
                "max": round(max(recoveries), 2) if recoveries else None,
                "kills_after_an_edit": sum(1 for k in self.t.kills if k.get("edit")),
                "after_an_edit_to_the_follow_up_claim": after_edits},
        }

    def check_models(self) -> tuple[list[str], list[str]]:
        has_document = bool(self.db_rows(
            "SELECT 1 FROM information_schema.columns WHERE table_name = "
            "'mentalmodels_mentalmodel' AND column_name = 'document'"))
        columns = "bank_id, mental_model_id, content, source_query, last_refresh_source_query"
        rows = self.db_rows(f"SELECT {columns}{', document' if has_document else ''} "
                            "FROM mentalmodels_mentalmodel WHERE bank_id = ANY(%s)", [self.banks])
        try:  # delta mode's document module, where it exists (the product may not have it yet)
            document_module: Any = importlib.import_module("mentalmodels.document.structure")
        except ImportError:
            document_module = None
        kinds = {(b, m): k for b, m, k in self.models}
        torn, lost_edits = [], []
        for row in rows:
            bank, mm_id, content, query, last_query = row[:5]
            document = row[5] if has_document else None
            if document and document_module is not None:
                rendered = document_module.render(document_module.Document.from_json(document))
                if rendered != content:
                    torn.append(f"{mm_id}: content != render(document)")
            # Whitespace-insensitive: a build that stores the answer through its structured
            # document may normalise blank lines; a mix of two answers still differs.
            answers = {" ".join(a.split()) for a in self.llm.answers.get(mm_id, ())}
            if (kinds.get((bank, mm_id)) != "delta" and content
                    and " ".join(content.split()) not in answers):
                torn.append(f"{mm_id}: content is not one whole answer")
            expected = self.t.patches.get((bank, mm_id))
            if expected is not None and (query != expected or last_query != expected):
                lost_edits.append(f"{mm_id}: source_query={query!r} last_refresh={last_query!r}")
        return torn, lost_edits

    def check_retains(self, rows: dict[str, Any]) -> tuple[int, int]:
        stored = Counter(
            m for (text,) in self.db_rows(
                "SELECT text FROM banks_memoryunit WHERE bank_id = ANY(%s) "
                "AND fact_type IN ('world', 'experience')", [self.banks])
            for m in re.findall(r"rt-[0-9a-f]{32}", text))
        duplicates = sum(1 for count in stored.values() if count > 1)
        acknowledged = list(self.t.retains_sync) + [
            m for m, op in self.t.retains_async.items()
            if op in rows and rows[op][1] == "completed"]
        lost = sum(1 for m in acknowledged if stored[m] == 0)
        return duplicates, lost

    def run(self) -> dict[str, Any]:
        self.stop_monitor = threading.Event()
        try:
            log(f"starting the stack in {self.scratch}")
            self.stack.start(self.args.workers, api_workers=self.args.api_workers)
            log(f"stack up: API {self.stack.base_url}, {self.args.workers} worker(s) "
                f"x {self.args.concurrency}")
            self.create_models()
            monitor = threading.Thread(target=self.recovery_monitor, daemon=True)
            monitor.start()
            log(f"{len(self.models)} models created; load and faults for {self.args.duration} s")
            self.load()
            log("draining")
            drain = self.drain()
            self.stop_monitor.set()
            monitor.join(timeout=5)
            log(f"drained in {drain:.1f} s")
            result = self.report(drain)
            if not self.args.no_outage:
                log("LLM outage phase")
                result["llm_outage"] = self.outage()
            return result
        finally:
            self.stack.discard()
            self.llm.server.stop()


# ---------------------------------------------------------------------------------------------
# Network cuts (``--cuts``)


@dataclass
class Cut:
    bank: str
    model: str
    operation: str
    fence: int  # the cut worker's claim
    pids: set[int]  # the cut worker's processes (a prefork pool's children claim)
    started: float = 0.0
    healed: float = 0.0  # ``--cut-seconds`` later, or sooner with ``--heal-when-done``
    takeover_s: float | None = None  # cut → a peer's claim of the refresh (or it is final)
    final_status: str | None = None


class CutRun(Chaos):
    """A worker cut off PostgreSQL and the broker while it runs a refresh; its peers take over."""

    def __init__(self, args: argparse.Namespace):
        super().__init__(args)
        self.links: CutLinks | None = None
        self.cut_worker: Any = None
        self.cuts: list[Cut] = []

    def start(self) -> None:
        stack = self.stack
        stack.start_servers()
        stack.migrate(verbosity=0)
        stack.start_chaos_api(self.args.api_workers)
        stack.start_beat(max_interval=1)
        for _ in range(max(1, self.args.workers - 1)):
            stack.start_worker()
        self.links = CutLinks(stack)
        self.cut_worker = stack.start_cut_worker(self.links)
        stack.wait_healthy(90)
        stack.wait_workers_ready()

    def cut_pids(self) -> set[int]:
        worker = self.cut_worker
        return {worker.pid, *worker.children()} if worker.alive() else set()

    def lease_of(self, operation_id: str) -> tuple[str | None, int, str] | None:
        rows = self.db_rows(
            "SELECT l.holder, l.fence, o.status FROM operations_operation o "
            "JOIN operations_lease l ON l.key = COALESCE(o.dedupe_key, 'op:' || o.id::text) "
            "WHERE o.id = %s::uuid", [operation_id])
        return rows[0] if rows else None

    def wait_final(self, operation_id: str, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.db_rows("SELECT status FROM operations_operation WHERE id = %s::uuid",
                                [operation_id])
            if rows and rows[0][0] in FINAL:
                return str(rows[0][0])
            time.sleep(0.2)
        return None

    def held_by_the_cut_worker(self, used: set[str], tries: int = 12) -> Cut | None:
        """A refresh the cut worker runs, waiting on its held LLM request.

        Which worker takes a message is the broker's choice: a model's requests are held, its
        refresh asked for, and once a request arrives the lease says who runs it; a peer's
        refresh is let go and finished, and another model tried."""
        for _ in range(tries):
            # Models no trigger refreshes: after the heal only the peer's retry may write them.
            free = [m for m in self.models if m[2] in ("full", "full-tagged") and m[1] not in used]
            if not free:
                return None
            bank, mm_id, _kind = self.rng.choice(free)
            op_id = self.refresh_held(bank, mm_id, 20)
            if op_id is None:
                continue
            lease = self.lease_of(op_id)
            pids = self.cut_pids()
            if lease and lease[0] and lease[2] == "processing" and holder_pid(lease[0]) in pids:
                return Cut(bank, mm_id, op_id, int(lease[1]), pids)
            self.llm.release(mm_id)
            self.wait_final(op_id, 30)
        return None

    def cut_once(self, used: set[str]) -> None:
        assert self.links is not None
        cut = self.held_by_the_cut_worker(used)
        if cut is None:
            self.t.faults.append("cut not injected: the cut worker ran none of the refreshes")
            return
        used.add(cut.model)
        cut.started = time.time()
        if self.args.cut_mode == "refuse":
            self.links.refuse()
        else:
            self.links.hold()
        self.llm.release(cut.model)  # it answers the cut worker; its next statement is held
        log(f"cut worker {self.cut_worker.name} off PostgreSQL and the broker ("
            f"{self.args.cut_mode}) for {self.args.cut_seconds:g} s, holding {cut.model} "
            f"(operation {cut.operation})")
        while time.time() - cut.started < self.args.cut_seconds:
            lease = self.lease_of(cut.operation)
            if cut.takeover_s is None and lease is not None and (
                    lease[2] in FINAL
                    or (lease[0] and holder_pid(lease[0]) not in cut.pids)):
                cut.takeover_s = time.time() - cut.started
                log(f"taken over after {cut.takeover_s:.1f} s (holder {lease[0]}, {lease[2]})")
            # Once a peer finished the refresh (the cut worker, cut off, can end nothing), the
            # held bytes arrive after its write, as they would after the whole cut.
            if (self.args.heal_when_done and cut.takeover_s is not None
                    and lease is not None and lease[2] in FINAL):
                break
            time.sleep(0.1)
        self.links.heal()
        cut.healed = time.time()
        log(f"healed after {cut.healed - cut.started:.1f} s: what was held delivered, "
            "connections accepted again")
        cut.final_status = self.wait_final(cut.operation, 60)
        self.cuts.append(cut)
        self.t.faults.append(f"cut {cut.model} for {cut.healed - cut.started:.1f} s")

    def serve_again(self, healed: float, timeout: float = 45.0) -> int:
        """Refreshes of the models no cut touched, in bursts, until the cut worker answers
        some (its broker connection and its pool came back). Returns how many it completed."""
        cut_models = {c.model for c in self.cuts}
        others = [m for m in self.models if m[1] not in cut_models]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ops = [self.track(self.call("POST", f"/v1/default/banks/{bank}/mental-models/{mm}"
                                        "/refresh", None, what="refresh"), "refresh", bank, mm)
                   for bank, mm, _ in others]
            for op_id in ops:
                if op_id is not None:
                    self.wait_final(op_id, 20)
            served = [a for a in self.llm.answered(sender=CUT_SENDER, since=healed)
                      if a not in self._stale_answers()]
            if served:
                return len(served)
        return 0

    def _stale_answers(self) -> set[str]:
        """What the LLM answered the cut worker, for a model it held, from the cut on."""
        return {" ".join(a.split()) for c in self.cuts
                for a in self.llm.answered(sender=CUT_SENDER, since=c.started, model=c.model)}

    def stale_writes(self) -> list[str]:
        """Cut models whose content, now or in any version, is an answer the cut worker got."""
        stale = self._stale_answers()
        found = []
        for cut in self.cuts:
            texts = self.db_rows(
                "SELECT content FROM mentalmodels_mentalmodel WHERE bank_id = %s "
                "AND mental_model_id = %s UNION ALL SELECT h.previous_content "
                "FROM mentalmodels_mentalmodelhistory h JOIN mentalmodels_mentalmodel m "
                "ON m.id = h.model_id WHERE m.bank_id = %s AND m.mental_model_id = %s",
                [cut.bank, cut.model, cut.bank, cut.model])
            if any(text and " ".join(text.split()) in stale for (text,) in texts):
                found.append(cut.model)
        return found

    def run(self) -> dict[str, Any]:
        self.stop_monitor = threading.Event()
        passed = False
        try:
            log(f"starting the stack in {self.scratch}")
            self.start()
            log(f"stack up: {self.args.workers - 1} worker(s), and {self.cut_worker.name} "
                "behind the proxies")
            self.create_models()
            self.drain()  # the first refreshes, before any cut
            log(f"{len(self.models)} models created and refreshed")
            load = threading.Thread(target=self.retain_loop, daemon=True)
            load.start()
            used: set[str] = set()
            for _ in range(self.args.cut_count):
                self.cut_once(used)
            self.stop_load.set()
            load.join(timeout=10)
            healed = max((c.healed for c in self.cuts), default=time.time())
            served = self.serve_again(healed)
            log(f"the cut worker served {served} refresh answer(s) after the heal; draining")
            drain = self.drain()
            result = self.cut_report(drain, served)
            passed = not failures(result)
            return result
        finally:
            self.stack.discard()
            if self.links is not None:
                self.links.stop()
            self.llm.server.stop()
            if passed:  # a failed run keeps its logs and data for a look
                self.stack.remove_data()
            else:
                log(f"kept {self.scratch} (the processes' logs)")

    def cut_report(self, drain_seconds: float, served: int) -> dict[str, Any]:
        ids = list(self.t.ops)
        rows = {r[0]: r[1] for r in self.db_rows(
            "SELECT id::text, status FROM operations_operation WHERE id = ANY(%s::uuid[])",
            [ids])}
        stuck = [r[0] for r in self.db_rows(
            "SELECT id::text FROM operations_operation WHERE status IN ('pending', 'processing') "
            "AND created_at <= %s", [self.drained_at])]
        torn, _ = self.check_models()
        times = [c.takeover_s for c in self.cuts if c.takeover_s is not None]
        return {
            "size": {"models": len(self.models), "workers": self.args.workers,
                     "concurrency": self.args.concurrency, "pool": self.args.pool,
                     "seed": self.args.seed, "cut_seconds": self.args.cut_seconds,
                     "cut_mode": self.args.cut_mode},
            "faults": self.t.faults,
            "cuts": [{"model": c.model, "operation": c.operation, "cut_worker_fence": c.fence,
                      "takeover_s": None if c.takeover_s is None else round(c.takeover_s, 2),
                      "held_s": round(c.healed - c.started, 2),
                      "final_status": c.final_status} for c in self.cuts],
            "takeover_s": {"p50": round(statistics.median(times), 2) if times else None,
                           "max": round(max(times), 2) if times else None},
            "served_after_heal": served,
            # What the stale-write check looks for: the cut worker carried on after the heal
            # and got answers its write then had to refuse.
            "answers_to_the_cut_worker_after_its_cut": len(self._stale_answers()),
            "operations_by_status": dict(Counter(rows.get(i, "missing") for i in ids)),
            "http_errors": dict(self.t.http_errors),
            "drain_seconds": round(drain_seconds, 1),
            "must_be_zero": {
                "cuts_not_injected": self.args.cut_count - len(self.cuts),
                "cuts_not_taken_over": sum(1 for c in self.cuts if c.takeover_s is None),
                "stale_writes": len(self.stale_writes()),
                "operations_lost": sum(1 for i in ids if i not in rows),
                "operations_stuck": len(stuck),
                "torn_documents": len(torn),
                "overlapping_refreshes": len(self.llm.server.overlaps),
                "cut_worker_not_serving_after_heal": 0 if served else 1,
            },
            "details": {"stuck": stuck[:10], "torn": torn[:10],
                        "stale": self.stale_writes()[:10],
                        "overlaps": self.llm.server.overlaps[:10]},
        }


class ReviewRun(Chaos):
    """The load and faults with every model under review, a reviewer deciding meanwhile."""

    def __init__(self, args: argparse.Namespace):
        super().__init__(args)
        self.stack.env["HINDSIGHT_API_MENTAL_MODEL_PROPOSAL_TTL_SECONDS"] = str(args.proposal_ttl)
        self.seen: dict[str, tuple[str, str]] = {}  # proposal id → (bank, model), as listed
        self.approved: dict[str, int] = {}  # proposal id → version id, as the API answered
        self.rejected: dict[str, str] = {}  # proposal id → reason, as the API answered

    def create_models(self) -> None:
        for bank in self.banks:
            self.call("PUT", f"/v1/default/banks/{bank}", {"name": bank})
            if self.call("PATCH", f"/v1/default/banks/{bank}/config",
                         {"updates": {"mental_model_review": True}}, what="config") is None:
                raise RuntimeError(f"could not put {bank} under review: {self.t.http_errors}")
        super().create_models()

    def load(self) -> None:
        reviewer = threading.Thread(target=self.review_loop, daemon=True)
        reviewer.start()
        super().load()
        reviewer.join(timeout=60)

    def review_loop(self) -> None:
        while not self.stop_load.wait(self.rng.uniform(0.2, 0.6)):
            bank, mm_id, _kind = self.rng.choice(self.models)
            self.review(bank, mm_id, approve_share=0.7)

    def review(self, bank: str, mm_id: str, *, approve_share: float) -> None:
        base = f"/v1/default/banks/{bank}/mental-models/{mm_id}/proposals"
        listed = self.call("GET", base + "?status=pending", what="proposals")
        for proposal in (listed or {}).get("items", []):
            pid = proposal["id"]
            with self.t.lock:
                self.seen[pid] = (bank, mm_id)
            if self.rng.random() < approve_share:
                answer = self.call("POST", f"{base}/{pid}/approve", what="approve")
                if answer is not None:
                    with self.t.lock:
                        self.approved[pid] = answer["version_id"]
            else:
                reason = f"chaos reviewer {pid[:8]}"
                answer = self.call("POST", f"{base}/{pid}/reject", {"reason": reason},
                                   what="reject")
                if answer is not None:
                    with self.t.lock:
                        self.rejected[pid] = reason

    def check_models(self) -> tuple[list[str], list[str]]:
        """An edit under review is kept when the model asks the new query and the page answers
        it, or a proposal made after the edit does (the reviewer may have rejected that one: the
        page then still answers the old query, as it should)."""
        torn, _lost = super().check_models()
        proposed = {(mm, query) for mm, query in self.db_rows(
            "SELECT m.mental_model_id, p.source_query FROM review_mentalmodelproposal p "
            "JOIN mentalmodels_mentalmodel m ON m.uid = p.model_id WHERE m.bank_id = ANY(%s)",
            [self.banks])}
        rows = {mm: (query, last) for mm, query, last in self.db_rows(
            "SELECT mental_model_id, source_query, last_refresh_source_query "
            "FROM mentalmodels_mentalmodel WHERE bank_id = ANY(%s)", [self.banks])}
        lost_edits = [
            f"{mm}: source_query={rows.get(mm, (None, None))[0]!r} "
            f"last_refresh={rows.get(mm, (None, None))[1]!r}, no proposal asks {expected!r}"
            for (_bank, mm), expected in self.t.patches.items()
            if rows.get(mm, (None, None))[0] != expected
            or (rows[mm][1] != expected and (mm, expected) not in proposed)]
        return torn, lost_edits

    def drain(self) -> float:
        seconds = super().drain()
        for bank, mm_id, _kind in self.models:  # what is left, approved after the faults
            self.review(bank, mm_id, approve_share=1.0)
        return seconds

    def report(self, drain_seconds: float) -> dict[str, Any]:
        result = super().report(drain_seconds)
        proposals = {row[0]: row for row in self.db_rows(
            "SELECT p.id::text, p.status, p.version_id, p.reason, o.status, m.mental_model_id, "
            "p.content, p.decided_at FROM review_mentalmodelproposal p "
            "JOIN mentalmodels_mentalmodel m ON m.uid = p.model_id "
            "LEFT JOIN operations_operation o ON o.id = p.operation_id "
            "WHERE m.bank_id = ANY(%s)", [self.banks])}
        lost = [pid for pid in self.seen if pid not in proposals]
        lost += [pid for pid, version in self.approved.items()
                 if pid not in proposals or proposals[pid][1] != "approved"
                 or proposals[pid][2] != version]
        lost += [pid for pid, reason in self.rejected.items()
                 if pid not in proposals or proposals[pid][1] != "rejected"
                 or proposals[pid][3] != reason]
        applied = self.db_rows(
            "SELECT h.operation_id::text, count(*) FROM mentalmodels_mentalmodelhistory h "
            "JOIN mentalmodels_mentalmodel m ON m.uid = h.model_id WHERE m.bank_id = ANY(%s) "
            "AND h.kind = 'version' AND h.reason = 'approved' GROUP BY 1", [self.banks])
        twice = [op for op, count in applied if count > 1]
        versions = [row[2] for row in proposals.values() if row[1] == "approved"]
        twice += [f"version {v} named by two approvals" for v in set(versions)
                  if versions.count(v) > 1]
        pending = self.db_rows(
            "SELECT m.mental_model_id FROM review_mentalmodelproposal p "
            "JOIN mentalmodels_mentalmodel m ON m.uid = p.model_id WHERE m.bank_id = ANY(%s) "
            "AND p.status = 'pending' GROUP BY 1 HAVING count(*) > 1", [self.banks])
        orphans = [pid for pid, row in proposals.items() if row[4] != "completed"]
        # A page changes only by an approval here: it is the last approved proposal's page.
        last: dict[str, tuple[Any, str]] = {}
        for row in proposals.values():
            if row[1] == "approved" and (row[5] not in last or row[7] > last[row[5]][0]):
                last[row[5]] = (row[7], row[6])
        pages = self.db_rows("SELECT mental_model_id, content FROM mentalmodels_mentalmodel "
                             "WHERE bank_id = ANY(%s)", [self.banks])
        not_approved = [mm for mm, content in pages
                        if content != (last[mm][1] if mm in last else "")]
        statuses = Counter(row[1] for row in proposals.values())
        result["review"] = {
            "proposals": len(proposals), "by_status": dict(statuses),
            "listed_by_the_reviewer": len(self.seen), "approved_acknowledged": len(self.approved),
            "rejected_acknowledged": len(self.rejected),
            "approved_versions_recorded": sum(count for _op, count in applied),
            "proposal_ttl_s": self.args.proposal_ttl,
        }
        result["must_be_zero"].update({
            "proposals_lost": len(lost),
            "proposals_applied_twice": len(twice),
            "models_with_two_pending_proposals": len(pending),
            "proposals_without_a_completed_refresh": len(orphans),
            "pages_not_from_their_last_approval": len(not_approved),
        })
        result["details"].update({"proposals_lost": lost[:10], "applied_twice": twice[:10],
                                  "two_pending": [p[0] for p in pending][:10],
                                  "orphan_proposals": orphans[:10],
                                  "pages_not_approved": not_approved[:10]})
        return result


def failures(result: dict[str, Any]) -> list[str]:
    bad = [f"{k} = {v}" for k, v in result["must_be_zero"].items() if v]
    outage = result.get("llm_outage")
    if outage:
        if outage["requests_per_operation"] > outage["requests_per_operation_max_allowed"]:
            bad.append(f"outage spend {outage['requests_per_operation']} requests per operation")
        if outage["requests_while_paused"]:
            bad.append(f"{outage['requests_while_paused']} LLM requests while paused")
        if outage["resumed_by_manual_refresh"] != outage["models"]:
            bad.append("not every paused model resumed by a manual refresh")
    return bad


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argument_parser("bench.chaos", __doc__)
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--duration", type=float, default=150.0, help="seconds of load")
    parser.add_argument("--workers", type=int, default=3, help="worker processes (2-4)")
    parser.add_argument("--concurrency", type=int, default=2, help="pool slots each")
    parser.add_argument("--api-workers", type=int, default=2,
                        help="gunicorn processes of the API (8 request threads in all)")
    parser.add_argument("--pool", choices=("prefork", "threads"), default="prefork",
                        help="the workers' Celery pool; threads: a child kill becomes a "
                             "worker-process kill (a thread cannot be killed alone)")
    parser.add_argument("--refreshes", type=int, default=5, help="rounds of manual refreshes")
    parser.add_argument("--child-kills", type=int, default=8)
    parser.add_argument("--worker-kills", type=int, default=2)
    parser.add_argument("--edit-kills", type=int, default=2,
                        help="kills right after a PATCH superseded the refresh the process ran")
    parser.add_argument("--no-broker-restart", dest="broker_restart", action="store_false")
    parser.add_argument("--no-postgres-restart", dest="postgres_restart", action="store_false")
    parser.add_argument("--no-outage", action="store_true")
    parser.add_argument("--paused-seconds", type=float, default=8.0)
    parser.add_argument("--drain-timeout", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--json", help="also write the report to this file")
    parser.add_argument("--quick", action="store_true",
                        help="the bounded size: 6 models, 25 s, 2 workers, one child kill, one "
                             "kill after an edit, one broker restart, no PostgreSQL restart, no "
                             "worker-process kill, one API process; with --cuts: 4 models, one "
                             "cut of at most 12 s, healed once a peer finished its refresh")
    parser.add_argument("--cuts", action="store_true",
                        help="network cuts instead: a worker behind proxies to PostgreSQL and "
                             "the broker, cut off while it runs a refresh (CutRun)")
    parser.add_argument("--cut-count", type=int, default=3)
    parser.add_argument("--cut-mode", choices=("hold", "refuse"), default="hold",
                        help="hold: the bytes wait in the proxies and arrive late; refuse: "
                             "connections reset and new ones refused until the heal")
    parser.add_argument("--cut-seconds", type=float, default=15.0,
                        help="how long a cut holds the bytes (above the lock TTL and the "
                             "sweep's silence threshold of the chaos timings)")
    parser.add_argument("--heal-when-done", action="store_true",
                        help="heal a cut as soon as a peer has taken its refresh over and "
                             "finished it (at most --cut-seconds)")
    parser.add_argument("--review", action="store_true",
                        help="every model under review, a reviewer approving and rejecting its "
                             "proposals during the faults (ReviewRun)")
    parser.add_argument("--proposal-ttl", type=float, default=20.0,
                        help="with --review: seconds a proposal waits before it expires")
    args = parser.parse_args(argv)
    if args.cuts:
        args.models, args.workers = min(args.models, 10), max(args.workers, 2)
        args.postgres_restart = False  # no crash-restart here: a throw-away PostgreSQL
        if args.quick:
            args.models, args.workers, args.cut_count, args.cut_seconds = 4, 2, 1, 12.0
            args.drain_timeout, args.api_workers, args.heal_when_done = 60.0, 1, True
        return args
    if args.quick:
        args.models, args.duration, args.workers, args.refreshes = 6, 25.0, 2, 2
        args.child_kills, args.worker_kills, args.postgres_restart = 1, 0, False
        args.edit_kills = 1
        args.paused_seconds, args.drain_timeout, args.api_workers = 4.0, 60.0, 1
    if args.pool == "threads":
        args.worker_kills, args.child_kills = args.worker_kills + args.child_kills, 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runner = CutRun if args.cuts else ReviewRun if args.review else Chaos
    result = runner(args).run()
    print(write_json(result, args.json))
    bad = failures(result)
    if bad:
        print("FAILED: " + "; ".join(bad))
        return 1
    print("OK: every count that must be 0 is 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
