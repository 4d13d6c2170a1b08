"""URL routes of this app under /v1/default/."""

from __future__ import annotations

from django.urls import path

from operations.api import views

urlpatterns = [
    path("banks/<str:bank_id>/operations", views.OperationsListView.as_view(),
         name="operations-list"),
    path("banks/<str:bank_id>/operations/<str:operation_id>", views.OperationView.as_view(),
         name="operation"),
    path("banks/<str:bank_id>/operations/<str:operation_id>/retry",
         views.OperationRetryView.as_view(), name="operation-retry"),
    path("banks/<str:bank_id>/operations/<str:operation_id>/delete",
         views.OperationDeleteView.as_view(), name="operation-delete"),
]
