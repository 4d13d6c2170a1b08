"""The wall timeout of a running job: the one place that knows how a handler is cut short.

``armed(seconds)`` bounds the block it wraps: past ``seconds`` the handler's code raises
``WallTimeout`` (a failed, retryable attempt). ``disarm()`` on what it yields ends the bound
early — ``Job.finishing`` calls it as the final write starts, since the clock bounds the work,
not the commit.

It works in any pool slot — a prefork child's main thread or one thread of a ``threads`` pool
among many — with one watchdog thread per process instead of a signal timer (``SIGALRM``
reaches a main thread only, one timer per process). When a slot's time is up the watchdog:

1. raises ``WallTimeout`` in the slot's thread: in a pool thread by ``PyThreadState_SetAsyncExc``
   — it surfaces at the thread's next Python instruction, at once in Python code or as soon as
   a blocking call returns; in a main thread (a prefork child) by a ``SIGALRM`` sent to it, whose
   handler raises, so a blocking sleep or read is interrupted too;
2. cancels the slot's database query in flight, if any (psycopg's ``cancel_safe``). A query is
   never interrupted mid-protocol: while the slot is inside a database call (Django's execute
   wrapper, installed for the armed block), the watchdog only cancels it, and the call raises
   ``WallTimeout`` itself as it returns — an exception landing between psycopg's send and its
   read left the connection "another command is already in progress" for the failure write;
3. sets the slot's event: code that waits on purpose waits through ``slot_wait`` (an
   interruptible sleep that raises ``WallTimeout``), not ``time.sleep``.

No LLM request outlives the clock: the block runs under ``hindsight.infra.llm.slot_deadline``, which
caps every request's timeout at the slot's remaining time, and a request ended by that cap raises
the slot's ``WallTimeout`` too (whichever notices first, the attempt fails the same way). The
hard backstop for a call that never returns: ``grace_seconds`` after firing, a slot still armed
gets its ``on_stuck`` callback (the engine stops that job's heartbeat, so the beat's sweep
recovers the operation and bumps its fence, refusing the stuck slot's writes) while the rest of
the process keeps running.

Arming and disarming take a per-slot lock with the watchdog's firing, so a disarmed slot is
never fired at, and a timeout fired but not surfaced yet is withdrawn by ``disarm``.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from hindsight.infra.llm import Deadline, slot_deadline
from operations.errors import WallTimeout

log = logging.getLogger(__name__)

_current = threading.local()


class SlotWallTimeout(WallTimeout):
    """The ``WallTimeout`` the watchdog raises inside a slot's thread.

    Raised by class (that is all ``PyThreadState_SetAsyncExc`` takes), so it builds its message
    from the slot armed in the raising thread.
    """

    def __init__(self, message: str | None = None):
        slot: Slot | None = getattr(_current, "slot", None)
        seconds = slot.seconds if slot is not None else 0.0
        if slot is not None:
            slot.surfaced = True  # made as it is raised in the slot's thread: raised once
        super().__init__(message or f"wall timeout of {seconds:g}s exceeded")


class Slot:
    def __init__(self, seconds: float, *, on_stuck: Callable[[], None] | None,
                 connection: Any | None):
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.thread_id = threading.get_ident()
        self.on_stuck = on_stuck
        self.connection = connection  # the slot's Django database wrapper (thread-local)
        self.fired = threading.Event()  # wakes a slot_wait; set last by _fire
        self.expired = False  # set first by _fire: what the alarm handler and disarm read
        self.armed = True
        self.in_database = 0  # database calls under way in the slot's thread (shield_database)
        self.fired_in_database = False  # fired during one: shield_database raises it
        self.surfaced = False  # its WallTimeout has been raised in the slot's thread
        self.lock = threading.Lock()
        self.by_signal = threading.current_thread() is threading.main_thread()
        self._previous_handler: Any = None
        if self.by_signal:
            self._previous_handler = signal.signal(signal.SIGALRM, _on_alarm)

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def disarm(self) -> None:
        """Stop the clock (called in the slot's own thread). A timeout that fired but has not
        surfaced yet is withdrawn: once disarmed, nothing is raised in this thread any more."""
        with self.lock:
            self.armed = False
            if self.expired and threading.get_ident() == self.thread_id:
                _withdraw_in_thread(self.thread_id)
        if getattr(_current, "slot", None) is self:
            _current.slot = None
        if self.by_signal and threading.get_ident() == self.thread_id:
            signal.signal(signal.SIGALRM, self._previous_handler or signal.SIG_DFL)
            self.by_signal = False

    def shield_database(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
                        context: dict[str, Any]) -> Any:
        """Django execute wrapper: a timeout that fires during a database call is raised as the
        call returns, never inside it (the watchdog only cancels the query; see ``_fire``).
        Calls after the timeout has surfaced (a handler's clean-up) run as usual."""
        with self.lock:
            if self.expired and self.armed and not self.surfaced:
                raise _raised_here()  # fired but not raised yet: before the call, not inside
            self.in_database += 1
        try:
            result = execute(sql, params, many, context)
        except Exception as exc:
            if self._fired_in_call():
                raise _raised_here() from exc  # the cancel's error is the timeout's doing
            raise
        if self._fired_in_call():
            raise _raised_here()
        return result

    def _fired_in_call(self) -> bool:
        with self.lock:
            self.in_database -= 1
            fired, self.fired_in_database = self.fired_in_database, False
            return fired and self.armed and not self.surfaced

    def _fire(self) -> bool:
        with self.lock:
            if not self.armed:
                return False
            # Cancel and raise before waking a slot_wait: woken first, the slot went on to its
            # failure write, which the late cancel or signal then broke ("the connection is
            # closed", seen once in a fresh-clone run).
            self.expired = True
            _cancel_query(self.connection)
            if self.in_database:
                self.fired_in_database = True  # the call raises it as it returns
            elif self.by_signal:
                signal.pthread_kill(self.thread_id, signal.SIGALRM)
            else:
                _raise_in_thread(self.thread_id, SlotWallTimeout)
            self.fired.set()
            return True


def _on_alarm(signum: int, frame: Any) -> None:
    slot: Slot | None = getattr(_current, "slot", None)
    if slot is None or not slot.armed or not slot.expired or slot.surfaced:
        return
    if slot.in_database:
        slot.fired_in_database = True  # the call raises it as it returns (shield_database)
        return
    raise SlotWallTimeout()


def _raise_in_thread(thread_id: int, exc_type: type[BaseException]) -> None:
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                                      ctypes.py_object(exc_type))
    if done > 1:  # "should not happen": undo, as the C API asks
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)


