"""The MCP ``sync_retain`` tool on a bank that has spent its token budget says the memory is kept
and parked (its operation and when it frees), never that it was stored
(docs/behaviour.md#over-budget-nothing-is-lost). The tool calls the live server over HTTP."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest

from hindsight.banks.models import MemoryUnit
from hindsight.surfaces.cli.api import HindsightApi
from hindsight.surfaces.mcp_server.tools import ToolBackend, set_backend, sync_retain
from operations.models import Operation
from tests.banks.test_budget import BANK, spend
from tests.factories import make_bank

pytestmark = pytest.mark.django_db(transaction=True)


def _sync_retain(api: HindsightApi, **arguments: Any) -> Any:
    """The tool called with this bank's backend, in a context of its own: the backend (a context
    variable) must not outlive the call, or a later test in this process would find it, its
    client closed."""
    def call() -> Any:
        set_backend(ToolBackend(api=api, default_bank=BANK))
        return sync_retain(**arguments)

    return contextvars.copy_context().run(call)


def test_sync_retain_on_a_spent_bank_answers_accepted_with_the_parked_operation(
    live_server: Any, scripted_llm: Any,
) -> None:
    make_bank(BANK, config={"llm_token_budget_per_day": 100})
    spend(BANK, 120, hours_ago=1)
    with HindsightApi(live_server.url) as api:
        answer = _sync_retain(api, content="Dana joined and prefers email.")
    assert answer["status"] == "accepted" and "budget" in answer["message"], answer
    assert answer["parked"]["reason"] == "llm_token_budget" and answer["parked"]["until"]
    op = Operation.objects.get(id=answer["operation_id"])
    assert op.status == "pending" and op.next_retry_at is not None
    assert scripted_llm.requests == [] and not MemoryUnit.objects.filter(bank_id=BANK).exists()

    # Verbatim spends nothing: stored at once, as before.
    with HindsightApi(live_server.url) as api:
        stored = _sync_retain(api, content="Erin joined in May.", strategy="verbatim")
    assert stored == {"status": "completed", "message": "Memory stored successfully",
                      "items_count": 1}
