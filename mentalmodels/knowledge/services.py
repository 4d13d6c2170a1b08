"""Writes to the knowledge base: folders, pages, rename / move / page options, delete.

A page is a mental model: ``knowledge_page_create`` creates it through ``mental_model_create``
(the id rule, the validation, the first refresh queued as an operation) with upstream's page
defaults (``PAGE_DEFAULT_TRIGGER`` merged with the bank's ``knowledge_page_default_trigger``
config, then the request's trigger; ``max_tokens`` 4096), and changes its options through
``mental_model_update``; deleting a page deletes its model through ``mental_model_delete``
(queued refreshes cancelled, a running one fenced off).

Every structural write (create, rename, move, delete) holds the bank's tree lock
(``TREE_LOCK_CLASS``, transaction-scoped) from its first read to its commit, so the checks it
makes (the parent is a folder of the bank, a move does not go under the node itself, the depth
limit) read a tree no other writer changes meanwhile; the database trigger of the migration
checks the same rules again on every row written (``models``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction

from hindsight.banks.models import Bank
from hindsight.banks.services import bank_ensure
from hindsight.infra.db import ClockTimestamp
from hindsight.infra.errors import BadRequest, Conflict, FieldErrors, NotFound
from hindsight.infra.vocabulary import FactType, RefreshMode, WebhookEvent
from mentalmodels.events import knowledge_page_event
from mentalmodels.knowledge.models import MAX_DEPTH, TREE_LOCK_CLASS, KnowledgeNode, NodeKind
from mentalmodels.services import (
    mental_model_create,
    mental_model_delete,
    mental_model_refresh_submit,
    mental_model_update,
)
from mentalmodels.triggers import trigger_normalize

# Upstream's page: a living document built from the bank's consolidated observations, rebuilt
# incrementally after each consolidation, never reading its sibling pages.
PAGE_DEFAULT_TRIGGER: dict[str, Any] = {
    "mode": RefreshMode.DELTA,
    "fact_types": [FactType.OBSERVATION],
    "exclude_mental_models": True,
    "refresh_after_consolidation": True,
}
PAGE_DEFAULT_MAX_TOKENS = 4096
BANK_DEFAULT_KEY = "knowledge_page_default_trigger"
PAGE_OPTIONS = ("source_query", "tags", "max_tokens", "trigger")


class _Keep:
    """``parent_id`` not sent (``None`` is a destination: the root)."""


KEEP_PARENT: Any = _Keep()


def _tree_lock(bank_id: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                       [TREE_LOCK_CLASS, bank_id])


def _new_id(kind: str) -> str:
    return ("kf-" if kind == NodeKind.FOLDER else "kp-") + uuid.uuid4().hex


def _name_taken(name: str, kind: str) -> Conflict:
    what = "page" if kind == NodeKind.PAGE else "folder"
    return Conflict(f"A {what} named '{name}' already exists in this folder")


def _parents(bank_id: str) -> dict[str, str | None]:
    """Every node's parent in the bank (one indexed read, under the tree lock)."""
    return dict(KnowledgeNode.objects.filter(bank_id=bank_id).values_list("id", "parent_id"))


def _depth(parents: Mapping[str, str | None], node_id: str | None) -> int:
    """How many folders ``node_id`` is under, counting itself (0 for the root)."""
    depth, seen = 0, set()
    while node_id is not None and node_id not in seen:
        seen.add(node_id)
        depth += 1
        node_id = parents.get(node_id)
    return depth


def _folder(*, bank_id: str, parent_id: str | None) -> KnowledgeNode | None:
    """The parent a node goes under: ``None`` (the root) or a folder of this bank (400 else,
    as upstream)."""
    if parent_id is None:
        return None
    parent = KnowledgeNode.objects.filter(bank_id=bank_id, id=parent_id).first()
    if parent is None:
        raise BadRequest(f"parent_id: Parent folder '{parent_id}' not found")
    if parent.kind != NodeKind.FOLDER:
        raise BadRequest(f"parent_id: Parent '{parent_id}' is not a folder")
    return parent


def _check_depth(*, bank_id: str, parent_id: str | None, height: int = 1) -> None:
    if parent_id is not None and _depth(_parents(bank_id), parent_id) + height > MAX_DEPTH:
        raise BadRequest(f"parent_id: folders nest at most {MAX_DEPTH} levels deep")


def _insert(node: KnowledgeNode) -> None:
    try:
        with transaction.atomic():
            node.save(force_insert=True)
    except IntegrityError:
        raise _name_taken(node.name, node.kind) from None


