"""The SQL one refresh runs in the worker, pinned statement by statement: a statement added to
the hot path (a re-read, a second lookup, a per-call write) fails here and names itself."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fakes.llm_server import Reply
from hindsight.banks.models import Bank
from mentalmodels.services import mental_model_refresh_submit
from operations.engine import operation_execute
from operations.models import Operation
from tests.factories import make_memory, make_mental_model

_TABLE = re.compile(r'(?:FROM|INTO|UPDATE|JOIN)\s+"?(\w+)"?', re.IGNORECASE)


def _label(sql: str) -> str:
    """``VERB table`` (the first table named), or the statement itself when it is short."""
    sql = " ".join(sql.split())
    if sql.startswith("SET LOCAL"):  # recall: SET LOCALs and the retrieval in one round trip
        sql = sql.rsplit("; ", 1)[-1]
    verb = sql.split(" ", 1)[0].upper()
    if verb in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK"):
        return verb
    if "pg_advisory_xact_lock(" in sql and "clock_timestamp()" in sql:
        return "SELECT clock_timestamp() under pg_advisory_xact_lock"
    if "pg_advisory_xact_lock" in sql:
        return "SELECT pg_advisory_xact_lock"
    if sql.startswith("SELECT clock_timestamp()"):
        return "SELECT clock_timestamp()"
    if "<=>" in sql and "banks_memoryunit" in sql:  # a vector search: recall, whatever its shape
        return "recall banks_memoryunit"
    match = _TABLE.search(sql)
    return f"{verb} {match.group(1) if match else '?'}"


def _respond(body: dict) -> Reply:
    """Forced turns look things up; the free turn answers citing what the lookups returned."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
    ids = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            payload = json.loads(message["content"])
            ids += [item["id"] for key in ("facts", "observations") for item in payload.get(key, [])]
    return Reply.tool_calls([("done", {"answer": "## Team\n\nAsync first.", "memory_ids": ids})])


@pytest.fixture
def model(transactional_db, scripted_llm, openai_embeddings):
    bank = Bank.objects.create(id="queries-bank")
    make_memory(bank, "The team prefers async communication", embed=True)
    make_memory(bank, "The team meets on Mondays", fact_type="observation", embed=True)
    scripted_llm.respond_with(_respond)
    return make_mental_model(bank, "team", source_query="How does the team work?")


def test_one_refresh_in_the_worker_runs_these_statements(model):
    op = mental_model_refresh_submit(model=model)
    with CaptureQueriesContext(connection) as captured:
        assert operation_execute(operation_id=str(op.id), holder="test") == "completed"
    assert Operation.objects.get(id=op.id).status == "completed"
    labels = [_label(query["sql"]) for query in captured.captured_queries]
    assert labels == [
        # The engine: the operation's key (for the Redis lock), then the claim — a new fence on
        # the key's lease and the compare-and-set pending → processing, in one transaction.
        "SELECT operations_operation",
        # The handler's hold: the bank's token budget (its config; no budget, no sum).
        "SELECT banks_bank",
        "BEGIN", "INSERT operations_lease", "UPDATE operations_operation", "COMMIT",
        # The pipeline: the model, the snapshot cutoff under the bank's write lock (lock and
        # clock in one statement, its own transaction), the newest memory in scope (the
        # watermark), whether any sibling model is visible.
        "SELECT mentalmodels_mentalmodel",
        "SELECT clock_timestamp() under pg_advisory_xact_lock",
        "SELECT banks_memoryunit",
        "SELECT mentalmodels_mentalmodel",
        # The directives the model's scope applies (its prompt's hard rules).
        "SELECT directives_directive",
        # The reflect loop: one request-log row per LLM call, one recall per lookup (the query
        # text embedded once for both).
        "INSERT llm_llmrequest", "recall banks_memoryunit",
        "INSERT llm_llmrequest", "recall banks_memoryunit",
        "INSERT llm_llmrequest",
        # Whether the change is applied or proposed: the bank's mental_model_review (the
        # model's trigger.review is null; docs/behaviour.md#review-before-apply).
        "SELECT banks_bank",
        # The fenced write: the lease's fence, the model locked, its history (the version and
        # the trim in one statement), the model, whether a webhook takes the page event (none:
        # no delivery row), the operation's completion — one transaction.
        "BEGIN", "SELECT operations_lease", "SELECT mentalmodels_mentalmodel",
        "WITH mentalmodels_mentalmodelhistory",
        "UPDATE mentalmodels_mentalmodel", "SELECT webhooks_webhook",
        "UPDATE operations_operation", "COMMIT",
        # After the commit and the lock's release: the key's next pending operation.
        "SELECT operations_operation",
    ]
