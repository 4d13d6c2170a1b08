"""Reads of the knowledge base: the tree, a page, search, the export bundle's inputs.

The tree is one statement for every node (a page's mental-model columns joined, the bank's last
memory write beside them) plus, for the pages the bank-watermark shortcut cannot settle, one
batched scope query: ``is_stale`` comes from the one staleness rule (``stale_flags``), in at
most two queries (three for a bank with no node: its existence) however many pages the bank
holds. The order is upstream's: by name within a folder.

Tag filters (tree and search) are upstream's knowledge-base ones: ``tags`` matched per
``tags_match`` with recall's semantics on the page's tags (``any``/``all`` keep untagged pages,
the strict modes and ``exact`` do not), AND-ed with ``tag_groups``; the tree keeps the folders
on the path to a matching page and drops the others.

The tree's version (``TreeVersion``, read in the tree's own statement, or alone in one probe of
three indexes by ``knowledge_tree_version``) changes with every write that can change what the
tree shows: the bank's tree version (kept by triggers: nodes, the pages' mental models), its
last memory write and its last memory deletion (both on the write clock). ``knowledge_tree``
given the cutoff ``knowledge_tree_version`` read names its version only when it can vouch that
nothing it did not read could commit under that version (``quiet_cutoff_sql``: no memory write
in flight before its statement began); the API keeps such a tree's rendering and answers an
unchanged version from it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Case, DateTimeField, F, Subquery, TextField, Value, When, Window
from django.db.models.functions import Cast, Coalesce, RowNumber

from hindsight.banks.models import Bank
from hindsight.banks.recall import RRF_K
from hindsight.banks.selectors import bank_last_memory_write_subquery
from hindsight.banks.writeclock import quiet_cutoff_sql
from hindsight.infra.db import values_rows
from hindsight.infra.embeddings import EmbeddingError
from hindsight.infra.errors import NotFound
from hindsight.infra.tagscope import Group, TagScope, matches
from hindsight.infra.vocabulary import FactType
from mentalmodels.knowledge.models import (
    KnowledgeMemoryForget,
    KnowledgeNode,
    KnowledgeTreeVersion,
    NodeKind,
)
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.reflect.mm_search import lexical_score, semantic_relevance
from mentalmodels.staleness import stale_flags
from mentalmodels.triggers import trigger_fill

SEARCH_LIMIT_MAX = 50
SNIPPET_CHARS = 280


@dataclass(frozen=True)
class PageFilter:
    tags: tuple[str, ...] = ()
    tags_match: str = "any"
    tag_groups: tuple[Group, ...] | None = None

    @property
    def active(self) -> bool:
        return bool(self.tags) or self.tag_groups is not None or self.tags_match == "exact"

    def admits(self, tags: Sequence[str]) -> bool:
        flat = matches(TagScope(tags=self.tags, tags_match=self.tags_match), tags, FactType.WORLD)
        return flat and (self.tag_groups is None
                         or matches(TagScope(tag_groups=self.tag_groups), tags, FactType.WORLD))


class TreeNode(NamedTuple):
    """One node as the tree reads it; the page fields (its mental model's, under the model's
    attribute names, so the staleness rule takes the row) are ``None`` on a folder.

    ``trigger`` is the page's effective trigger (``trigger_fill``: every key, upstream's order),
    one dict shared by every page whose stored trigger is the same: read it, never change it.
    ``updated_at`` is a folder's (``None`` on a page: the tree shows a page's last refresh) and
    ``created_at`` is read for the export only (``None`` otherwise): each timestamp a row
    carries is parsed in Python, and these two were 2 of a page's 5.
    """

    id: str
    parent_id: str | None
    kind: str
    name: str
    updated_at: datetime | None
    created_at: datetime | None
    bank_id: str
    uid: int | None
    mental_model_id: str | None
    tags: list[str] | None
    trigger: dict[str, Any] | None
    source_query: str | None
    last_refreshed_at: datetime | None
    last_refresh_failed_at: datetime | None
    last_memory_seen_at: datetime | None


_MM = ("uid", "mental_model_id", "tags", "trigger", "source_query", "last_refreshed_at",
       "last_refresh_failed_at", "last_memory_seen_at")


class TreeVersion(NamedTuple):
    """What a bank's tree shows can change only when one of these does."""

    tree: int | None
    memory_write: datetime | None
    memory_forget: datetime | None


