"""What the review tests share: a scripted answer (the pipeline tests' ``answer_with``), a refresh run through the fenced path, a
model's page as stored (its markdown and the JSON text of its document), a proposal row."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta

from django.utils import timezone

from mentalmodels.document.diff import PageVersion, page_diff
from mentalmodels.document.structure import split
from mentalmodels.models import MentalModel
from mentalmodels.refresh.records import Report
from mentalmodels.review.models import MentalModelProposal, page_digest
from tests.mentalmodels.fenced import refresh_run
from tests.mentalmodels.test_pipeline import answer_with


def refreshed(server, bank_id: str, mental_model_id: str, answer: str,
              memory_ids: Sequence[str] = (), **kwargs) -> Report:
    answer_with(server, answer, memory_ids)
    return refresh_run(bank_id=bank_id, mental_model_id=mental_model_id, **kwargs)


def page(model: MentalModel) -> tuple[str, str]:
    """The stored page, byte for byte: the markdown and the document's JSON text."""
    model.refresh_from_db()
    return model.content, json.dumps(model.document, sort_keys=True)


def make_proposal(model: MentalModel, content: str = "# Proposed\n\nA new page.",
                  **fields) -> MentalModelProposal:
    """A pending proposal of ``model`` made from its current page (approvable), expiring in an
    hour unless ``fields`` say otherwise."""
    fields.setdefault("expires_at", timezone.now() + timedelta(hours=1))
    return MentalModelProposal.objects.create(
        model=model, content=content, document=split(content).as_json(),
        base_digest=page_digest(model.content, model.document),
        changes=page_diff(PageVersion(model.content, model.document), PageVersion(content)),
        **fields)
