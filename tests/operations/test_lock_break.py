"""Freeing a dead holder's key lock: only the lock whose token names that holder goes."""

from __future__ import annotations

import uuid

from operations.locks import LOCK_PREFIX, key_lock, key_lock_break, lock_token, redis_client


def _key() -> str:
    return f"lock-break:{uuid.uuid4().hex}"


def test_a_lock_is_freed_only_for_the_holder_its_token_names() -> None:
    key = _key()
    lock = key_lock(key)
    assert lock.acquire(blocking=False, token=lock_token("host:1:task"))
    try:
        assert key_lock_break(key, holder="host:2:task") is False
        assert key_lock_break(key, holder="host:1:tas") is False  # a prefix is not the holder
        assert redis_client().exists(LOCK_PREFIX + key) == 1
        assert key_lock_break(key, holder="host:1:task") is True
        assert redis_client().exists(LOCK_PREFIX + key) == 0
        # Free now: another process takes it at once (no TTL to wait out).
        assert key_lock(key).acquire(blocking=False, token=lock_token("host:3:task"))
    finally:
        redis_client().delete(LOCK_PREFIX + key)


def test_a_lock_taken_with_a_holder_token_is_extended_and_released_by_its_owner() -> None:
    key = _key()
    lock = key_lock(key)
    assert lock.acquire(blocking=False, token=lock_token("host:1:t"))
    assert lock.extend(5, replace_ttl=True)
    lock.release()
    assert redis_client().exists(LOCK_PREFIX + key) == 0
    assert key_lock_break(key, holder="host:1:t") is False  # nothing left to free
