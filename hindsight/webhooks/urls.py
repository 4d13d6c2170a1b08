"""URL routes of webhooks under /v1/default/."""

from __future__ import annotations

from django.urls import path

from hindsight.webhooks.api import views

_BASE = "banks/<str:bank_id>/webhooks"

urlpatterns = [
    path(_BASE, views.WebhookCollection.as_view(), name="webhooks"),
    path(_BASE + "/<str:webhook_id>", views.WebhookItem.as_view(), name="webhook"),
    path(_BASE + "/<str:webhook_id>/deliveries", views.WebhookDeliveries.as_view(),
         name="webhook-deliveries"),
]
