"""The knowledge-base API's wire format (upstream 1.1.0's): one serializer per request and
response, in the mental-models API's idiom.

Requests are ``Body`` and ``Query`` parts (``hindsight.infra.edge.serializers``): unknown fields are a
422 naming them, and every problem of a request is reported in one answer naming its field and
the rule, worded as on every endpoint. The page fields are the mental model's (text, tags, the
token range, the trigger), so a page is validated as a mental model is. Deliberate differences
from upstream: a blank ``name`` is a 422 (upstream stores it); ``max_tokens`` is the mental
model's 256..8192.

Responses: each ``Rendered`` serializer declares its shape (for the document) and that
declaration renders it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hindsight.infra.edge.serializers import (
    AnyJSON,
    Body,
    Integer,
    Query,
    Rendered,
    Text,
    computed,
    const,
    limit_field,
    tags_field,
    tags_match_field,
)
from hindsight.infra.tagscope import parse_tag_groups
from hindsight.infra.vocabulary import iso
from mentalmodels.api.serializers import MAX_TOKENS_RANGE, MentalModelTriggerSerializer
from mentalmodels.knowledge import markdown
from mentalmodels.knowledge.models import KnowledgeNode, NodeKind
from mentalmodels.knowledge.selectors import (
    SEARCH_LIMIT_MAX,
    SNIPPET_CHARS,
    Export,
    PageFilter,
    TreeNode,
)
from mentalmodels.knowledge.services import KEEP_PARENT, NodeUpdate
from mentalmodels.models import HistoryKind

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
#
# Each ``Rendered`` serializer declares its shape, and that declaration renders it (the values
# computed from the object a view hands it: a tree row, a page, a search hit).


@extend_schema_field({"type": "array", "items": {"$ref": "#/components/schemas/KnowledgeNode"}})
class ChildrenField(serializers.ListField):
    pass


def _on_page(fn: Any) -> Any:
    """A page's value, null on a folder."""
    return lambda node: fn(node) if node.kind == NodeKind.PAGE else None


class KnowledgeNodeSerializer(Rendered):
    """A node of the tree (``TreeNode``); ``is_stale`` and ``children`` are given by the view."""

    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=NodeKind.values)
    name = serializers.CharField()
    parent_id = serializers.CharField(allow_null=True)
    mental_model_id = computed(serializers.CharField(allow_null=True, help_text="Pages only"),
                               _on_page(lambda n: n.mental_model_id))
    managed = const(serializers.BooleanField(help_text="Always false: no node is system-owned "
                                                       "here"), False)
    description = computed(serializers.CharField(allow_null=True,
                                                 help_text="A page's source query"),
                           _on_page(lambda n: n.source_query))
    tags = computed(serializers.ListField(child=serializers.CharField()),
                    lambda n: (n.tags or []) if n.kind == NodeKind.PAGE else [])
    timestamp = computed(serializers.CharField(allow_null=True, help_text="Last refresh (page) "
                                                                          "or last update "
                                                                          "(folder)"),
                         lambda n: iso(n.last_refreshed_at if n.kind == NodeKind.PAGE
                                       else n.updated_at))
    is_stale = serializers.BooleanField(allow_null=True, help_text="Pages only")
    last_refresh_failed_at = computed(serializers.CharField(allow_null=True,
                                                            help_text="Pages only"),
                                      _on_page(lambda n: iso(n.last_refresh_failed_at)))
    trigger = computed(MentalModelTriggerSerializer(allow_null=True,
                                                    help_text="Pages only: effective"),
                       _on_page(lambda n: n.trigger))
    children = ChildrenField()

    @classmethod
    def render_node(cls, node: TreeNode, *, is_stale: bool | None) -> dict[str, Any]:
        return cls.render(node, is_stale=is_stale if node.kind == NodeKind.PAGE else None,
                          children=[])


