"""Per-key Redis locks (the fast path of "one running job per key") and the Redis client.

The database guarantees one processing operation per key (a partial unique index) and the
lease fence refuses a superseded writer; the Redis lock keeps a second worker from even
claiming while a job of the key runs. ``thread_local=False`` because the heartbeat thread, not
the thread that acquired it, extends the lock.
"""

from __future__ import annotations

import os
import threading

import redis
from django.conf import settings
from redis.lock import Lock

LOCK_PREFIX = "hindsight:oplock:"

_clients: dict[tuple[int, str], redis.Redis] = {}
_clients_guard = threading.Lock()


def redis_url() -> str:
    return settings.HINDSIGHT.redis_url or settings.REDIS_URL


def redis_client() -> redis.Redis:
    """One client per process and URL (a forked worker child builds its own)."""
    key = (os.getpid(), redis_url())
    with _clients_guard:
        client = _clients.get(key)
        if client is None:
            client = redis.Redis.from_url(
                key[1], socket_timeout=5.0, socket_connect_timeout=2.0, health_check_interval=30
            )
            _clients[key] = client
        return client


def key_lock(key: str) -> Lock:
    return Lock(
        redis_client(),
        LOCK_PREFIX + key,
        timeout=settings.HINDSIGHT.lock_ttl_seconds,
        blocking=False,
        thread_local=False,
    )
