"""The wall timeout of a running job: the one place that knows how a handler is cut short.

``armed(seconds)`` bounds the block it wraps: past ``seconds`` the handler's code raises
``WallTimeout`` (a failed, retryable attempt). ``WallTimeoutAlarm.disarm()`` ends the bound
early — ``Job.finishing`` calls it as the final write starts, since the clock bounds the work,
not the commit.

Today's mechanism is SIGALRM, so it works in a process's main thread only (a prefork pool
child); elsewhere (a thread) the alarm is a no-op and the Celery soft time limit is the bound.
Replacing the mechanism (a thread pool needs one that is not a signal) means replacing this
module; ``Job`` and the engine only see ``armed`` and ``disarm``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from operations.errors import WallTimeout


class WallTimeoutAlarm:
    """An armed wall timeout (or none: ``disarm`` is then a no-op)."""

    def __init__(self, *, signalled: bool) -> None:
        self._signalled = signalled

    def disarm(self) -> None:
        if self._signalled:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._signalled = False


NO_ALARM = WallTimeoutAlarm(signalled=False)


def _usable() -> bool:
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")


@contextmanager
def armed(seconds: float | None) -> Iterator[WallTimeoutAlarm]:
    """Raise ``WallTimeout`` inside the block after ``seconds`` (None or ≤ 0: no bound)."""
    if seconds is None or seconds <= 0 or not _usable():
        yield NO_ALARM
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise WallTimeout(f"wall timeout of {seconds:g}s exceeded")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    alarm = WallTimeoutAlarm(signalled=True)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield alarm
    finally:
        alarm.disarm()
        signal.signal(signal.SIGALRM, previous)