@dataclass
class Tree:
    #: Every node kept, folders and pages, in tree order (a folder before its children).
    nodes: list[TreeNode]
    #: ``is_stale`` of each page by node id (empty when not asked for).
    stale: dict[str, bool] = field(default_factory=dict)
    #: The version this tree is of, when its ``cutoff`` vouched for it (else ``None``).
    version: TreeVersion | None = None


_VERSION_SQL = (
    "SELECT (SELECT version FROM knowledge_knowledgetreeversion WHERE bank_id = b.id), "
    "(SELECT updated_at FROM banks_memoryunit WHERE bank_id = b.id "
    "ORDER BY updated_at DESC LIMIT 1), "
    "(SELECT forgotten_at FROM knowledge_knowledgememoryforget WHERE bank_id = b.id "
    "ORDER BY forgotten_at DESC LIMIT 1), {cutoff} "
    "FROM quiet, banks_bank b WHERE b.id = %s"
)


@dataclass(frozen=True)
class VersionRead:
    #: The bank's tree version now (``None``: no such bank).
    version: TreeVersion | None
    #: A cutoff for ``knowledge_tree(cutoff=…)`` to vouch by (``None``: a write in flight).
    cutoff: datetime | None


def knowledge_tree_version(*, bank_id: str) -> VersionRead:
    """The bank's tree version now, in one statement of three index probes whatever the tree's
    or the bank's size, and in the same statement a ``quiet_cutoff_sql`` for the tree read
    after it, if it must be read."""
    cte, column, params = quiet_cutoff_sql(bank_id)
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {cte} {_VERSION_SQL.format(cutoff=column)}", [*params, bank_id])
        row = cursor.fetchone()
    if row is None:
        return VersionRead(None, None)
    return VersionRead(TreeVersion(*row[:-1]), row[-1])


def _require_bank(bank_id: str) -> None:
    if not Bank.objects.filter(id=bank_id).exists():
        raise NotFound(f"Bank '{bank_id}' not found")


def _ordered(nodes: list[TreeNode]) -> list[TreeNode]:
    """Depth first, by name within a folder (a parent always before its children)."""
    children: dict[str | None, list[TreeNode]] = {}
    for node in nodes:
        children.setdefault(node.parent_id, []).append(node)
    out: list[TreeNode] = []
    stack = list(reversed(sorted(children.get(None, []), key=lambda n: n.name)))
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(sorted(children.get(node.id, []), key=lambda n: n.name)))
    return out


def _pruned(nodes: list[TreeNode], page_filter: PageFilter) -> list[TreeNode]:
    """The pages the filter admits and the folders on their paths."""
    parent = {n.id: n.parent_id for n in nodes}
    keep: set[str] = set()
    for node in nodes:
        if node.kind == NodeKind.PAGE and page_filter.admits(node.tags or []):
            cursor: str | None = node.id
            while cursor is not None and cursor not in keep:
                keep.add(cursor)
                cursor = parent.get(cursor)
    return [n for n in nodes if n.id in keep]


def _rows(bank_id: str, *, created: bool = False, **only: Any) -> list[tuple[Any, ...]]:
    """The nodes as ``TreeNode`` columns, then the bank's ``TreeVersion`` (one statement, the
    version on the first row only; ``_version`` reads it). The trigger comes as its JSON text
    (decoded by ``_nodes``); ``created``: read ``created_at``."""
    columns: dict[str, Any] = {f"mm_{c}": F(f"mental_model__{c}") for c in _MM}
    columns["mm_trigger"] = Cast("mental_model__trigger", TextField())
    return values_rows(
        KnowledgeNode.objects.filter(bank_id=bank_id, **only)
        .annotate(row=Window(RowNumber()))
        .annotate(**columns,
                  folder_updated=Case(When(kind=NodeKind.FOLDER, then="updated_at")),
                  # A page was created when its mental model was (the same transaction).
                  made=(Coalesce("mental_model__created_at", "created_at") if created
                        else Value(None, output_field=DateTimeField())),
                  # On one row only: each timestamp is parsed in Python, and this one was
                  # the same on every row.
                  tree_version=Case(When(row=1, then=Subquery(
                      KnowledgeTreeVersion.objects.filter(bank_id=bank_id)
                      .values("version")[:1]))),
                  bank_write=Case(When(row=1, then=bank_last_memory_write_subquery(
                      bank_id=bank_id))),
                  bank_forget=Case(When(row=1, then=Subquery(
                      KnowledgeMemoryForget.objects.filter(bank_id=bank_id)
                      .order_by("-forgotten_at").values("forgotten_at")[:1]))))
        .values_list("id", "parent_id", "kind", "name", "folder_updated", "made", "bank_id",
                     *(f"mm_{c}" for c in _MM), "tree_version", "bank_write", "bank_forget")
    )