class KnowledgeTreeResponseSerializer(Rendered):
    roots = KnowledgeNodeSerializer(many=True)

    @classmethod
    def render_tree(cls, nodes: Sequence[TreeNode], stale: Mapping[str, bool]) -> dict[str, Any]:
        """Nested from the flat tree order (a parent always comes before its children)."""
        rendered: dict[str, dict[str, Any]] = {}
        roots: list[dict[str, Any]] = []
        for node in nodes:
            item = KnowledgeNodeSerializer.render_node(node, is_stale=stale.get(node.id))
            rendered[node.id] = item
            parent = rendered.get(node.parent_id) if node.parent_id else None
            (parent["children"] if parent is not None else roots).append(item)
        return cls.render(roots=roots)

    @classmethod
    def render_tree_json(cls, nodes: Sequence[TreeNode], stale: Mapping[str, bool]) -> bytes:
        """The bytes DRF's ``JSONRenderer`` makes of ``render_tree(nodes, stale)`` (the same
        keys in the same order, compact, unicode unescaped but U+2028/U+2029; a test holds
        them equal), written straight from the rows: no dict per node, each string through the
        C string encoder, each distinct trigger (the pages share a few) encoded once. The
        declared rendering took half a 1,000-page tree's time, its trigger objects half the
        encoding."""
        triggers: dict[int, str] = {}
        out: list[str] = ['{"roots":[']
        # The open nodes, innermost last: a node whose parent is not among them closes them
        # down to its parent (or to the root, as render_tree puts a node whose parent it
        # lacks).
        open_ids: list[str] = []
        first = True
        for node in nodes:
            while open_ids and open_ids[-1] != node.parent_id:
                open_ids.pop()
                out.append("]}")
            if not first and (not open_ids or out[-1] != "["):
                out.append(",")
            first = False
            out.append(_node_json(node, stale, triggers))
            out.append("[")
            open_ids.append(node.id)
        out.append("]}" * len(open_ids))
        out.append("]}")
        text = "".join(out)
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


def _node_json(node: TreeNode, stale: Mapping[str, bool], triggers: dict[int, str]) -> str:
    """One node's keys up to its ``children`` array, left open (``render_tree_json``)."""
    if node.kind != NodeKind.PAGE:
        return (f'{{"id":{_string(node.id)},"kind":"{node.kind}","name":{_string(node.name)},'
                f'"parent_id":{_string(node.parent_id)},"mental_model_id":null,'
                f'"managed":false,"description":null,"tags":[],'
                f'"timestamp":{_stamp_json(node.updated_at)},"is_stale":null,'
                f'"last_refresh_failed_at":null,"trigger":null,"children":')
    trigger = "null"
    if node.trigger is not None:
        trigger = triggers.get(id(node.trigger), "")
        if not trigger:
            trigger = triggers[id(node.trigger)] = _dumps(node.trigger)
    flag = stale.get(node.id)
    tags = ",".join(map(_encode_string, node.tags or []))
    return (f'{{"id":{_string(node.id)},"kind":"page","name":{_string(node.name)},'
            f'"parent_id":{_string(node.parent_id)},'
            f'"mental_model_id":{_string(node.mental_model_id)},"managed":false,'
            f'"description":{_string(node.source_query)},"tags":[{tags}],'
            f'"timestamp":{_stamp_json(node.last_refreshed_at)},'
            f'"is_stale":{"null" if flag is None else ("true" if flag else "false")},'
            f'"last_refresh_failed_at":{_stamp_json(node.last_refresh_failed_at)},'
            f'"trigger":{trigger},"children":')


_encode_string = json.encoder.encode_basestring


def _string(value: str | None) -> str:
    return "null" if value is None else _encode_string(value)


def _stamp_json(value: datetime | None) -> str:
    return "null" if value is None else f'"{iso(value)}"'


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class CreateKnowledgePageResponseSerializer(Rendered):
    """What ``knowledge_page_create`` returns: the page node and its first refresh."""

    page_id = computed(serializers.CharField(), lambda created: created[0].id)
    mental_model_id = computed(serializers.CharField(),
                               lambda created: created[0].mental_model.mental_model_id)
    operation_id = computed(serializers.UUIDField(allow_null=True),
                            lambda created: str(created[1].id))


