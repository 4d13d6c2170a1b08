"""URL routes of bank templates: two under /v1/default/ (``urlpatterns``), the schema's under
/v1/ (``schema_urlpatterns``), as upstream has them."""

from __future__ import annotations

from django.urls import path

from mentalmodels.bank_templates import views

urlpatterns = [
    path("banks/<str:bank_id>/export", views.BankTemplateExportView.as_view(),
         name="bank-template-export"),
    path("banks/<str:bank_id>/import", views.BankTemplateImportView.as_view(),
         name="bank-template-import"),
]

schema_urlpatterns = [
    path("bank-template-schema", views.BankTemplateSchemaView.as_view(),
         name="bank-template-schema"),
]
