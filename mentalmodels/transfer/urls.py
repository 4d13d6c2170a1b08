"""URL routes of the bank transfer under /v1/default/."""

from __future__ import annotations

from django.urls import path

from mentalmodels.transfer import views

urlpatterns = [
    path("banks/<str:bank_id>/transfer/export", views.BankExportView.as_view(),
         name="bank-transfer-export"),
    path("banks/<str:bank_id>/transfer/import", views.BankImportView.as_view(),
         name="bank-transfer-import"),
    path("banks/<str:bank_id>/clone", views.BankCloneView.as_view(), name="bank-clone"),
    path("files/download/<path:key>", views.FileDownloadView.as_view(), name="file-download"),
]