def _exclusive_refresh(trigger: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Upstream's page rule: naming one of ``refresh_cron`` / ``refresh_after_consolidation``
    without the other turns the other off (a page refreshes on one of them), so moving a page
    created with the default (after consolidation) onto a schedule is one key."""
    if trigger is None or not isinstance(trigger, Mapping):
        return trigger  # not an object: the trigger's own check refuses it
    patch = dict(trigger)
    if patch.get("refresh_cron") and "refresh_after_consolidation" not in patch:
        patch["refresh_after_consolidation"] = False
    if patch.get("refresh_after_consolidation") is True and "refresh_cron" not in patch:
        patch["refresh_cron"] = None
    return patch


def page_default_trigger(*, bank_id: str) -> dict[str, Any]:
    """The built-in page default with the bank's ``knowledge_page_default_trigger`` over it."""
    base = trigger_normalize(PAGE_DEFAULT_TRIGGER)
    config = Bank.objects.filter(id=bank_id).values_list("config", flat=True).first() or {}
    override = config.get(BANK_DEFAULT_KEY)
    if not override:
        return base
    return trigger_normalize(_exclusive_refresh(override), base=base,
                             loc=("bank_config", BANK_DEFAULT_KEY))


@transaction.atomic
def knowledge_folder_create(*, bank_id: str, name: str,
                            parent_id: str | None = None) -> KnowledgeNode:
    bank_ensure(bank_id=bank_id)
    _tree_lock(bank_id)
    parent = _folder(bank_id=bank_id, parent_id=parent_id)
    _check_depth(bank_id=bank_id, parent_id=parent_id)
    node = KnowledgeNode(id=_new_id(NodeKind.FOLDER), bank_id=bank_id, parent=parent,
                         kind=NodeKind.FOLDER, name=name)
    _insert(node)
    node.refresh_from_db()
    return node


@transaction.atomic
def knowledge_page_create(
    *,
    bank_id: str,
    name: str,
    source_query: str,
    parent_id: str | None = None,
    tags: Sequence[str] = (),
    max_tokens: int | None = None,
    trigger: Mapping[str, Any] | None = None,
) -> tuple[KnowledgeNode, Any]:
    """The page and its mental model in one transaction (a duplicate name creates neither);
    returns the page and the operation of its first refresh."""
    bank_ensure(bank_id=bank_id)
    _tree_lock(bank_id)
    parent = _folder(bank_id=bank_id, parent_id=parent_id)
    _check_depth(bank_id=bank_id, parent_id=parent_id)
    effective = trigger_normalize(_exclusive_refresh(trigger),
                                  base=page_default_trigger(bank_id=bank_id))
    model, operation = mental_model_create(
        bank_id=bank_id, name=name, source_query=source_query, tags=tags,
        max_tokens=PAGE_DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
        trigger=effective,
    )
    node = KnowledgeNode(id=_new_id(NodeKind.PAGE), bank_id=bank_id, parent=parent,
                         kind=NodeKind.PAGE, name=name, mental_model=model)
    _insert(node)
    node.refresh_from_db()
    knowledge_page_event(event=WebhookEvent.KNOWLEDGE_PAGE_CREATED, bank_id=bank_id,
                         page_id=node.id, name=name, mental_model_id=model.mental_model_id,
                         parent_id=node.parent_id,
                         operation_id=getattr(operation, "id", None))
    return node, operation


def _node(*, bank_id: str, node_id: str) -> KnowledgeNode:
    node = KnowledgeNode.objects.filter(bank_id=bank_id, id=node_id).first()
    if node is None:
        raise NotFound(f"Knowledge node '{node_id}' not found")
    return node


def _check_move(*, bank_id: str, node: KnowledgeNode, parent_id: str | None) -> None:
    if parent_id == node.id:
        raise BadRequest("parent_id: A node cannot be its own parent")
    _folder(bank_id=bank_id, parent_id=parent_id)
    if parent_id is None:
        return
    parents = _parents(bank_id)
    cursor: str | None = parent_id
    seen: set[str] = set()
    while cursor is not None and cursor not in seen:
        if cursor == node.id:
            raise BadRequest("parent_id: Cannot move a node into its own subtree")
        seen.add(cursor)
        cursor = parents.get(cursor)
    children: dict[str | None, list[str]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    if _depth(parents, parent_id) + _height(children, node.id) > MAX_DEPTH:
        raise BadRequest(f"parent_id: folders nest at most {MAX_DEPTH} levels deep")


def _height(children: Mapping[str | None, list[str]], node_id: str) -> int:
    """Levels of the subtree rooted at ``node_id``, itself included."""
    height, level = 0, [node_id]
    while level:
        height += 1
        level = [c for n in level for c in children.get(n, ())]
    return height


@dataclass(frozen=True)
class NodeUpdate:
    """What a node PATCH asks: ``None`` leaves a field alone, ``parent_id`` ``KEEP_PARENT``."""

    name: str | None = None
    parent_id: Any = KEEP_PARENT
    source_query: str | None = None
    tags: Sequence[str] | None = None
    max_tokens: int | None = None
    trigger: Mapping[str, Any] | None = None

    @property
    def moves(self) -> bool:
        return not isinstance(self.parent_id, _Keep)

    @property
    def page_options(self) -> list[str]:
        return [f for f in PAGE_OPTIONS if getattr(self, f) is not None]


@transaction.atomic
def knowledge_node_update(*, bank_id: str, node_id: str, update: NodeUpdate) -> KnowledgeNode:
    """Rename, move and/or change a page's options, all or nothing (upstream: one transaction).

    A page's new name is its mental model's too (the model is what search and reflect read).
    A new ``source_query`` queues a refresh so the page answers the new question.
    """
    if update.name is None and not update.moves and not update.page_options:
        raise BadRequest(
            "Provide name, parent_id, source_query, tags, max_tokens, and/or trigger to update"
        )
    _tree_lock(bank_id)
    node = _node(bank_id=bank_id, node_id=node_id)
    if node.kind == NodeKind.FOLDER and update.page_options:
        raise FieldErrors([
            {"loc": ["body", field], "msg": f"{field} applies to pages only; {node_id} is a "
                                             "folder", "type": "value_error"}
            for field in update.page_options
        ])
    fields: list[str] = []
    if update.name is not None and update.name != node.name:
        node.name = update.name
        fields.append("name")
    if update.moves and update.parent_id != node.parent_id:
        _check_move(bank_id=bank_id, node=node, parent_id=update.parent_id)
        node.parent_id = update.parent_id
        fields.append("parent")
    if fields:
        node.updated_at = ClockTimestamp()
        try:
            with transaction.atomic():
                node.save(update_fields=[*fields, "updated_at"])
        except IntegrityError:
            raise _name_taken(node.name, node.kind) from None
    if node.kind == NodeKind.PAGE and (update.name is not None or update.page_options):
        model = node.mental_model
        assert model is not None  # a page has a model (check constraint)
        changes_query = (update.source_query is not None
                         and update.source_query != model.source_query)
        model = mental_model_update(
            bank_id=bank_id, mental_model_id=model.mental_model_id, name=update.name,
            source_query=update.source_query, tags=update.tags, max_tokens=update.max_tokens,
            trigger=_exclusive_refresh(update.trigger),
        )
        if changes_query:
            mental_model_refresh_submit(model=model)
    node.refresh_from_db()
    if node.kind == NodeKind.PAGE:
        knowledge_page_event(event=WebhookEvent.KNOWLEDGE_PAGE_UPDATED, bank_id=bank_id,
                             page_id=node.id, name=node.name, parent_id=node.parent_id,
                             mental_model_id=node.mental_model.mental_model_id
                             if node.mental_model else None,
                             changed=[*(f.replace("parent", "parent_id") for f in fields),
                                      *update.page_options])
    return node


def knowledge_node_delete(*, bank_id: str, node_id: str) -> None:
    """Delete the node and its whole subtree; every page's mental model goes with it (its
    history too, queued refreshes cancelled, a running one fenced off)."""
    with transaction.atomic():
        _tree_lock(bank_id)
        _node(bank_id=bank_id, node_id=node_id)
        rows = KnowledgeNode.objects.filter(bank_id=bank_id).values_list(
            "id", "parent_id", "mental_model__mental_model_id")
        children: dict[str | None, list[str]] = {}
        model_of: dict[str, str | None] = {}
        for nid, parent, model_id in rows:
            children.setdefault(parent, []).append(nid)
            model_of[nid] = model_id
        subtree, level = [], [node_id]
        while level:
            subtree += level
            level = [c for n in level for c in children.get(n, ())]
        for nid in subtree:
            page_model = model_of[nid]
            if page_model is not None:
                mental_model_delete(bank_id=bank_id, mental_model_id=page_model)
                knowledge_page_event(event=WebhookEvent.KNOWLEDGE_PAGE_DELETED, bank_id=bank_id,
                                     page_id=nid, name=None, mental_model_id=page_model)
        # The folders left (the pages went with their models); the subtree cascades.
        KnowledgeNode.objects.filter(bank_id=bank_id, id=node_id).delete()

