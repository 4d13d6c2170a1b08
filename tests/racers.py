"""Racing processes for the race tests' child programs (``tests/operations/coalesce_child.py``,
``tests/knowledge/race_child.py``): Django is started once, then forked into the racers, each
an OS process of its own with its own connections, without paying Django's start-up (about a
CPU-second) once per racer. The racers wait on one barrier, so they start together once every
one of them is connected."""

from __future__ import annotations

import importlib
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

# How long a racer waits for the others to connect before the run counts as failed.
START_TIMEOUT_SECONDS = 60.0


def django_once(*modules: str) -> None:
    """Django set up, and ``modules`` imported, before the fork (no connection opened yet: each
    racer opens its own)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
    import django  # noqa: PLC0415 - after the settings module is named

    django.setup()
    for module in modules:
        importlib.import_module(module)


def race(target: Callable[..., None], racers: list[tuple[Any, ...]],
         parties: int) -> tuple[list[dict[str, Any]], list[int]]:
    """Fork one process per ``racers`` entry, running ``target(*args, start, reports)``:
    ``start`` is the barrier of ``parties`` (each waits on it with ``START_TIMEOUT_SECONDS``, and
    aborts it when it cannot come), ``reports`` the queue it puts its one report in. The reports,
    and the exit codes of the processes that did not exit cleanly."""
    context = multiprocessing.get_context("fork")
    start = context.Barrier(parties)
    reports = context.SimpleQueue()
    children = [context.Process(target=target, args=(*args, start, reports)) for args in racers]
    for child in children:
        child.start()
    received = [reports.get() for _ in children]  # before joining: a full pipe would block them
    for child in children:
        child.join()
    codes = [child.exitcode or 0 for child in children]  # joined: never None
    return received, [code for code in codes if code != 0]
