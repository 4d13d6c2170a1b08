"""Values past PostgreSQL's own limits (an index entry, a tsvector): a 422 naming the field, or
stored safely, never a 500."""

from __future__ import annotations

import functools
import random
import string

import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import MemoryUnit

pytestmark = pytest.mark.django_db

BASE = "/v1/default/banks"


@pytest.fixture
def api() -> APIClient:
    return APIClient(raise_request_exception=False)


def _random_text(length: int, seed: int = 7) -> str:
    # Incompressible, so PostgreSQL cannot squeeze an index entry under its limit.
    rnd = random.Random(seed)
    return "".join(rnd.choice(string.ascii_letters) for _ in range(length))


@functools.cache  # one text for both fields' cases: building it is ~1 CPU-second
def _words(count: int, seed: int = 3) -> str:
    rnd = random.Random(seed)
    letters = "".join(rnd.choices(string.ascii_lowercase, k=7 * count))
    return " ".join(letters[i:i + 7] for i in range(0, len(letters), 7))


@pytest.mark.parametrize("where", ["item", "document_tags"])
def test_a_tag_longer_than_the_index_allows_is_422_naming_it_and_stores_nothing(
    api: APIClient, where: str
) -> None:
    tag = _random_text(3000)
    item: dict[str, object] = {"content": "hello"}
    body: dict[str, object] = {"items": [item]}
    if where == "item":
        item["tags"] = ["ok", tag]
        loc = ["body", "items", 0, "tags", 1]
    else:
        body["document_tags"] = [tag]
        loc = ["body", "document_tags", 0]
    response = api.post(f"{BASE}/long-tag/memories", body, format="json")
    assert response.status_code == 422, response.content
    (error,) = response.json()["detail"]
    assert error["loc"] == loc and "512" in error["msg"]
    assert not MemoryUnit.objects.filter(bank_id="long-tag").exists()


def test_a_tag_at_the_length_limit_is_stored(api: APIClient) -> None:
    tag = "é" * 512  # two bytes each in UTF-8; the limit counts characters
    response = api.post(f"{BASE}/tag-limit/memories",
                        {"items": [{"content": "hello", "tags": [tag]}]}, format="json")
    assert response.status_code == 200, response.content
    assert MemoryUnit.objects.get(bank_id="tag-limit").tags == [tag]


def test_an_overlong_tag_in_a_recall_filter_is_422_naming_it(api: APIClient) -> None:
    api.post(f"{BASE}/tag-filter/memories", {"items": [{"content": "hello"}]}, format="json")
    response = api.post(f"{BASE}/tag-filter/memories/recall",
                        {"query": "hello", "tags": [_random_text(600)]}, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "tags", 0]


def test_a_mental_model_tag_longer_than_the_index_allows_is_422_naming_it(api: APIClient) -> None:
    from mentalmodels.models import MentalModel

    response = api.post(
        f"{BASE}/mm-long-tag/mental-models",
        {"name": "n", "source_query": "q", "tags": ["ok", _random_text(3000)]}, format="json",
    )
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == ["body", "tags", 1]
    assert not MentalModel.objects.filter(bank_id="mm-long-tag").exists()


@pytest.mark.parametrize("field", ["content", "context"])
def test_a_memory_too_large_for_a_tsvector_is_stored_and_searchable_by_its_beginning(
    api: APIClient, field: str
) -> None:
    # ~1 MB of distinct words: its full-text vector would pass PostgreSQL's 1 MB tsvector cap
    # (measured: 1.43 MB for these 120,000 words, ~12 bytes a word; 88,000 would reach the cap).
    big = "zebracorn " + _words(120_000)
    item = {"content": big} if field == "content" else {"content": "a note", "context": big}
    response = api.post(f"{BASE}/huge/memories", {"items": [item]}, format="json")
    assert response.status_code == 200, response.content[:500]
    stored = MemoryUnit.objects.get(bank_id="huge")
    assert (stored.text if field == "content" else stored.context) == big
    # Lexical search still finds it by the words at its beginning (recall itself would cut a
    # 1 MB memory at the token budget, so the index is asked directly).
    matches = MemoryUnit.objects.filter(bank_id="huge", search_vector="zebracorn")
    assert list(matches.values_list("id", flat=True)) == [stored.id]
