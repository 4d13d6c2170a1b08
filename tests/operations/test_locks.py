"""``operations.locks``: the per-key Redis lock (non-blocking, TTL from the settings, shared
between threads) and the one Redis client per process and URL."""

from __future__ import annotations

import dataclasses
import threading
import uuid

import pytest

from operations.locks import LOCK_PREFIX, key_lock, redis_client, redis_url


@pytest.fixture
def key() -> str:
    name = f"test-locks-{uuid.uuid4()}"
    yield name
    redis_client().delete(LOCK_PREFIX + name)


def test_redis_url_prefers_the_hindsight_setting_over_redis_url(settings) -> None:
    settings.REDIS_URL = "redis://fallback:6379/0"
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, redis_url="redis://own:6379/1")
    assert redis_url() == "redis://own:6379/1"
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, redis_url="")
    assert redis_url() == "redis://fallback:6379/0"


def test_one_client_per_process_and_url(settings) -> None:
    first = redis_client()
    assert redis_client() is first
    # A client connects lazily: one for a URL nothing listens on is built, never used.
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT,
                                             redis_url="redis://127.0.0.1:1/15")
    other = redis_client()
    assert other is not first
    assert redis_client() is other


def test_key_lock_lives_under_the_prefix_with_the_configured_ttl(key, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, lock_ttl_seconds=7)
    lock = key_lock(key)
    assert lock.acquire(blocking=False)
    try:
        assert redis_client().exists(LOCK_PREFIX + key) == 1
        assert 0 < redis_client().pttl(LOCK_PREFIX + key) <= 7000
    finally:
        lock.release()
    assert redis_client().exists(LOCK_PREFIX + key) == 0


def test_a_held_key_lock_refuses_a_second_holder_at_once(key) -> None:
    first, second = key_lock(key), key_lock(key)
    assert first.acquire(blocking=False)
    try:
        assert second.acquire() is False  # non-blocking even without blocking=False
        assert key_lock(f"{key}-other").acquire(blocking=False)
    finally:
        first.release()
        redis_client().delete(LOCK_PREFIX + f"{key}-other")
    assert second.acquire(blocking=False)
    second.release()


def test_another_thread_may_extend_and_release_the_lock(key) -> None:
    lock = key_lock(key)
    assert lock.acquire(blocking=False)
    errors: list[BaseException] = []

    def heartbeat() -> None:
        try:
            lock.extend(30, replace_ttl=True)
            lock.release()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=heartbeat)
    thread.start()
    thread.join(5)
    assert errors == []
    assert redis_client().exists(LOCK_PREFIX + key) == 0
