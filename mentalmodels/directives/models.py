"""Directives: a bank's hard rules, injected near the top of every reflect prompt and so into
every mental-model refresh (docs/behaviour.md#directives).

``Directive`` is one rule: its name and text, a priority (higher first), whether it is active,
and the tags that scope it (untagged: it applies to every request of the bank). Names are not
unique, as upstream's are not; a bank template matches directives by name.

``DirectiveScopeStamp`` is when the directives of one tag set last changed in a bank (created,
edited, deactivated, deleted): the staleness rule reads it, since a page's text depends on the
directives that applied to it (docs/behaviour.md#a-directive-change-makes-its-pages-stale). One
row per distinct tag set, so a bank holds as many as it has ways of tagging its directives.
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models

from hindsight.banks.models import Bank
from hindsight.infra.db import ClockTimestamp


class Directive(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    bank = models.ForeignKey(Bank, on_delete=models.CASCADE, related_name="directives")
    name = models.TextField()
    content = models.TextField()
    priority = models.IntegerField(default=0)
    is_active = models.BooleanField(default=True)
    tags = ArrayField(models.TextField(), default=list, blank=True)
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    updated_at = models.DateTimeField(db_default=ClockTimestamp())

    class Meta:
        indexes = [models.Index(fields=["bank", "is_active"], name="directive_bank_active_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.bank_id})"


class DirectiveScopeStamp(models.Model):
    bank = models.ForeignKey(Bank, on_delete=models.CASCADE, related_name="+")
    # Sorted and deduplicated: one row per set.
    tags = ArrayField(models.TextField(), default=list, blank=True)
    changed_at = models.DateTimeField(db_default=ClockTimestamp())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bank", "tags"], name="directive_stamp_bank_tags_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.bank_id} {self.tags} changed at {self.changed_at}"
