"""A sync retain answers within the request's time: extraction runs concurrently with a bound, a
batch too large to extract in one request is refused at once (pointing to ``async: true``), and
one that runs past its time is cut (504), storing nothing."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from django.db.backends.signals import connection_created
from rest_framework.test import APIClient

from fakes.extraction import InFlight
from fakes.llm_server import Reply
from hindsight.banks.models import MemoryUnit
from hindsight.banks.retaintypes import RetainItem
from hindsight.banks.services import memories_retain_sync
from hindsight.infra.config import read_config
from hindsight.infra.llm import collect_llm_calls
from hindsight.infra.llm.context import llm_context
from hindsight.infra.llm.models import LLMRequest

pytestmark = pytest.mark.django_db

BASE = "/v1/default/banks"


def _items(n: int) -> list[dict[str, Any]]:
    return [{"content": f"item {i:02d}"} for i in range(n)]


def test_sync_retain_of_50_items_at_50_ms_per_call_extracts_concurrently_in_item_order(
    scripted_llm: Any, settings: Any
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, retain_extraction_concurrency=8)
    responder = InFlight(0.05)
    scripted_llm.respond_with(responder)
    response = APIClient().post(f"{BASE}/c/memories", {"items": _items(50)}, format="json")
    assert response.status_code == 200, response.content
    assert len(scripted_llm.requests) == 50
    assert 1 < responder.peak <= 8
    stored = MemoryUnit.objects.filter(bank_id="c").order_by("text").values_list("text", flat=True)
    assert list(stored) == [f"fact of item {i:02d}" for i in range(50)]


def test_concurrent_extraction_reports_every_call_to_the_callers_collector(
    scripted_llm: Any
) -> None:
    scripted_llm.respond_with(InFlight(0.01))
    with collect_llm_calls() as records:
        memories_retain_sync(bank_id="r", items=[RetainItem(content=f"x{i}") for i in range(5)])
    assert len(records) == 5


def test_concurrent_extraction_opens_a_connection_per_thread_not_per_call(
    scripted_llm: Any, settings: Any
) -> None:
    # Each call writes its row of the LLM request log from the thread that made it.
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, retain_extraction_concurrency=4)
    scripted_llm.respond_with(InFlight(0.005))
    opened: list[str] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(count)
    try:
        with llm_context(bank_id="n", operation="retain"):
            result = memories_retain_sync(
                bank_id="n", items=[RetainItem(content=f"x{i:02d}") for i in range(20)])
    finally:
        connection_created.disconnect(count)
    assert len(result.memory_ids) == 20
    assert LLMRequest.objects.filter(bank_id="n").count() == 20
    assert 1 <= len(opened) <= 4 and len(set(opened)) == len(opened)


def test_a_failed_call_among_concurrent_ones_is_raised_and_stores_nothing(
    scripted_llm: Any, settings: Any
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, retain_extraction_concurrency=4)
    answer = InFlight(0.005)
    scripted_llm.respond_with(lambda body: Reply.error(400, "boom")
                              if "item 07" in body["messages"][-1]["content"] else answer(body))
    response = APIClient(raise_request_exception=False).post(
        f"{BASE}/f/memories", {"items": _items(20)}, format="json")
    assert response.status_code == 502 and "fact extraction failed" in response.json()["detail"]
    assert not MemoryUnit.objects.filter(bank_id="f").exists()


def test_sync_retain_over_the_llm_item_bound_is_refused_at_once_pointing_to_async(
    scripted_llm: Any, settings: Any
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, retain_sync_max_llm_items=3)
    response = APIClient().post(f"{BASE}/b/memories", {"items": _items(4)}, format="json")
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "items"]
    assert "at most 3 items" in error["msg"] and '"async": true' in error["msg"]
    assert "HINDSIGHT_API_RETAIN_SYNC_MAX_LLM_ITEMS" in error["msg"]
    assert scripted_llm.requests == []
    assert not MemoryUnit.objects.filter(bank_id="b").exists()


def test_the_bound_counts_only_items_the_llm_extracts_and_not_async_batches(
    scripted_llm: Any, settings: Any
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, retain_sync_max_llm_items=3)
    verbatim = [{**item, "strategy": "verbatim"} for item in _items(4)]
    response = APIClient().post(f"{BASE}/v/memories", {"items": verbatim}, format="json")
    assert response.status_code == 200, response.content
    response = APIClient().post(f"{BASE}/v/memories", {"items": _items(4), "async": True},
                                format="json")
    assert response.status_code == 200, response.content
    assert response.json()["operation_id"]
    assert scripted_llm.requests == []


def test_sync_retain_past_its_timeout_is_504_naming_async_and_stores_nothing(
    scripted_llm: Any, settings: Any
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, retain_sync_timeout_seconds=0.3)
    scripted_llm.respond_with(InFlight(2.0))
    response = APIClient(raise_request_exception=False).post(
        f"{BASE}/t/memories", {"items": _items(2)}, format="json")
    assert response.status_code == 504
    detail = response.json()["detail"]
    assert "HINDSIGHT_API_RETAIN_SYNC_TIMEOUT" in detail and '"async": true' in detail
    assert not MemoryUnit.objects.filter(bank_id="t").exists()


@pytest.mark.parametrize("variable", [
    "HINDSIGHT_API_RETAIN_EXTRACTION_CONCURRENCY", "HINDSIGHT_API_RETAIN_SYNC_MAX_LLM_ITEMS",
    "HINDSIGHT_API_RETAIN_SYNC_TIMEOUT",
])
def test_retain_bounds_are_configurable_and_checked(variable: str) -> None:
    assert [p.variable for p in read_config({variable: "0"}).errors] == [variable]
    cfg = read_config({variable: "7"})
    assert not cfg.errors
    assert 7 in (cfg.retain_extraction_concurrency, cfg.retain_sync_max_llm_items,
                 cfg.retain_sync_timeout_seconds)
