"""Each banks response serializer is the one owner of its shape: what ``render`` builds is what
the serializer declares (and so what the OpenAPI document says), key for key and in order."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from hindsight.banks import schema
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.recall import RecallHit
from hindsight.banks.retaintypes import RetainQueued, RetainResult, Usage
from hindsight.infra.llm.models import LLMRequest

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _declared(serializer_class: type) -> list[str]:
    return list(serializer_class().fields)


def _nested(serializer_class: type, name: str) -> list[str]:
    field: Any = serializer_class().fields[name]
    return list(getattr(field, "child", field).fields)


def test_a_bank_profile_has_the_declared_fields_in_order() -> None:
    body = schema.BankProfileResponseSerializer.render(Bank(id="b", name="n", mission="m"))
    assert list(body) == _declared(schema.BankProfileResponseSerializer)
    assert list(body["disposition"]) == _nested(schema.BankProfileResponseSerializer,
                                                "disposition")


def test_a_bank_delete_has_the_declared_fields_in_order() -> None:
    assert list(schema.DeleteResponseSerializer.render({"bank_id": "b", "deleted_count": 3})) == \
        _declared(schema.DeleteResponseSerializer)


def test_a_bank_list_has_the_declared_fields_in_order() -> None:
    bank = Bank(id="b", name="n", created_at=NOW, updated_at=NOW)
    row = {"bank": bank, "fact_count": 1, "last_document_at": None,
           "last_write_at": None}
    body = schema.BankListResponseSerializer.render(
        {"banks": [row], "total": 1, "limit": 1, "offset": 0})
    assert list(body) == _declared(schema.BankListResponseSerializer)
    assert list(body["banks"][0]) == _declared(schema.BankListItemSerializer)


def test_a_bank_config_has_the_declared_fields_in_order() -> None:
    body = schema.BankConfigResponseSerializer.render(Bank(id="b", config={"k": 1}))
    assert list(body) == _declared(schema.BankConfigResponseSerializer)


def test_bank_stats_have_the_declared_fields_in_order() -> None:
    stats: dict[str, Any] = {name: None for name in reversed(
        _declared(schema.BankStatsResponseSerializer))}
    body = schema.BankStatsResponseSerializer.render(stats)
    assert list(body) == _declared(schema.BankStatsResponseSerializer)


def _retain_wire_order() -> list[str]:
    # ``async`` (a keyword) is declared after the class's fields but sent fourth, as upstream.
    declared = _declared(schema.RetainResponseSerializer)
    declared.remove("async")
    declared.insert(3, "async")
    return declared


def test_a_retain_answer_has_the_declared_fields_both_ways() -> None:
    sync = schema.RetainResponseSerializer.render_sync(
        RetainResult(bank_id="b", items_count=1, memory_ids=[], usage=Usage(1, 2, 3)))
    queued = schema.RetainResponseSerializer.render_async(
        RetainQueued(bank_id="b", items_count=1, operation_id="o"))
    assert list(sync) == list(queued) == _retain_wire_order()
    assert list(sync["usage"]) == _declared(schema.TokenUsageSerializer)


def test_a_recall_answer_has_the_declared_fields_in_order() -> None:
    hit = RecallHit(id="m", text="t", context="", fact_type="world", tags=[], updated_at=NOW,
                    created_at=NOW, document_id=None, metadata={}, entities=[],
                    occurred_start=NOW, occurred_end=None, mentioned_at=None,
                    source_memory_ids=[], score=0.5)
    body = schema.RecallResponseSerializer.render({"results": [hit], "trace": None})
    assert list(body) == _declared(schema.RecallResponseSerializer)
    assert list(body["results"][0]) == _declared(schema.RecallResultSerializer)
    assert list(body["results"][0]["scores"]) == _nested(schema.RecallResultSerializer, "scores")


def test_a_memory_list_has_the_declared_fields_in_order() -> None:
    memory = MemoryUnit(id=uuid.uuid4(), bank_id="b", text="t", fact_type="world", tags=["x"],
                        entities=[], source_memory_ids=[uuid.uuid4()], mentioned_at=NOW,
                        updated_at=NOW)
    body = schema.ListMemoryUnitsResponseSerializer.render(
        {"items": [memory], "total": 1, "limit": 1, "offset": 0})
    assert list(body) == _declared(schema.ListMemoryUnitsResponseSerializer)
    assert list(body["items"][0]) == _declared(schema.MemoryUnitListItemSerializer)


def test_a_tag_list_has_the_declared_fields_in_order() -> None:
    body = schema.ListTagsResponseSerializer.render(
        {"items": [("t", 2)], "total": 1, "limit": 1, "offset": 0})
    assert list(body) == _declared(schema.ListTagsResponseSerializer)
    assert list(body["items"][0]) == _declared(schema.TagItemSerializer)


def test_a_consolidation_answer_has_the_declared_fields_in_order() -> None:
    body = schema.ConsolidationResponseSerializer.render(
        {"operation_id": "o", "deduplicated": True})
    assert list(body) == _declared(schema.ConsolidationResponseSerializer)


def test_an_llm_request_page_has_the_declared_fields_in_order() -> None:
    row = LLMRequest(id=uuid.uuid4(), bank_id="b", status="success", started_at=NOW,
                     ended_at=NOW, prompt='{"a": 1}', response="text")
    body = schema.LLMRequestListResponseSerializer.render(
        {"bank_id": "b", "items": [row], "total": 1, "limit": 1, "offset": 0})
    assert list(body) == _declared(schema.LLMRequestListResponseSerializer)
    assert list(body["items"][0]) == _declared(schema.LLMRequestEntrySerializer)


def test_llm_request_stats_have_the_declared_fields_in_order() -> None:
    bucket = {"bucket": NOW, "total": 2, "success": 1, "error": 1, "input": 3, "output": 4}
    body = schema.LLMRequestStatsResponseSerializer.render(
        {"bank_id": "b", "period": "7d", "trunc": "day", "start": NOW, "buckets": [bucket]})
    assert list(body) == _declared(schema.LLMRequestStatsResponseSerializer)
    [rendered] = body["buckets"]
    assert list(rendered) == _declared(schema.LLMRequestStatsBucketSerializer)
    assert list(rendered["tokens"]) == _nested(schema.LLMRequestStatsBucketSerializer, "tokens")
