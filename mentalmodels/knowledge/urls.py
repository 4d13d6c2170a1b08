"""URL routes of the knowledge base under /v1/default/ (the static sub-paths before the ids)."""

from __future__ import annotations

from django.urls import path

from mentalmodels.knowledge.api import views

_BASE = "banks/<str:bank_id>/knowledge-base"

urlpatterns = [
    path(_BASE + "/tree", views.KnowledgeTree.as_view(), name="knowledge-tree"),
    path(_BASE + "/folders", views.KnowledgeFolders.as_view(), name="knowledge-folders"),
    path(_BASE + "/pages", views.KnowledgePages.as_view(), name="knowledge-pages"),
    path(_BASE + "/search", views.KnowledgeSearch.as_view(), name="knowledge-search"),
    path(_BASE + "/export", views.KnowledgeExport.as_view(), name="knowledge-export"),
    path(_BASE + "/pages/<str:page_id>", views.KnowledgePage.as_view(), name="knowledge-page"),
    path(_BASE + "/nodes/<str:node_id>", views.KnowledgeNodeItem.as_view(),
         name="knowledge-node"),
]
