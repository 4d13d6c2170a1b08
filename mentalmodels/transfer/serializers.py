"""The bank transfer's wire shapes (upstream 1.1.0's): the query parameters of export, import and
clone, and the 202 answer naming the operation."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from hindsight.infra.edge.serializers import Boolean, Choice, List, Query, Rendered, Text, const
from mentalmodels.transfer.exporter import Scope
from mentalmodels.transfer.importer import CONFLICT_RULES, MODES, RESTORE, ImportRequest


def _include_fields(default: bool | None) -> tuple[Boolean, Boolean, Boolean]:
    kwargs: dict[str, Any] = {"required": False}

    def field(value: bool, help_text: str) -> Boolean:
        if default is None:
            return Boolean(allow_null=True, help_text=help_text, **kwargs)
        return Boolean(default=value, help_text=help_text, **kwargs)

    return (
        field(True, "Carry the memories and observations, the mental models with their history, "
                    "and the knowledge base"),
        field(True, "Carry the bank's config overrides and its directives"),
        field(False, "Carry the LLM request log"),
    )


def scope_of(query: dict[str, Any]) -> Scope:
    def flag(name: str, default: bool) -> bool:
        value = query.get(name)
        return default if value is None else bool(value)

    return Scope(data=flag("include_data", True), bank_config=flag("include_bank_config", True),
                 history=flag("include_history", False))


class ExportQuery(Query):
    include_data, include_bank_config, include_history = _include_fields(True)
    document_id = List(child=Text(), required=False,
                       help_text="Not offered here: a bank export is the whole bank")


class CloneQuery(Query):
    target_bank_id = Text(max_length=255, help_text="The bank to create; must not exist")
    include_data, include_bank_config, include_history = _include_fields(True)


class ImportQuery(Query):
    mode = Choice(choices=MODES, required=False, default=RESTORE,
                  help_text="restore (a new bank) or merge (documents into this bank)")
    target_bank_id = Text(max_length=255, required=False, allow_null=True,
                          help_text="restore: the bank to create (default: the archive's "
                                    "source bank); it must not exist")
    document_conflict = Choice(choices=CONFLICT_RULES, required=False, default="skip",
                               help_text="merge: what a document already in the bank gets")
    include_data, include_bank_config, include_history = _include_fields(None)

    @classmethod
    def request(cls, query: dict[str, Any]) -> ImportRequest:
        return ImportRequest(mode=query["mode"], target_bank_id=query.get("target_bank_id"),
                             scope=scope_of(query),
                             document_conflict=query["document_conflict"])


class TransferSubmitResponseSerializer(Rendered):
    operation_id = serializers.UUIDField(source="id")
    status = const(serializers.CharField(), "pending")
