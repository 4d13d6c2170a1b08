"""The knowledge base in the admin: each bank's tree with its pages linking to their mental
models' change pages, staleness shown; a delete goes through the service."""

from __future__ import annotations

import pytest

from mentalmodels.knowledge.models import KnowledgeNode
from mentalmodels.knowledge.services import knowledge_folder_create, knowledge_page_create
from mentalmodels.models import MentalModel
from tests.factories import make_bank, make_memory

pytestmark = pytest.mark.django_db

LIST = "/admin/knowledge/knowledgenode/"


def test_the_tree_lists_folders_and_pages_linking_to_their_mental_models(admin_client):
    make_bank("adm")
    make_bank("other")
    ops = knowledge_folder_create(bank_id="adm", name="Ops")
    page, _ = knowledge_page_create(bank_id="adm", name="Runbook", source_query="How?",
                                    parent_id=ops.id, trigger={"fact_types": ["world"]})
    knowledge_folder_create(bank_id="other", name="Elsewhere")
    make_memory("adm", "We deploy on Fridays.")
    response = admin_client.get(LIST)
    assert response.status_code == 200
    html = response.content.decode()
    model_url = f"/admin/mentalmodels/mentalmodel/{page.mental_model.uid}/change/"
    assert f'<a href="{model_url}">Runbook</a>' in html
    assert "Ops/" in html and "Elsewhere/" in html
    assert '<span class="kb-stale">stale</span>' in html
    assert html.index("Ops/") < html.index("Runbook")
    only = admin_client.get(LIST + "?bank=other").content.decode()
    assert "Elsewhere/" in only and "Runbook" not in only
    assert admin_client.get(LIST + "add/").status_code == 403


def test_an_admin_delete_takes_the_subtree_and_the_pages_models(admin_client):
    make_bank("adm")
    ops = knowledge_folder_create(bank_id="adm", name="Ops")
    knowledge_page_create(bank_id="adm", name="Runbook", source_query="How?", parent_id=ops.id)
    response = admin_client.post(f"{LIST}{ops.id}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not KnowledgeNode.objects.exists() and not MentalModel.objects.exists()
