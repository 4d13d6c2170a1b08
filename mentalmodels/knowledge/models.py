"""The knowledge base's tree: folders and pages, a page being one mental model.

``KnowledgeNode`` is one node of a bank's tree: a ``folder`` (a container) or a ``page``, whose
document, configuration, refreshes, history and staleness are those of its mental model (the
one-to-one ``mental_model``; deleting the model deletes the page). The tree is kept sound by the
database, not only by the services:

* a name is unique among its siblings, case-insensitively, at the root too (the unique index
  reads a null parent as ``''``, so two root nodes cannot share a name);
* a page has a mental model and a folder none (a check constraint); a node is never its own
  parent (another);
* ``knowledge_node_check`` (a trigger, installed by the migration) refuses, on every insert and
  on every change of ``parent_id``, a parent that is not a folder of the same bank, a parent
  chain deeper than ``MAX_DEPTH`` and a parent chain that reaches the node itself (a cycle). It
  takes the bank's tree lock first (``TREE_LOCK_CLASS``, the same transaction-scoped advisory
  lock the services hold for every structural write), and under READ COMMITTED its walk reads
  what the previous holder committed: two moves racing from two processes are checked one
  after the other, so no cycle can be stored whoever writes the rows;
* deleting a folder deletes its subtree (``parent`` cascades); a move into a folder being
  deleted waits for the lock and then finds its parent gone (the foreign key refuses it): no
  orphan.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Coalesce, Lower

from hindsight.banks.models import Bank
from hindsight.infra.db import ClockTimestamp
from mentalmodels.models import MentalModel

# First key of the tree's two-int advisory lock ("HSK"), beside the write clock's "HSM".
TREE_LOCK_CLASS = 0x48534B
# Folders nest at most this deep (the tree's JSON nests as deep as the folders do).
MAX_DEPTH = 32


class NodeKind(models.TextChoices):
    FOLDER = "folder", "folder"
    PAGE = "page", "page"


class KnowledgeNode(models.Model):
    # The wire id: ``kf-<32 hex>`` for a folder, ``kp-<32 hex>`` for a page (upstream's form).
    id = models.CharField(primary_key=True, max_length=64)
    bank = models.ForeignKey(Bank, on_delete=models.CASCADE, related_name="knowledge_nodes")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    kind = models.CharField(max_length=8, choices=NodeKind.choices)
    name = models.TextField()
    mental_model = models.OneToOneField(
        MentalModel, null=True, blank=True, on_delete=models.CASCADE,
        related_name="knowledge_node",
    )
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    updated_at = models.DateTimeField(db_default=ClockTimestamp())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                "bank", Coalesce("parent", Value("")), Lower("name"),
                name="knowledge_sibling_name_uniq",
            ),
            models.CheckConstraint(
                condition=(Q(kind=NodeKind.PAGE, mental_model__isnull=False)
                           | Q(kind=NodeKind.FOLDER, mental_model__isnull=True)),
                name="knowledge_page_has_model",
            ),
            models.CheckConstraint(
                condition=~Q(parent=models.F("id")), name="knowledge_not_own_parent"
            ),
        ]
        indexes = [models.Index(fields=["bank", "parent"], name="knowledge_bank_parent_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} ({self.id})"


class KnowledgeTreeVersion(models.Model):
    """A bank's tree version: bumped, in the writing transaction, by the database on every
    change the tree shows (a node written or deleted; a page's mental model changing one of the
    columns the tree renders or its staleness reads). Read in the same snapshot as the tree, it
    names exactly the state that snapshot rendered (``selectors.knowledge_tree_version``).

    Kept by triggers (migration 0002), whoever writes the rows: each bump takes the next value
    of one sequence, so a version is never repeated (not by a bank deleted and made again, nor
    a rolled-back write, nor an emptied table). No foreign key: a bank's deletion deletes its
    nodes first, and their triggers write here; the row outlives the bank."""

    bank_id = models.CharField(primary_key=True, max_length=255)
    version = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.bank_id} tree version {self.version}"


class KnowledgeMemoryForget(models.Model):
    """One row per statement that deleted memories of a bank, stamped on the write clock (the
    trigger takes the bank's shared write lock, then ``clock_timestamp()``): a deleted memory
    can turn a stale page fresh without moving the bank's last memory write, and this is the
    clock of such deletions. Insert-only (concurrent deleters never wait for each other); read
    by its newest row per bank."""

    bank_id = models.CharField(max_length=255)
    forgotten_at = models.DateTimeField(db_default=ClockTimestamp())

    class Meta:
        indexes = [models.Index(fields=["bank_id", "forgotten_at"],
                                name="knowledge_forget_bank_idx")]

    def __str__(self) -> str:
        return f"{self.bank_id} memories deleted at {self.forgotten_at}"
