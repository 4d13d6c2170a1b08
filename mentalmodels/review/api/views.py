"""HTTP views of restore and review under ``/v1/default/banks/{bank_id}/mental-models/{id}``:
parse, call one service or selector, render."""

from __future__ import annotations

import uuid

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.infra.edge.schema import errors, query_parameters
from hindsight.infra.edge.serializers import body_of
from hindsight.infra.errors import FieldError
from mentalmodels import selectors as mm_selectors
from mentalmodels import services as mm_services
from mentalmodels.api.serializers import MentalModelResponseSerializer
from mentalmodels.review import selectors, services
from mentalmodels.review.api import serializers as s
from mentalmodels.staleness import stale_flags

_PROPOSAL_ID = OpenApiParameter("proposal_id", str, OpenApiParameter.PATH,
                                description="A proposal's id (a UUID)")


def _proposal_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise FieldError(("path", "proposal_id"),
                         f"proposal_id must be a UUID; got {value[:100]!r}",
                         "uuid_parsing") from None


class MentalModelRestore(APIView):
    @extend_schema(operation_id="restore_mental_model_version",
                   summary="Restore a version from the model's history",
                   request=s.RestoreMentalModelRequestSerializer,
                   responses={200: MentalModelResponseSerializer, **errors(404, 422)})
    def post(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        mm_selectors.mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
        fields = s.RestoreMentalModelRequestSerializer.parse(body_of(request))
        model = mm_services.mental_model_restore(
            bank_id=bank_id, mental_model_id=mental_model_id, version_id=fields["version_id"])
        return Response(MentalModelResponseSerializer.render_model(
            model, detail="full", is_stale=stale_flags([model])[model.uid]))


class ProposalCollection(APIView):
    @extend_schema(operation_id="list_mental_model_proposals",
                   summary="List a mental model's proposals, newest first",
                   parameters=query_parameters(s.ProposalListQuerySerializer),
                   responses={200: s.ProposalListResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str, mental_model_id: str) -> Response:
        query = s.ProposalListQuerySerializer.parse(request.query_params)
        items = selectors.proposals_list(bank_id=bank_id, mental_model_id=mental_model_id,
                                         status=query["status"])
        return Response(s.ProposalListResponseSerializer.render(
            items=s.ProposalResponseSerializer.render_many(items)))


class ProposalItem(APIView):
    @extend_schema(operation_id="get_mental_model_proposal", summary="Get a proposal",
                   parameters=[_PROPOSAL_ID],
                   responses={200: s.ProposalResponseSerializer, **errors(404, 422)})
    def get(self, request: Request, bank_id: str, mental_model_id: str,
            proposal_id: str) -> Response:
        proposal = selectors.proposal_get(bank_id=bank_id, mental_model_id=mental_model_id,
                                          proposal_id=_proposal_id(proposal_id))
        return Response(s.ProposalResponseSerializer.render(proposal))


class ProposalApprove(APIView):
    @extend_schema(operation_id="approve_mental_model_proposal",
                   summary="Apply a pending proposal as a new version",
                   parameters=[_PROPOSAL_ID], request=None,
                   responses={200: s.ProposalResponseSerializer, **errors(404, 409, 422)})
    def post(self, request: Request, bank_id: str, mental_model_id: str,
             proposal_id: str) -> Response:
        pid = _proposal_id(proposal_id)
        selectors.proposal_get(bank_id=bank_id, mental_model_id=mental_model_id, proposal_id=pid)
        s.ApproveProposalRequestSerializer.parse(body_of(request))
        proposal = services.proposal_approve(bank_id=bank_id, mental_model_id=mental_model_id,
                                             proposal_id=pid)
        return Response(s.ProposalResponseSerializer.render(proposal))


class ProposalReject(APIView):
    @extend_schema(operation_id="reject_mental_model_proposal",
                   summary="Discard a pending proposal, keeping the reason",
                   parameters=[_PROPOSAL_ID], request=s.RejectProposalRequestSerializer,
                   responses={200: s.ProposalResponseSerializer, **errors(404, 409, 422)})
    def post(self, request: Request, bank_id: str, mental_model_id: str,
             proposal_id: str) -> Response:
        pid = _proposal_id(proposal_id)
        selectors.proposal_get(bank_id=bank_id, mental_model_id=mental_model_id, proposal_id=pid)
        fields = s.RejectProposalRequestSerializer.parse(body_of(request))
        proposal = services.proposal_reject(bank_id=bank_id, mental_model_id=mental_model_id,
                                            proposal_id=pid, reason=fields["reason"])
        return Response(s.ProposalResponseSerializer.render(proposal))
