"""Django admin for proposals (docs/behaviour.md#review-before-apply): the list of what refreshes
hold for review, and a page per proposal with its change side by side with the current page, a
summary by section and block, and Approve and Reject (with a reason) buttons. Both go through the
services (``proposal_approve``, ``proposal_reject``), so the admin is fenced and refused exactly
as the API is. Nothing is edited here by hand."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from hindsight.infra.errors import DomainError
from mentalmodels.admin import side_by_side
from mentalmodels.review.models import MentalModelProposal, ProposalStatus
from mentalmodels.review.services import proposal_approve, proposal_reject


@admin.register(MentalModelProposal)
class MentalModelProposalAdmin(admin.ModelAdmin):
    list_display = ("review_link", "model", "status", "created_at", "expires_at", "lines",
                    "decided_at", "reason")
    list_filter = ("status", "model__bank")
    search_fields = ("model__mental_model_id", "model__name")
    list_select_related = ("model",)
    ordering = ("-created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[MentalModelProposal]:
        return super().get_queryset(request).defer("document", "reflect_response")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="proposal")
    def review_link(self, proposal: MentalModelProposal) -> str:
        url = reverse("admin:review_mentalmodelproposal_review", args=[proposal.id])
        return format_html('<a class="proposal-review" href="{}">{}</a>', url,
                           "review" if proposal.status == ProposalStatus.PENDING else "show")

    @admin.display(description="lines +/-")
    def lines(self, proposal: MentalModelProposal) -> str:
        counts = (proposal.changes or {}).get("counts") or {}
        return f"+{counts.get('lines_added', 0)} / -{counts.get('lines_removed', 0)}"

    def get_urls(self) -> list[Any]:
        return [
            path("<uuid:proposal_id>/review/", self.admin_site.admin_view(self.review_view),
                 name="review_mentalmodelproposal_review"),
            *super().get_urls(),
        ]

    def review_view(self, request: HttpRequest, proposal_id: uuid.UUID) -> HttpResponse:
        proposal = get_object_or_404(MentalModelProposal.objects.select_related("model"),
                                     id=proposal_id)
        if not self.has_view_permission(request, proposal):
            raise PermissionDenied
        model = proposal.model
        url = reverse("admin:review_mentalmodelproposal_review", args=[proposal.id])
        if request.method == "POST":
            if not request.user.has_perm("mentalmodels.change_mentalmodel"):
                raise PermissionDenied
            try:
                if "approve" in request.POST:
                    proposal_approve(bank_id=model.bank_id, mental_model_id=model.mental_model_id,
                                     proposal_id=proposal.id)
                    messages.success(request, f"Approved: {model.mental_model_id} now reads the "
                                              "proposed page (restore the version it recorded "
                                              "to undo).")
                else:
                    proposal_reject(bank_id=model.bank_id, mental_model_id=model.mental_model_id,
                                    proposal_id=proposal.id,
                                    reason=request.POST.get("reason", ""))
                    messages.success(request, "Rejected; the page stays as it is.")
            except DomainError as exc:
                messages.error(request, f"Refused: {exc}")
            return HttpResponseRedirect(url)
        context = {
            **self.admin_site.each_context(request),
            "title": f"{model.name}: proposed change of {proposal.created_at:%Y-%m-%d %H:%M:%S}",
            "opts": self.model._meta,
            "proposal": proposal,
            "mental_model": model,
            "pending": proposal.status == ProposalStatus.PENDING,
            "sections": (proposal.changes or {}).get("sections") or [],
            "counts": (proposal.changes or {}).get("counts") or {},
            "memories": sum(len(v or []) for v in
                            ((proposal.reflect_response or {}).get("based_on") or {}).values()),
            "diff": side_by_side(model.content or "", proposal.content,
                                 before_label="current page", after_label="proposed page"),
        }
        return TemplateResponse(request, "admin/review/mentalmodelproposal/review.html", context)
