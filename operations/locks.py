"""Per-key Redis locks (the fast path of "one running job per key") and the Redis client.

The database guarantees one processing operation per key (a partial unique index) and the
lease fence refuses a superseded writer; the Redis lock keeps a second worker from even
claiming while a job of the key runs. ``thread_local=False`` because the heartbeat thread, not
the thread that acquired it, extends the lock. A lock's token starts with its holder's name
(``lock_token``), so the worker that saw that holder die can free it at once
(``key_lock_break``) instead of leaving the key blocked until the TTL runs out.
"""

from __future__ import annotations

import os
import threading
import uuid

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


_TOKEN_SEPARATOR = "|"

# Delete the lock only while its token still names the holder (compare-and-delete, atomic).
_BREAK_SCRIPT = """
local token = redis.call('get', KEYS[1])
if token and string.sub(token, 1, string.len(ARGV[1])) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


def lock_token(holder: str) -> str:
    """A unique token for one acquisition, naming its holder."""
    return f"{holder}{_TOKEN_SEPARATOR}{uuid.uuid4().hex}"


def key_lock_break(key: str, *, holder: str) -> bool:
    """Free ``key``'s lock if ``holder`` (a process known to be dead) still holds it."""
    prefix = f"{holder}{_TOKEN_SEPARATOR}"
    return bool(redis_client().eval(_BREAK_SCRIPT, 1, LOCK_PREFIX + key, prefix))
