"""URL routes of restore and review under /v1/default/."""

from __future__ import annotations

from django.urls import path

from mentalmodels.review.api import views

_ITEM = "banks/<str:bank_id>/mental-models/<str:mental_model_id>"
_PROPOSAL = _ITEM + "/proposals/<str:proposal_id>"

urlpatterns = [
    path(_ITEM + "/restore", views.MentalModelRestore.as_view(), name="mental-model-restore"),
    path(_ITEM + "/proposals", views.ProposalCollection.as_view(), name="mental-model-proposals"),
    path(_PROPOSAL, views.ProposalItem.as_view(), name="mental-model-proposal"),
    path(_PROPOSAL + "/approve", views.ProposalApprove.as_view(),
         name="mental-model-proposal-approve"),
    path(_PROPOSAL + "/reject", views.ProposalReject.as_view(),
         name="mental-model-proposal-reject"),
]
