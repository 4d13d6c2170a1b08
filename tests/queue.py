"""The captured queue: ``sent`` records what the engine would publish to the broker.

Nothing reaches the broker: the operation id a publish would carry is appended to the list
instead, whether the engine publishes at once (``operations.dispatch.operation_send``, a worker
handing its key on) or once the transaction commits (``operation_send_on_commit``, a submit).
In a test's transaction, which never commits, the on-commit publish is recorded when it is
scheduled, i.e. what the broker would receive when the submitting transaction commits. A test
that runs the engine itself calls ``operation_execute`` with the ids it reads here.
"""

from __future__ import annotations

import uuid

import pytest

__all__ = ["sent"]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Operation ids the engine sent or scheduled to send on commit (nothing is published)."""
    published: list[str] = []

    def record(*, operation_id: uuid.UUID | str, operation_type: str | None = None) -> bool:
        published.append(str(operation_id))
        return True

    monkeypatch.setattr("operations.dispatch.operation_send", record)
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", record)
    return published
