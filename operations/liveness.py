"""Fast recovery for a worker process that runs its jobs in threads: liveness beacons in Redis.

A prefork worker's main process sees a child die and recovers its job at once
(``operations.tasks.RunRequest``). A ``threads``-pool worker runs every job in one process: when
that process is killed nobody inside it is left to notice. So every such process keeps a beacon
— its name (``host:pid``, the prefix of the ``holder`` its jobs claim with) in a Redis sorted set
per task queue (its peers are the workers of its queue, where a recovered job's retry is sent),
scored with the Redis server's clock — refreshed every ``BEACON_INTERVAL_SECONDS``, and
every beacon thread also looks for peers whose beacon went stale (older than
``BEACON_STALE_SECONDS``): their processing operations are recovered at once through the same
path as a dead prefork child's (``engine.operation_worker_lost``: key lock freed, attempt
counted, fence bumped, merge rule). A process that never kept a beacon (a prefork child) is
never judged by it; a worker that restarts under the same name recovers its previous
incarnation's jobs at its first beat.

The server clock (``TIME`` inside the scripts) makes every host judge staleness alike.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import connection

from hindsight.infra.db import connection_release_to_pool
from operations.locks import redis_client
from operations.models import PROCESSING, Lease, Operation, lease_key_for

log = logging.getLogger(__name__)

BEACONS = "hindsight:worker-beacons:"  # + the task queue: peers are the workers of one queue
BEACON_INTERVAL_SECONDS = 1.0
BEACON_STALE_SECONDS = 5.0
# A stale beacon is forgotten after this long (its jobs were recovered long before).
BEACON_FORGET_SECONDS = 86400.0

_BEAT_SCRIPT = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZADD', KEYS[1], t, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t - tonumber(ARGV[3]))
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t - tonumber(ARGV[2]))
"""


def beacon_name(*, hostname: str | None, pid: int) -> str:
    """The process part of a holder (``engine.worker_holder``): ``host:pid``."""
    return f"{hostname or 'local'}:{pid}"


def _beacons() -> str:
    return BEACONS + settings.HINDSIGHT.task_queue


def beacon_beat(name: str) -> list[str]:
    """Refresh ``name``'s beacon; return the names of the stale ones (dead processes)."""
    stale = redis_client().eval(_BEAT_SCRIPT, 1, _beacons(), name, BEACON_STALE_SECONDS,
                                BEACON_FORGET_SECONDS)
    return [s.decode() if isinstance(s, bytes) else str(s) for s in stale]


def beacon_forget(name: str) -> None:
    redis_client().zrem(_beacons(), name)


def held_by(process_names: list[str]) -> list[tuple[str, str]]:
    """(operation id, holder) of every processing operation claimed by one of those processes:
    its key's lease names one of them (the key's last claim; an edit's bump keeps it, so a job
    superseded before its process died is found too, under the fence it claimed)."""
    if not process_names:
        return []
    prefixes = tuple(f"{name}:" for name in process_names)
    running = list(Operation.objects.filter(status=PROCESSING).values_list("id", "dedupe_key",
                                                                            "fence"))
    keys = {lease_key_for(dedupe_key=key, operation_id=op_id): (op_id, fence)
            for op_id, key, fence in running}
    found = []
    for key, fence, holder in Lease.objects.filter(key__in=list(keys)).values_list(
        "key", "fence", "holder"
    ):
        op_id, op_fence = keys[key]
        if holder and fence >= op_fence and holder.startswith(prefixes):
            found.append((str(op_id), holder))
    return found


class Beacon(threading.Thread):
    """The beacon of this worker process and its watch over its peers' (a daemon thread)."""

    def __init__(self, name: str, recover: Callable[[str, str, str], object]):
        super().__init__(name="worker-beacon", daemon=True)
        self.process_name = name
        self.recover = recover  # (operation_id, holder, cause)
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                dead = [n for n in beacon_beat(self.process_name) if n != self.process_name]
                if dead:
                    self._recover(dead)
            except redis.RedisError as exc:  # one line a beat while Redis is away
                log.warning("worker beacon: Redis unavailable: %s", exc)
            except Exception:
                log.exception("worker beacon: recovering dead peers failed")
                connection.close()
            finally:
                connection_release_to_pool()
            self.stopped.wait(BEACON_INTERVAL_SECONDS)

    def _recover(self, dead: list[str]) -> None:
        for operation_id, holder in held_by(dead):
            self.recover(operation_id, holder,
                         f"worker process {holder.rsplit(':', 1)[0]} stopped beating")
        for name in dead:
            if not held_by([name]):
                beacon_forget(name)

    def stop(self) -> None:
        self.stopped.set()
        try:
            beacon_forget(self.process_name)  # a clean exit leaves no stale beacon behind
        except redis.RedisError:
            pass