def _withdraw_in_thread(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)


def _cancel_query(wrapper: Any | None) -> None:
    raw = getattr(wrapper, "connection", None) if wrapper is not None else None
    if raw is None:
        return
    try:
        cancel = getattr(raw, "cancel_safe", None) or raw.cancel
        cancel()
    except Exception:  # a closed or broken connection: nothing in flight to cancel
        log.debug("wall timeout: cannot cancel the slot's query", exc_info=True)


class _Watchdog(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="wall-timeout-watchdog", daemon=True)
        self._heap: list[tuple[float, int, Slot, bool]] = []
        self._seq = itertools.count()
        self._wake = threading.Condition()

    def schedule(self, at: float, slot: Slot, *, backstop: bool) -> None:
        with self._wake:
            heapq.heappush(self._heap, (at, next(self._seq), slot, backstop))
            self._wake.notify()

    def run(self) -> None:
        while True:
            with self._wake:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    timeout = None if not self._heap else self._heap[0][0] - time.monotonic()
                    self._wake.wait(timeout)
                _, _, slot, backstop = heapq.heappop(self._heap)
            try:
                self._due(slot, backstop=backstop)
            except Exception:  # the watchdog must outlive any one slot's failure
                log.exception("wall-timeout watchdog: handling a slot failed")

    def _due(self, slot: Slot, *, backstop: bool) -> None:
        if not backstop:
            if slot._fire():
                self.schedule(time.monotonic() + grace_seconds, slot, backstop=True)
            return
        if slot.armed and slot.on_stuck is not None:
            log.error("a job ran %gs past its wall timeout of %gs in a blocking call; giving "
                      "its operation up to recovery", grace_seconds, slot.seconds)
            slot.on_stuck()


# How long a fired slot may take to reach a Python instruction before its job is given up.
grace_seconds = 30.0

_watchdog: _Watchdog | None = None
_watchdog_guard = threading.Lock()
_watchdog_pid = 0


def _the_watchdog() -> _Watchdog:
    """The process's watchdog (started on first use; a forked child starts its own)."""
    global _watchdog, _watchdog_pid
    with _watchdog_guard:
        if _watchdog is None or _watchdog_pid != os.getpid() or not _watchdog.is_alive():
            _watchdog = _Watchdog()
            _watchdog_pid = os.getpid()
            _watchdog.start()
        return _watchdog


class _NoAlarm:
    def disarm(self) -> None:
        pass


NO_ALARM: Any = _NoAlarm()


@contextmanager
def armed(seconds: float | None, *,
          on_stuck: Callable[[], None] | None = None) -> Iterator[Slot | _NoAlarm]:
    """Raise ``WallTimeout`` inside the block after ``seconds`` (None or ≤ 0: no bound), in the
    calling thread; ``on_stuck`` runs (in the watchdog's thread) if the block is still running
    ``grace_seconds`` after that."""
    if seconds is None or seconds <= 0:
        yield NO_ALARM
        return
    # The calling thread's database wrapper (``django.db.connection`` is a per-thread proxy).
    connection = connections[DEFAULT_DB_ALIAS]
    slot = Slot(seconds, on_stuck=on_stuck, connection=connection)
    _current.slot = slot
    _the_watchdog().schedule(slot.deadline, slot, backstop=False)
    try:
        with slot_deadline(Deadline(seconds), on_expiry=_expired_at_the_llm), \
                connection.execute_wrapper(slot.shield_database):
            yield slot
    finally:
        slot.disarm()


def _raised_here() -> SlotWallTimeout:
    """The slot's ``WallTimeout``, for the calling thread to raise itself once the watchdog has
    fired: the watchdog's own copy, if it has not surfaced yet, is withdrawn, so it cannot
    surface later, in the failure path."""
    _withdraw_in_thread(threading.get_ident())
    return SlotWallTimeout()


def _expired_at_the_llm() -> BaseException:
    """The LLM gateway found the slot's clock run out (its request was capped at the slot's
    time): the slot's ``WallTimeout``, raised there. The watchdog fires at the same instant."""
    slot = current_slot()
    if slot is not None:
        slot.fired.wait(1.0)  # in a prefork child, its SIGALRM may raise right here: the same
    return _raised_here()


def current_slot() -> Slot | None:
    """The calling thread's armed slot, if any."""
    slot: Slot | None = getattr(_current, "slot", None)
    return slot if slot is not None and slot.armed else None


def slot_wait(seconds: float) -> None:
    """Sleep ``seconds``, or raise ``WallTimeout`` as soon as the calling slot's time is up.

    The checkpoint for a job that waits on purpose: ``time.sleep`` cannot be interrupted in a
    thread, this can. Without an armed slot it is ``time.sleep``.
    """
    slot = current_slot()
    if slot is None:
        time.sleep(seconds)
        return
    if slot.fired.wait(seconds):
        raise _raised_here()
