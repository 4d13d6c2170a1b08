"""URL routes of this app under /v1/default/."""

from __future__ import annotations

from django.urls import URLPattern, path

from hindsight.banks import views

urlpatterns: list[URLPattern] = [
    path("banks", views.BankListView.as_view(), name="bank-list"),
    path("banks/<str:bank_id>", views.BankView.as_view(), name="bank-detail"),
    path("banks/<str:bank_id>/profile", views.BankProfileView.as_view(), name="bank-profile"),
    path("banks/<str:bank_id>/config", views.BankConfigView.as_view(), name="bank-config"),
    path("banks/<str:bank_id>/stats", views.BankStatsView.as_view(), name="bank-stats"),
    path("banks/<str:bank_id>/memories", views.MemoriesView.as_view(), name="memories"),
    path("banks/<str:bank_id>/memories/recall", views.RecallView.as_view(), name="memories-recall"),
    path("banks/<str:bank_id>/memories/list", views.MemoryListView.as_view(), name="memories-list"),
    path("banks/<str:bank_id>/memories/<str:memory_id>", views.MemoryView.as_view(),
         name="memory-detail"),
    path("banks/<str:bank_id>/memories/<str:memory_id>/history",
         views.MemoryHistoryView.as_view(), name="memory-history"),
    path("banks/<str:bank_id>/memories/<str:memory_id>/observations",
         views.MemoryObservationsView.as_view(), name="memory-observations"),
    path("banks/<str:bank_id>/observations", views.BankObservationsView.as_view(),
         name="bank-observations"),
    path("banks/<str:bank_id>/documents", views.DocumentListView.as_view(), name="documents"),
    path("banks/<str:bank_id>/documents/<path:document_id>/chunks",
         views.DocumentChunksView.as_view(), name="document-chunks"),
    path("banks/<str:bank_id>/documents/<path:document_id>/history",
         views.DocumentHistoryView.as_view(), name="document-history"),
    path("banks/<str:bank_id>/documents/<path:document_id>/reprocess",
         views.DocumentReprocessView.as_view(), name="document-reprocess"),
    path("banks/<str:bank_id>/documents/<path:document_id>", views.DocumentView.as_view(),
         name="document-detail"),
    path("chunks/<path:chunk_id>", views.ChunkView.as_view(), name="chunk-detail"),
    path("banks/<str:bank_id>/tags", views.TagsView.as_view(), name="bank-tags"),
    path("banks/<str:bank_id>/consolidate", views.ConsolidateView.as_view(),
         name="bank-consolidate"),
    path("banks/<str:bank_id>/llm-requests", views.LLMRequestsView.as_view(),
         name="bank-llm-requests"),
    path("banks/<str:bank_id>/llm-requests/stats", views.LLMRequestStatsView.as_view(),
         name="bank-llm-request-stats"),
]
