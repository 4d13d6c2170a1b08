"""The bank templates' wire shapes (upstream 1.1.0's): the import's ``dry_run`` parameter, its
answer (``BankTemplateImportResponse``, with our ``*_unchanged`` lists after upstream's keys),
and the manifest and its JSON Schema as OpenAPI components.

The manifest is documented from the one JSON Schema an import is checked against
(``mentalmodels.bank_templates.schema``), rewritten for OpenAPI 3.0; importing this module
registers the extension that does it (the views import it).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from hindsight.infra.edge.serializers import Boolean, Query, Rendered
from mentalmodels.bank_templates.schema import manifest_schema, openapi_form


class ImportQuery(Query):
    dry_run = Boolean(required=False, default=False,
                      help_text="Validate and report what the import would do; write nothing")


def _names() -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField())


class BankTemplateImportResponseSerializer(Rendered):
    bank_id = serializers.CharField()
    config_applied = serializers.BooleanField()
    mental_models_created = _names()
    mental_models_updated = _names()
    directives_created = _names()
    directives_updated = _names()
    operation_ids = _names()
    dry_run = serializers.BooleanField()
    mental_models_unchanged = _names()
    directives_unchanged = _names()


class BankTemplateManifestSerializer(serializers.Serializer):
    """Documentation only: the manifest (``BankTemplateManifestExtension``); the import checks
    it against its JSON Schema (``mentalmodels.bank_templates.manifest``). The fields name its
    top-level keys."""

    version = serializers.CharField()
    bank = serializers.JSONField()
    mental_models = serializers.JSONField()
    directives = serializers.JSONField()


class BankTemplateSchemaSerializer(serializers.Serializer):
    """Documentation only: a JSON Schema document (``BankTemplateSchemaExtension``)."""


class BankTemplateManifestExtension(OpenApiSerializerExtension):
    target_class = BankTemplateManifestSerializer

    def get_name(self, auto_schema: Any, direction: str) -> str | None:
        return "BankTemplateManifest"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return dict(openapi_form(manifest_schema()))


class BankTemplateSchemaExtension(OpenApiSerializerExtension):
    target_class = BankTemplateSchemaSerializer

    def get_name(self, auto_schema: Any, direction: str) -> str | None:
        return "BankTemplateSchema"

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": True,
                "description": "The JSON Schema (draft 2020-12) of BankTemplateManifest"}
