"""Random JSON at the banks endpoints never yields a 5xx (hypothesis, bounded)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from hindsight.banks.models import MemoryUnit

pytestmark = pytest.mark.django_db

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20) | st.sampled_from(["\x00", "a\x00b", "*", "%_"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ITEM_KEYS = ["content", "context", "tags", "timestamp", "metadata", "document_id", "entities",
             "resolve_entities", "observation_scopes", "strategy", "update_mode"]
RECALL_KEYS = ["query", "types", "budget", "max_tokens", "trace", "query_timestamp", "include",
               "tags", "tags_match", "tag_groups", "min_scores", "temporal_window",
               "prefer_observations"]


def shaped(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys), json_values, max_size=len(keys))


retain_bodies = json_values | st.fixed_dictionaries(
    {"items": st.lists(shaped(ITEM_KEYS) | json_values, max_size=3)},
    optional={"async": json_values, "document_tags": json_values},
)
recall_bodies = json_values | shaped(RECALL_KEYS) | st.fixed_dictionaries(
    {"query": st.text(max_size=30)}, optional={k: json_values for k in RECALL_KEYS[1:]})
bank_bodies = json_values | shaped(["name", "mission", "disposition", "disposition_empathy",
                                    "retain_extraction_mode", "enable_observations"])


def test_random_bodies_never_yield_a_server_error(db: None) -> None:
    api = APIClient(raise_request_exception=False)
    api.put("/v1/default/banks/fz", {}, format="json")

    @hsettings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(retain=retain_bodies, recall=recall_bodies, bank=bank_bodies,
           config=st.fixed_dictionaries({"updates": st.dictionaries(
               st.sampled_from(["mental_model_min_refresh_interval_seconds", "enable_observations",
                                "x"]), json_values, max_size=2)}) | json_values)
    def check(retain: Any, recall: Any, bank: Any, config: Any) -> None:
        for method, path, body in (
            ("post", "/v1/default/banks/fz/memories", retain),
            ("post", "/v1/default/banks/fz/memories/recall", recall),
            ("put", "/v1/default/banks/fz", bank),
            ("patch", "/v1/default/banks/fz/config", config),
        ):
            response = getattr(api, method)(path, body, format="json")
            assert response.status_code < 500, (path, body, response.content)

    check()
    # Whatever was accepted was stored as text; nothing half-written.
    assert all(isinstance(m.text, str) and m.text.strip() for m in MemoryUnit.objects.all())
