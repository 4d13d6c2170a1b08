"""The knowledge-base API's wire format (upstream 1.1.0's): one serializer per request and
response, in the mental-models API's idiom.

Requests are ``Body`` and ``Query`` parts (``hindsight.api.serializers``): unknown fields are a
422 naming them, and every problem of a request is reported in one answer naming its field and
the rule, worded as on every endpoint. The page fields are the mental model's (text, tags, the
token range, the trigger), so a page is validated as a mental model is. Deliberate differences
from upstream: a blank ``name`` is a 422 (upstream stores it); ``max_tokens`` is the mental
model's 256..8192.

Responses: each response serializer declares its shape (for the document) and renders it,
building the dict in the declared order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hindsight.api.serializers import (
    AnyJSON,
    Body,
    Integer,
    Query,
    Text,
    limit_field,
    tags_field,
    tags_match_field,
)
from hindsight.tagscope import parse_tag_groups
from mentalmodels.api.serializers import MAX_TOKENS_RANGE, MentalModelTriggerSerializer
from mentalmodels.knowledge import markdown
from mentalmodels.knowledge.models import KnowledgeNode, NodeKind
from mentalmodels.knowledge.selectors import (
    SEARCH_LIMIT_MAX,
    SNIPPET_CHARS,
    Export,
    PageFilter,
    SearchHit,
    TreeNode,
)
from mentalmodels.knowledge.services import KEEP_PARENT, NodeUpdate
from mentalmodels.models import HistoryKind
from mentalmodels.triggers import trigger_fill


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None

_LOW, _HIGH = MAX_TOKENS_RANGE


# --- requests ----------------------------------------------------------------------------------


def _parent_id(**kwargs: Any) -> Text:
    """A folder id, or null for the root."""
    return Text(allow_blank=True, allow_null=True, required=False, **kwargs)


class CreateFolderRequestSerializer(Body):
    """``POST …/knowledge-base/folders``: a folder at the root or under ``parent_id``."""

    name = Text()
    parent_id = _parent_id(default=None)


class CreatePageRequestSerializer(Body):
    """``POST …/knowledge-base/pages``: a page (a mental model) at the root or under
    ``parent_id``; its trigger merges over the page default."""

    name = Text()
    source_query = Text()
    parent_id = _parent_id(default=None)
    tags = tags_field(allow_null=True, default=None,
                      help_text="Tags scoping the memories the page is built from (all_strict "
                                "unless trigger.tags_match)")
    max_tokens = Integer(min_value=_LOW, max_value=_HIGH, allow_null=True, required=False,
                         default=None, help_text="Default 4096")
    trigger = MentalModelTriggerSerializer(allow_null=True, required=False, default=None,
                                           help_text="Merged over the page default (delta, "
                                                     "observations, after consolidation, "
                                                     "siblings excluded)")

    @staticmethod
    def service_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of ``knowledge_page_create`` (but the bank)."""
        return {"name": data["name"], "source_query": data["source_query"],
                "parent_id": data["parent_id"], "tags": data["tags"] or [],
                "max_tokens": data["max_tokens"], "trigger": data["trigger"]}


class UpdateNodeRequestSerializer(Body):
    """``PATCH …/knowledge-base/nodes/{id}``: each field applies only when sent; ``parent_id``
    sent as null moves the node to the root (null elsewhere leaves the field alone)."""

    when_absent: ClassVar[Mapping[str, Any]] = {}

    name = Text(allow_null=True, required=False)
    parent_id = _parent_id()
    source_query = Text(allow_null=True, required=False, help_text="Pages only")
    tags = tags_field(allow_null=True, help_text="Pages only; [] clears them")
    max_tokens = Integer(min_value=_LOW, max_value=_HIGH, allow_null=True, required=False,
                         help_text="Pages only")
    trigger = MentalModelTriggerSerializer(allow_null=True, required=False,
                                           help_text="Pages only; keys sent are merged over "
                                                     "the page's trigger")

    @staticmethod
    def node_update(data: Mapping[str, Any]) -> NodeUpdate:
        return NodeUpdate(
            name=data.get("name"),
            parent_id=data.get("parent_id", KEEP_PARENT),
            source_query=data.get("source_query"), tags=data.get("tags"),
            max_tokens=data.get("max_tokens"), trigger=data.get("trigger"),
        )