def _page_timestamp(node: KnowledgeNode) -> str | None:
    model = node.mental_model
    return iso(model.last_refreshed_at or model.created_at) if model is not None else None


def _page_markdown(node: KnowledgeNode) -> str:
    model = node.mental_model
    assert model is not None  # a page has a model (check constraint)
    return markdown.page_document(
        page_id=node.id, name=node.name, source_query=model.source_query, tags=model.tags,
        timestamp=_page_timestamp(node), body=model.content, notice_when_empty=True)


class KnowledgePageResponseSerializer(Rendered):
    """A page (``KnowledgeNode`` with its mental model) as a markdown document."""

    id = serializers.CharField()
    name = serializers.CharField()
    type = computed(serializers.CharField(help_text="From a type:<x> tag, else knowledge-page"),
                    lambda n: markdown.page_type(n.mental_model.tags).type)
    description = serializers.CharField(source="mental_model.source_query", allow_null=True,
                                        help_text="The page's source query")
    tags = computed(serializers.ListField(child=serializers.CharField()),
                    lambda n: markdown.page_type(n.mental_model.tags).display_tags)
    timestamp = computed(serializers.CharField(allow_null=True), _page_timestamp)
    body = serializers.CharField(source="mental_model.content", allow_null=True,
                                 allow_blank=True)
    markdown = computed(serializers.CharField(help_text="YAML frontmatter + body ('No content "
                                                        "yet.' when it has none)"),
                        _page_markdown)


class KnowledgePageSearchResultSerializer(Rendered):
    """One ``SearchHit``."""

    id = serializers.CharField(source="page_id")
    name = serializers.CharField()
    mental_model_id = serializers.CharField(source="model.mental_model_id", allow_null=True)
    source_query = serializers.CharField(source="model.source_query", allow_null=True)
    snippet = computed(serializers.CharField(allow_blank=True),
                       lambda hit: (hit.model.content or "")[:SNIPPET_CHARS].strip()
                       or markdown.EMPTY_NOTICE)
    score = serializers.FloatField(help_text="Rank fusion in 0..1 (1 = first in every arm)")
    updated_at = serializers.DateTimeField(source="model.last_refreshed_at", allow_null=True)


class KnowledgePageSearchResponseSerializer(Rendered):
    results = KnowledgePageSearchResultSerializer(many=True, source="*")
    total = computed(serializers.IntegerField(), len)


class KnowledgePageBundleFileSerializer(Rendered):
    path = serializers.CharField()
    content = serializers.CharField()


def _stamp(value: datetime | None) -> str:
    return iso(value) or "unknown"


def _bundle_files(export: Export) -> list[dict[str, str]]:
    """``index.md``, then per page ``<id>.md`` (the bare document) and, when it has a history,
    ``<id>.log.md``."""
    entries = [markdown.IndexEntry(n.id, n.parent_id, n.kind, n.name, n.source_query)
               for n in export.nodes]
    files = [{"path": markdown.INDEX_FILE, "content": markdown.index_document(entries)}]
    for page in export.pages:
        node = page.node
        files.append({"path": markdown.page_file(node.id), "content": markdown.page_document(
            page_id=node.id, name=node.name, source_query=node.source_query,
            tags=node.tags or [], timestamp=iso(node.last_refreshed_at or node.created_at),
            body=page.content, notice_when_empty=False)})
        if page.history:
            log = [markdown.LogEntry(_stamp(e.changed_at), e.previous_content,
                                     None if e.kind == HistoryKind.VERSION else (e.reason or "error"))
                   for e in page.history]
            files.append({"path": markdown.log_file(node.id),
                          "content": markdown.log_document(node.name, log)})
    return files


class KnowledgePageBundleResponseSerializer(Rendered):
    """An ``Export`` as its files."""

    files = computed(KnowledgePageBundleFileSerializer(many=True), _bundle_files)
