"""The wire shapes of restore and review (ours: upstream 1.1.0 has neither), in the edge idiom
(``hindsight.infra.edge.serializers``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework import serializers

from hindsight.infra.edge.serializers import Body, Choice, Integer, Query, Rendered, Text, computed
from mentalmodels.api.serializers import PageChangesField
from mentalmodels.review.models import PROPOSAL_STATUSES, MentalModelProposal
from mentalmodels.review.services import REASON_MAX_CHARS

INT64_MAX = 2**63 - 1


class RestoreMentalModelRequestSerializer(Body):
    component_name = "RestoreMentalModelRequest"

    version_id = Integer(min_value=1, max_value=INT64_MAX,
                         help_text="The id of a version entry of this model's history (GET "
                                   "…/history): its kept content and document are put back")


class RejectProposalRequestSerializer(Body):
    component_name = "RejectProposalRequest"

    reason = Text(max_length=REASON_MAX_CHARS,
                  help_text="Why the change is rejected (kept with the proposal)")


class ApproveProposalRequestSerializer(Body):
    """No body, ``null`` or ``{}``: approving takes no parameters."""

    component_name = "ApproveProposalRequest"
    when_absent: ClassVar[Mapping[str, Any]] = {}


class ProposalListQuerySerializer(Query):
    status = Choice(choices=PROPOSAL_STATUSES, required=False, default=None,
                    help_text="Only the proposals in this status (all when left out)")


def _based_on(proposal: MentalModelProposal) -> dict[str, Any]:
    return (proposal.reflect_response or {}).get("based_on") or {}


class ProposalResponseSerializer(Rendered):
    """A refresh's change waiting for review, or how its review ended
    (docs/behaviour.md#review-before-apply)."""

    id = serializers.UUIDField()
    mental_model_id = serializers.CharField(source="model.mental_model_id")
    status = serializers.ChoiceField(choices=PROPOSAL_STATUSES)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_null=True,
                                   help_text="Why it was rejected, superseded or expired")
    operation_id = serializers.UUIDField(allow_null=True, help_text="The refresh that made it")
    based_on = computed(serializers.DictField(help_text="The memories it rests on, by fact "
                                                        "type (as reflect_response.based_on)"),
                        _based_on)
    content = serializers.CharField(allow_blank=True, help_text="The proposed page")
    changes = PageChangesField(help_text="Against the version it was made from (the current "
                                         "one while it is pending and approvable)")
    superseded_by = computed(serializers.UUIDField(allow_null=True),
                             lambda p: p.superseded_by_id)
    version_id = computed(serializers.IntegerField(
        allow_null=True, help_text="Approved: the history entry that keeps the page it "
                                   "replaced (restore it to undo the approval)"),
        lambda p: p.version_id)


class ProposalListResponseSerializer(Rendered):
    items = ProposalResponseSerializer(many=True)