_VERSION_COLUMNS = len(TreeVersion._fields)


def _version(rows: Sequence[tuple[Any, ...]]) -> TreeVersion:
    """The bank's tree version, which the first of ``_rows`` carries."""
    return TreeVersion(*rows[0][-_VERSION_COLUMNS:])


_TRIGGER = TreeNode._fields.index("trigger")


def _nodes(rows: Sequence[tuple[Any, ...]]) -> list[TreeNode]:
    """``_rows`` as ``TreeNode``s (the version's columns left off), each
    distinct trigger text decoded and filled once: a tree's pages mostly share a few triggers,
    and decoding and filling one per page was a tenth of a 1,000-page tree's time."""
    triggers: dict[str, dict[str, Any]] = {}
    nodes = []
    for row in rows:
        values = list(row[:-_VERSION_COLUMNS])
        text = values[_TRIGGER]
        if text is not None:
            trigger = triggers.get(text)
            if trigger is None:
                trigger = triggers[text] = trigger_fill(json.loads(text))
            values[_TRIGGER] = trigger
        nodes.append(TreeNode._make(values))
    return nodes


def _stale(pages: Sequence[TreeNode], last_write: datetime | None) -> dict[str, bool]:
    pages = [p for p in pages if p.kind == NodeKind.PAGE]
    flags = stale_flags(pages, last_write={p.bank_id: last_write for p in pages})  # type: ignore[arg-type]
    return {p.id: flags[p.uid] for p in pages if p.uid is not None}


def _vouched(version: TreeVersion, cutoff: datetime | None) -> TreeVersion | None:
    """``version`` when every memory write and deletion it names had committed before the
    statement that read it began (both at or before a ``quiet_cutoff`` taken before it), so
    that none stamped at or before them can commit later; else ``None``."""
    if cutoff is None or version.tree is None:
        return None
    stamps = [t for t in (version.memory_write, version.memory_forget) if t is not None]
    return version if all(t <= cutoff for t in stamps) else None


def knowledge_tree(*, bank_id: str, page_filter: PageFilter = PageFilter(),
                   with_staleness: bool = True, with_created: bool = False,
                   cutoff: datetime | None = None) -> Tree:
    """The bank's tree (404 for an unknown bank), each page with ``is_stale``;
    ``with_created``: each node's ``created_at`` too; ``cutoff`` (``knowledge_tree_version``'s,
    read before): with the ``version`` it is of, when that cutoff vouches for it."""
    rows = _rows(bank_id, created=with_created)
    if not rows:
        _require_bank(bank_id)
        return Tree([])
    nodes = _ordered(_nodes(rows))
    if page_filter.active:
        nodes = _pruned(nodes, page_filter)
    version = _version(rows)
    return Tree(nodes, _stale(nodes, version.memory_write) if with_staleness else {},
                _vouched(version, cutoff))


def knowledge_tree_node(*, bank_id: str, node_id: str) -> Tree:
    """One node as the tree shows it (with ``is_stale`` for a page): what a write answers."""
    rows = _rows(bank_id, id=node_id)
    if not rows:
        raise NotFound(f"Knowledge node '{node_id}' not found")
    nodes = _nodes(rows)
    return Tree(nodes, _stale(nodes, _version(rows).memory_write))


