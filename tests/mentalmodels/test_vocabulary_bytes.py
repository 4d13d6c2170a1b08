"""The vocabulary's enum members are their wire values: a trace, a refusal's details or a
history entry built with members serialises to the same bytes as one built with the strings."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from rest_framework.renderers import JSONRenderer

from hindsight.infra.vocabulary import ModeFallbackReason, RefreshFailureReason, RefreshMode, RefreshOutcome
from mentalmodels.models import HistoryKind
from mentalmodels.refresh.attempt import RefreshAttempt
from mentalmodels.refresh.errors import RefreshFailed
from mentalmodels.refresh.trace import build_trace


def _dumps(value: Any) -> list[bytes]:
    """As the API renders it, as a JSONField stores it, as ``json`` writes it."""
    return [JSONRenderer().render(value), json.dumps(value, cls=DjangoJSONEncoder).encode(),
            json.dumps(value).encode()]


def test_a_trace_built_with_members_has_the_bytes_of_one_built_with_strings() -> None:
    clock = RefreshAttempt()
    clock.warnings.append("w")
    members = build_trace(None, clock, outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                          failure_reason=RefreshFailureReason.UNEXPECTED_ERROR, error="e")
    strings = build_trace(None, clock, outcome="refresh_failed_error",
                          failure_reason="unexpected_error", error="e")
    members["recorded_at"] = strings["recorded_at"]
    members["duration_ms"] = strings["duration_ms"]
    assert _dumps(members) == _dumps(strings)
    assert type(members["effective_mode"]) is RefreshMode  # a member went in, and out the same


def test_members_as_values_and_keys_serialise_as_their_values() -> None:
    every = [*RefreshOutcome, *RefreshFailureReason, *RefreshMode, *ModeFallbackReason,
             *HistoryKind]
    members = {member: [member, f"{member}"] for member in every}
    strings = {member.value: [member.value, member.value] for member in every}
    assert _dumps(members) == _dumps(strings)


def test_a_refusal_carries_the_values_it_was_given_as_members() -> None:
    refused = RefreshFailed("m", outcome=RefreshOutcome.REFRESH_FAILED_EMPTY_CANDIDATE,
                            failure_reason=RefreshFailureReason.EMPTY_CANDIDATE)
    assert refused.outcome == "refresh_failed_empty_candidate"
    assert refused.failure_reason == "empty_candidate"
    assert str(refused.outcome) == "refresh_failed_empty_candidate"
