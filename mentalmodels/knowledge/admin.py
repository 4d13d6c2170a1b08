"""The knowledge base in the Django admin: each bank's tree, read through the tree selector
(pages with their staleness and failure flag, each linking to its mental model's change page,
where it is edited, refreshed and cleared like any model). Structure is changed through the API
(or the CLI); the admin can delete a node, through the service (a subtree with its pages' mental
models, their queued refreshes cancelled)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from hindsight.banks.models import Bank
from mentalmodels.knowledge.models import KnowledgeNode, NodeKind
from mentalmodels.knowledge.selectors import knowledge_tree
from mentalmodels.knowledge.services import knowledge_node_delete


def _nested(bank_id: str) -> list[dict[str, Any]]:
    """The bank's tree as nested rows for the template (depth-first, as the selector orders)."""
    tree = knowledge_tree(bank_id=bank_id)
    rows: dict[str, dict[str, Any]] = {}
    roots: list[dict[str, Any]] = []
    for node in tree.nodes:
        row = {
            "node": node,
            "is_page": node.kind == NodeKind.PAGE,
            "is_stale": tree.stale.get(node.id),
            "model_url": (reverse("admin:mentalmodels_mentalmodel_change", args=[node.uid])
                          if node.uid is not None else None),
            "delete_url": reverse("admin:knowledge_knowledgenode_delete", args=[node.id]),
            "children": [],
        }
        rows[node.id] = row
        parent = rows.get(node.parent_id) if node.parent_id else None
        (parent["children"] if parent is not None else roots).append(row)
    return roots


@admin.register(KnowledgeNode)
class KnowledgeNodeAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "bank", "parent", "updated_at")
    readonly_fields = ("id", "bank", "parent", "kind", "name", "mental_model", "created_at",
                       "updated_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest,
                        extra_context: dict[str, Any] | None = None) -> HttpResponse:
        chosen = request.GET.get("bank")
        bank_ids = list(KnowledgeNode.objects.values_list("bank_id", flat=True)
                        .distinct().order_by("bank_id"))
        shown = [b for b in bank_ids if chosen in (None, "", b)]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Knowledge base",
            "banks": [{"bank": Bank(id=b), "roots": _nested(b)} for b in shown],
            "bank_ids": bank_ids,
            "chosen": chosen,
        }
        return TemplateResponse(request, "admin/knowledge/knowledgenode/tree.html",
                                {**context, **(extra_context or {})})

    def delete_model(self, request: HttpRequest, obj: KnowledgeNode) -> None:
        knowledge_node_delete(bank_id=obj.bank_id, node_id=obj.id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[KnowledgeNode]) -> None:
        for bank_id, node_id in queryset.values_list("bank_id", "id"):
            if KnowledgeNode.objects.filter(id=node_id).exists():  # not gone with a parent
                knowledge_node_delete(bank_id=bank_id, node_id=node_id)
