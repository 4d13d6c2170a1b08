"""Each response serializer is the one owner of its shape: what ``render`` builds is what the
serializer declares (and so what the OpenAPI document says), key for key and in order."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from hindsight.infra.tagscope import TagScope
from mentalmodels.api.preview import (
    LLMCallTraceSerializer,
    MentalModelDryRunRefreshResultSerializer,
    MentalModelFactCountsSerializer,
    MentalModelRefreshScopeSerializer,
    MentalModelRefreshTraceSerializer,
    MentalModelRefreshWindowSerializer,
    MentalModelTraceToolCallSerializer,
)
from mentalmodels.api.serializers import (
    DETAILS,
    AsyncOperationSubmitResponseSerializer,
    CreateMentalModelResponseSerializer,
    MentalModelDeleteResponseSerializer,
    MentalModelHistoryEntrySerializer,
    MentalModelListResponseSerializer,
    MentalModelResponseSerializer,
)
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.refresh.attempt import RefreshAttempt
from mentalmodels.refresh.records import Outcome, Plan, Preview
from mentalmodels.refresh.trace import build_trace

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _declared(serializer_class: type) -> list[str]:
    return list(serializer_class().fields)


@pytest.mark.django_db  # is_knowledge_page probes the knowledge base's index
@pytest.mark.parametrize("detail", DETAILS)
def test_a_rendered_model_has_the_declared_fields_in_order(detail: str) -> None:
    model = MentalModel(bank_id="b", mental_model_id="m", name="n", source_query="q", tags=["t"],
                        content="c", trigger={}, reflect_response={"text": "c"},
                        created_at=NOW)
    body = MentalModelResponseSerializer.render_model(model, detail=detail, is_stale=False)
    assert list(body) == _declared(MentalModelResponseSerializer)


def test_the_small_responses_have_their_declared_fields_in_order() -> None:
    assert list(MentalModelListResponseSerializer.render(
        {"total": 0, "limit": 1, "offset": 0}, items=[])) == \
        _declared(MentalModelListResponseSerializer)
    assert list(CreateMentalModelResponseSerializer.render(
        {"mental_model_id": "m", "operation_id": uuid.uuid4()})) == \
        _declared(CreateMentalModelResponseSerializer)
    assert list(AsyncOperationSubmitResponseSerializer.render({"id": uuid.uuid4()})) == \
        _declared(AsyncOperationSubmitResponseSerializer)
    assert list(MentalModelDeleteResponseSerializer.render()) == \
        _declared(MentalModelDeleteResponseSerializer)


@pytest.mark.parametrize(("kind", "left_out"), [
    ("version", {"outcome", "failure_reason", "error_message", "operation_id"}),
    ("refresh_failed", {"cause", "changes"}),
])
def test_a_history_entry_has_the_declared_fields_in_order_but_the_other_kinds(
    kind: str, left_out: set[str]
) -> None:
    entry = MentalModelHistory(kind=kind, previous_content="p", reason="r", exception="e",
                               operation_id=uuid.uuid4(), changed_at=NOW)
    body = MentalModelHistoryEntrySerializer.render(entry)
    declared = _declared(MentalModelHistoryEntrySerializer)
    assert list(body) == [name for name in declared if name not in left_out]
    # What a kind leaves out is what the document marks optional for it.
    fields = MentalModelHistoryEntrySerializer().fields
    assert all(not fields[name].required for name in left_out)
    if kind == "refresh_failed":  # upstream's failure record: no content, none replaced
        assert body["previous_content"] is None and body["previous_reflect_response"] is None


# --- the dry run ---------------------------------------------------------------------------------


def _preview(effective_mode: str, *, with_tool_call: bool = True) -> Preview:
    model = MentalModel(bank_id="b", mental_model_id="m", name="n", content="old\n")
    plan = Plan(model=model, requested_mode=effective_mode, effective_mode=effective_mode,
                mode_fallback_reason=None, scope=TagScope(tags=("t",), fact_types=("world",)),
                cutoff=NOW, window_after=NOW if effective_mode == "delta" else None,
                exclude_mental_models=False, exclude_ids=["m"], budget="mid",
                response_schema=None, keep_trace=False)
    outcome = Outcome(outcome="content_written", content="new\n", candidate="new\n",
                      watermark=NOW, based_on={"world": [{"id": "x"}]}, mental_models=[],
                      reflected=True, facts_retrieved={"world": 1}, facts_used={"world": 1})
    clock = RefreshAttempt()
    clock.plan = plan
    if with_tool_call:
        clock.tool_calls.append({"name": "recall", "input": {"query": "q"}, "result_count": 1,
                                 "duration_ms": 3, "iteration": 1})
        clock.tool_outputs.append({"facts": [], "count": 0})
        clock.llm_calls.append({"scope": "agent_1", "duration_ms": 2})
    trace = build_trace(plan, clock, outcome="content_written", with_outputs=True)
    return Preview(model=model, plan=plan, outcome=outcome, current_content="old\n",
                   trace=trace, usage=dict(clock.usage), duration_ms=5, warnings=[])


@pytest.mark.parametrize("effective_mode", ["full", "delta"])
def test_a_dry_run_result_has_the_declared_fields_in_order(effective_mode: str) -> None:
    body = MentalModelDryRunRefreshResultSerializer.render(_preview(effective_mode))
    assert list(body) == _declared(MentalModelDryRunRefreshResultSerializer)
    assert list(body["scope"]) == _declared(MentalModelRefreshScopeSerializer)
    assert list(body["window"]) == _declared(MentalModelRefreshWindowSerializer)
    assert list(body["facts"]) == _declared(MentalModelFactCountsSerializer)


@pytest.mark.parametrize("with_outputs", [True, False])
def test_the_trace_a_refresh_records_has_the_declared_fields_in_order(with_outputs: bool) -> None:
    plan = _preview("full").plan
    clock = RefreshAttempt()
    clock.tool_calls.append({"name": "recall", "input": {}, "duration_ms": 1, "iteration": 1})
    clock.tool_outputs.append({"facts": [], "count": 0})
    clock.llm_calls.append({"scope": "agent_1", "duration_ms": 2})
    trace = build_trace(plan, clock, outcome="content_written", with_outputs=with_outputs)
    assert list(trace) == _declared(MentalModelRefreshTraceSerializer)
    (call,) = trace["tool_calls"]
    declared_call = _declared(MentalModelTraceToolCallSerializer)
    # A stored trace keeps no tool outputs: the field the document marks optional.
    assert list(call) == (declared_call if with_outputs else declared_call[:-1])
    assert not MentalModelTraceToolCallSerializer().fields[declared_call[-1]].required
    assert [list(c) for c in trace["llm_calls"]] == [_declared(LLMCallTraceSerializer)]
