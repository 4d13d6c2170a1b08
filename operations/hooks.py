"""Calling a handler's optional hooks (``on_cancelled``, ``on_attempt_failed``,
``on_attempt_failed_in_transaction``): the one place.

Both the engine (a running job) and the queue services (a failed attempt, a recovery, a cancel
outside a job) call them; a hook's failure is logged and never undoes what was recorded — the
in-transaction hook runs in a savepoint of its own, rolled back alone when it raises.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction

from operations import registry
from operations.jobs import Job
from operations.models import Operation

log = logging.getLogger(__name__)


def call_hook(handler: Any, name: str, *args: Any, **kwargs: Any) -> None:
    fn = getattr(handler, name, None)
    if fn is None:
        return
    try:
        fn(*args, **kwargs)
    except Exception:  # a hook's failure must not undo what was recorded
        log.exception("%s.%s failed", type(handler).__name__, name)


def call_hook_in_transaction(handler: Any, name: str, *args: Any, **kwargs: Any) -> None:
    """Run a hook inside the caller's transaction, in a savepoint: its writes commit with the
    caller's, and a hook that raises is undone alone (logged)."""
    fn = getattr(handler, name, None)
    if fn is None:
        return
    try:
        with transaction.atomic():
            fn(*args, **kwargs)
    except Exception:
        log.exception("%s.%s failed (its writes were rolled back)", type(handler).__name__, name)


def call_on_cancelled(*, operation_id: uuid.UUID | str) -> None:
    """Run the handler's ``on_cancelled`` for an operation cancelled outside a running job."""
    op = Operation.objects.filter(id=operation_id).first()
    if op is None:
        return
    handler = registry.get_handler(op.operation_type)
    if handler is not None:
        call_hook(handler, "on_cancelled", Job(op, fence=op.fence, key=op.lease_key))