def knowledge_page_get(*, bank_id: str, page_id: str) -> KnowledgeNode:
    """A page with its mental model (404 when the bank holds no such page)."""
    node = (KnowledgeNode.objects.select_related("mental_model")
            .filter(bank_id=bank_id, id=page_id, kind=NodeKind.PAGE).first())
    if node is None:
        raise NotFound(f"Knowledge page '{page_id}' not found")
    return node


# --- search ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchHit:
    page_id: str
    name: str
    model: MentalModel
    score: float


def _ranks(scores: dict[int, float], models: Sequence[MentalModel]) -> dict[int, int]:
    """1-based rank of each scored model, best first (ties: most recently refreshed, then id)."""
    def recency(m: MentalModel) -> float:
        return m.last_refreshed_at.timestamp() if m.last_refreshed_at else float("-inf")

    ordered = sorted((m for m in models if m.uid in scores),
                     key=lambda m: (-scores[m.uid], -recency(m), m.mental_model_id))
    return {m.uid: rank for rank, m in enumerate(ordered, start=1)}


def knowledge_search(*, bank_id: str, query: str, limit: int = 10,
                     page_filter: PageFilter = PageFilter()) -> list[SearchHit]:
    """Pages ranked for ``query`` by two arms fused by reciprocal rank (k = recall's 60): the
    keyword arm (the query's terms in the page's name, question and document:
    ``lexical_score``) and the vector arm (cosine similarity of the page's embedding, the
    stragglers re-embedded first: ``semantic_relevance``, reflect's own). ``score`` is
    normalised to 0..1 as upstream's: 1.0 = first in every arm that ran. An embedder that
    cannot serve the query leaves the keyword arm alone."""
    pages = list(
        MentalModel.objects.filter(bank_id=bank_id, knowledge_node__isnull=False)
        .defer("reflect_response", "document")
        .annotate(page_id=F("knowledge_node__id"), page_name=F("knowledge_node__name"))
    )
    if not pages:
        _require_bank(bank_id)
        return []
    if page_filter.active:
        pages = [p for p in pages if page_filter.admits(p.tags)]
    keyword = {p.uid: s for p in pages if (s := lexical_score(query, p)) > 0}
    arms = [_ranks(keyword, pages)]
    try:
        arms.append(_ranks(semantic_relevance(pages, query).scores, pages))
    except EmbeddingError:
        pass
    fused: dict[int, float] = {}
    for ranks in arms:
        for uid, rank in ranks.items():
            fused[uid] = fused.get(uid, 0.0) + 1.0 / (RRF_K + rank)
    norm = (RRF_K + 1) / len(arms)
    by_uid = {p.uid: p for p in pages}
    ordered = sorted(fused, key=lambda uid: (-fused[uid], by_uid[uid].mental_model_id))
    return [
        SearchHit(page_id=by_uid[uid].page_id, name=by_uid[uid].page_name,
                  model=by_uid[uid], score=round(norm * fused[uid], 6))
        for uid in ordered[:limit]
    ]


# --- export ------------------------------------------------------------------------------------


@dataclass
class ExportPage:
    node: TreeNode
    content: str
    history: list[MentalModelHistory]


@dataclass
class Export:
    nodes: list[TreeNode]
    pages: list[ExportPage]


def knowledge_export(*, bank_id: str) -> Export:
    """Every node, every page's document and history, in three queries."""
    tree = knowledge_tree(bank_id=bank_id, with_staleness=False, with_created=True)
    pages = [n for n in tree.nodes if n.kind == NodeKind.PAGE and n.uid is not None]
    uids = [p.uid for p in pages if p.uid is not None]
    contents = dict(MentalModel.objects.filter(uid__in=uids).values_list("uid", "content"))
    history: dict[int, list[MentalModelHistory]] = {}
    for entry in MentalModelHistory.objects.filter(model_id__in=uids).order_by(
            "model_id", "-changed_at", "-id"):
        history.setdefault(entry.model_id, []).append(entry)
    return Export(
        nodes=tree.nodes,
        pages=[ExportPage(p, contents.get(p.uid, ""), history.get(p.uid, []))  # type: ignore[arg-type]
               for p in pages],
    )
