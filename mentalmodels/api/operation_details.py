"""A refresh operation's ``details`` on the operations API (upstream 1.1.0's
``RefreshMentalModelOperationDetails``): how they render and the serializer that documents them,
registered with ``operations.api.details`` from ``MentalModelsConfig.ready``."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from hindsight.infra.vocabulary import RefreshFailureReason, RefreshOutcome
from mentalmodels.refresh.records import MentalModelOperationType

REFRESH_OUTCOMES = tuple(o.value for o in RefreshOutcome)
REFRESH_FAILURE_REASONS = tuple(r.value for r in RefreshFailureReason)


class RefreshMentalModelOperationDetailsSerializer(serializers.Serializer):
    operation_type = serializers.ChoiceField(choices=(MentalModelOperationType.REFRESH.value,))
    outcome = serializers.ChoiceField(choices=REFRESH_OUTCOMES)
    failure_reason = serializers.ChoiceField(choices=REFRESH_FAILURE_REASONS, allow_null=True)


def refresh_details_render(details: dict[str, Any]) -> dict[str, Any] | None:
    # Only once an outcome is known; anything else would fail the client's enum validation.
    if not details.get("outcome"):
        return None
    return {
        "operation_type": MentalModelOperationType.REFRESH.value,
        "outcome": details["outcome"],
        "failure_reason": details.get("failure_reason"),
    }
