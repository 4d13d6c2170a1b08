"""Each refresh operation records its LLM requests and tokens in ``result_metadata["llm"]``,
completed or failed, and its requests are in the bank's LLM request log under its id."""

from __future__ import annotations

import pytest

from fakes.consolidation_llm import COMPLETION_TOKENS, PROMPT_TOKENS, ConsolidatingLLM
from fakes.llm_server import Reply
from hindsight.banks.models import Bank
from hindsight.infra.llm.models import LLMRequest
from mentalmodels.refresh.pipeline import refresh_dry_run
from mentalmodels.services import mental_model_refresh_submit
from operations.engine import operation_execute
from operations.models import Operation
from tests.factories import make_memory, make_mental_model


@pytest.fixture
def model(transactional_db):
    bank = Bank.objects.create(id="accounting-bank")
    make_memory(bank, "Alice prefers async communication", embed=True)
    return make_mental_model(bank, "team")


def run(model) -> Operation:
    op = mental_model_refresh_submit(model=model)
    operation_execute(operation_id=str(op.id), holder="test")
    return Operation.objects.get(id=op.id)


def test_a_completed_refresh_records_its_requests_and_tokens(model, llm):
    ConsolidatingLLM(llm)
    op = run(model)
    assert op.status == "completed", op.error_message
    n = len(llm.requests)
    assert n >= 2
    assert op.result_metadata["llm"] == {
        "requests": n, "errors": 0, "input_tokens": n * PROMPT_TOKENS,
        "output_tokens": n * COMPLETION_TOKENS,
        "total_tokens": n * (PROMPT_TOKENS + COMPLETION_TOKENS)}
    logged = LLMRequest.objects.filter(operation_id=op.id)
    assert logged.count() == n
    assert set(logged.values_list("operation", flat=True)) == {"refresh_mental_model"}


def test_a_failed_refresh_attempt_records_its_requests_too(model, llm):
    llm.respond_with(lambda body: Reply.error(400, "this prompt is too large"))
    op = run(model)
    assert op.status == "pending" and op.retry_count == 1  # retried later
    assert op.result_metadata["llm"]["requests"] == len(llm.requests) >= 1
    assert op.result_metadata["llm"]["errors"] == len(llm.requests)


def test_a_dry_run_logs_its_requests_under_the_bank(model, llm):
    ConsolidatingLLM(llm)
    refresh_dry_run(bank_id=model.bank_id, mental_model_id=model.mental_model_id)
    logged = LLMRequest.objects.filter(bank_id=model.bank_id)
    assert logged.count() == len(llm.requests) >= 1
    assert set(logged.values_list("operation", flat=True)) == {"refresh_dry_run"}