# --- query strings -----------------------------------------------------------------------------


class TagGroupsQueryField(AnyJSON):
    """``tag_groups`` as one JSON-encoded query parameter (recall's shape), checked by the one
    tag-scope compiler."""

    def from_query(self, raw: str) -> Any:
        try:
            return json.loads(raw)
        except ValueError as exc:
            self.fail("json_invalid", error=exc)

    def to_internal_value(self, data: Any) -> Any:
        return parse_tag_groups(super().to_internal_value(data), loc=())


class _TagFilterQuery(Query):
    tags = tags_field(help_text="Only pages carrying these tags (matched per tags_match)")
    tags_match = tags_match_field(default="any", help_text="any/all also keep untagged pages")
    tag_groups = TagGroupsQueryField(required=False, default=None,
                                     help_text="JSON-encoded compound tag filter, AND-ed "
                                               "with tags")

    @staticmethod
    def page_filter(data: Mapping[str, Any]) -> PageFilter:
        return PageFilter(tags=tuple(dict.fromkeys(data.get("tags") or ())),
                          tags_match=data["tags_match"], tag_groups=data["tag_groups"])


class KnowledgeTreeQuerySerializer(_TagFilterQuery):
    """``GET …/knowledge-base/tree``."""


class KnowledgeSearchQuerySerializer(_TagFilterQuery):
    """``GET …/knowledge-base/search``: ``q`` required."""

    q = Text(help_text="Search query")
    limit = limit_field(10, SEARCH_LIMIT_MAX)


# --- responses ---------------------------------------------------------------------------------


@extend_schema_field({"type": "array", "items": {"$ref": "#/components/schemas/KnowledgeNode"}})
class ChildrenField(serializers.ListField):
    pass


class KnowledgeNodeSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=NodeKind.values)
    name = serializers.CharField()
    parent_id = serializers.CharField(allow_null=True)
    mental_model_id = serializers.CharField(allow_null=True, help_text="Pages only")
    managed = serializers.BooleanField(help_text="Always false: no node is system-owned here")
    description = serializers.CharField(allow_null=True, help_text="A page's source query")
    tags = serializers.ListField(child=serializers.CharField())
    timestamp = serializers.CharField(allow_null=True, help_text="Last refresh (page) or last "
                                                                 "update (folder)")
    is_stale = serializers.BooleanField(allow_null=True, help_text="Pages only")
    last_refresh_failed_at = serializers.CharField(allow_null=True, help_text="Pages only")
    trigger = MentalModelTriggerSerializer(allow_null=True, help_text="Pages only: effective")
    children = ChildrenField()

    @staticmethod
    def render(node: TreeNode, *, is_stale: bool | None,
               children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        page = node.kind == NodeKind.PAGE
        return {
            "id": node.id,
            "kind": node.kind,
            "name": node.name,
            "parent_id": node.parent_id,
            "mental_model_id": node.mental_model_id if page else None,
            "managed": False,
            "description": node.source_query if page else None,
            "tags": list(node.tags or []) if page else [],
            "timestamp": iso(node.last_refreshed_at if page else node.updated_at),
            "is_stale": is_stale if page else None,
            "last_refresh_failed_at": iso(node.last_refresh_failed_at) if page else None,
            "trigger": trigger_fill(node.trigger or {}) if page else None,
            "children": children or [],
        }


class KnowledgeTreeResponseSerializer(serializers.Serializer):
    roots = KnowledgeNodeSerializer(many=True)

    @staticmethod
    def render(nodes: Sequence[TreeNode], stale: Mapping[str, bool]) -> dict[str, Any]:
        """Nested from the flat tree order (a parent always comes before its children)."""
        rendered: dict[str, dict[str, Any]] = {}
        roots: list[dict[str, Any]] = []
        for node in nodes:
            item = KnowledgeNodeSerializer.render(node, is_stale=stale.get(node.id))
            rendered[node.id] = item
            parent = rendered.get(node.parent_id) if node.parent_id else None
            (parent["children"] if parent is not None else roots).append(item)
        return {"roots": roots}


class CreateKnowledgePageResponseSerializer(serializers.Serializer):
    page_id = serializers.CharField()
    mental_model_id = serializers.CharField()
    operation_id = serializers.UUIDField(allow_null=True)

    @staticmethod
    def render(node: KnowledgeNode, operation_id: Any) -> dict[str, Any]:
        assert node.mental_model is not None
        return {"page_id": node.id, "mental_model_id": node.mental_model.mental_model_id,
                "operation_id": str(operation_id)}


class KnowledgePageResponseSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    type = serializers.CharField(help_text="From a type:<x> tag, else knowledge-page")
    description = serializers.CharField(allow_null=True, help_text="The page's source query")
    tags = serializers.ListField(child=serializers.CharField())
    timestamp = serializers.CharField(allow_null=True)
    body = serializers.CharField(allow_null=True, allow_blank=True)
    markdown = serializers.CharField(help_text="YAML frontmatter + body ('No content yet.' "
                                               "when it has none)")

    @staticmethod
    def render(node: KnowledgeNode) -> dict[str, Any]:
        model = node.mental_model
        assert model is not None
        timestamp = iso(model.last_refreshed_at or model.created_at)
        kind = markdown.page_type(model.tags)
        return {
            "id": node.id,
            "name": node.name,
            "type": kind.type,
            "description": model.source_query,
            "tags": kind.display_tags,
            "timestamp": timestamp,
            "body": model.content,
            "markdown": markdown.page_document(
                page_id=node.id, name=node.name, source_query=model.source_query,
                tags=model.tags, timestamp=timestamp, body=model.content,
                notice_when_empty=True),
        }


class KnowledgePageSearchResultSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    mental_model_id = serializers.CharField(allow_null=True)
    source_query = serializers.CharField(allow_null=True)
    snippet = serializers.CharField(allow_blank=True)
    score = serializers.FloatField(help_text="Rank fusion in 0..1 (1 = first in every arm)")
    updated_at = serializers.CharField(allow_null=True)

    @staticmethod
    def render(hit: SearchHit) -> dict[str, Any]:
        content = hit.model.content or ""
        return {
            "id": hit.page_id,
            "name": hit.name,
            "mental_model_id": hit.model.mental_model_id,
            "source_query": hit.model.source_query,
            "snippet": content[:SNIPPET_CHARS].strip() or markdown.EMPTY_NOTICE,
            "score": hit.score,
            "updated_at": iso(hit.model.last_refreshed_at),
        }


class KnowledgePageSearchResponseSerializer(serializers.Serializer):
    results = KnowledgePageSearchResultSerializer(many=True)
    total = serializers.IntegerField()

    @staticmethod
    def render(hits: Sequence[SearchHit]) -> dict[str, Any]:
        return {"results": [KnowledgePageSearchResultSerializer.render(h) for h in hits],
                "total": len(hits)}


class KnowledgePageBundleFileSerializer(serializers.Serializer):
    path = serializers.CharField()
    content = serializers.CharField()


def _stamp(value: datetime | None) -> str:
    return iso(value) or "unknown"


class KnowledgePageBundleResponseSerializer(serializers.Serializer):
    files = KnowledgePageBundleFileSerializer(many=True)

    @staticmethod
    def render(export: Export) -> dict[str, Any]:
        """``index.md``, then per page ``<id>.md`` (the bare document) and, when it has a
        history, ``<id>.log.md``."""
        entries = [markdown.IndexEntry(n.id, n.parent_id, n.kind, n.name, n.source_query)
                   for n in export.nodes]
        files = [{"path": markdown.INDEX_FILE, "content": markdown.index_document(entries)}]
        for page in export.pages:
            node = page.node
            timestamp = iso(node.last_refreshed_at or node.created_at)
            files.append({"path": markdown.page_file(node.id), "content": markdown.page_document(
                page_id=node.id, name=node.name, source_query=node.source_query,
                tags=node.tags or [], timestamp=timestamp, body=page.content,
                notice_when_empty=False)})
            if page.history:
                log = [markdown.LogEntry(_stamp(e.changed_at), e.previous_content,
                                         None if e.kind == HistoryKind.VERSION else (e.reason or "error"))
                       for e in page.history]
                files.append({"path": markdown.log_file(node.id),
                              "content": markdown.log_document(node.name, log)})
        return {"files": files}
