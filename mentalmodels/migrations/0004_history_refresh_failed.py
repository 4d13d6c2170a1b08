"""A failure entry is upstream 1.1.0's ``refresh_failed`` record: the kind renamed from
``failure``, and the attempt's ``outcome`` kept beside its reason (rows written before are given
the outcome their reason implies)."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

# The outcome each failure reason is reported under (mentalmodels.pipeline raises them so).
_OUTCOME_OF_REASON = {
    "empty_candidate": "refresh_failed_empty_candidate",
    "structured_doc_unreadable": "refresh_failed_delta_not_applied",
    "delta_ops_failed": "refresh_failed_delta_not_applied",
    "delta_ops_all_skipped": "refresh_failed_delta_not_applied",
    "delta_not_applied": "refresh_failed_delta_not_applied",
    "structured_output_failed": "refresh_failed_structured_output",
}


def forwards(apps: Any, schema_editor: Any) -> None:
    history = apps.get_model("mentalmodels", "MentalModelHistory")
    failures = history.objects.filter(kind="failure")
    for reason, outcome in _OUTCOME_OF_REASON.items():
        failures.filter(reason=reason).update(outcome=outcome)
    failures.filter(outcome__isnull=True).update(outcome="refresh_failed_error")
    failures.update(kind="refresh_failed")


def backwards(apps: Any, schema_editor: Any) -> None:
    history = apps.get_model("mentalmodels", "MentalModelHistory")
    history.objects.filter(kind="refresh_failed").update(kind="failure")


class Migration(migrations.Migration):
    dependencies = [("mentalmodels", "0003_awaiting_llm_since")]

    operations = [
        migrations.AddField(
            model_name="mentalmodelhistory",
            name="outcome",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AlterField(
            model_name="mentalmodelhistory",
            name="kind",
            field=models.CharField(
                choices=[("version", "version"), ("refresh_failed", "refresh_failed")],
                max_length=16,
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
