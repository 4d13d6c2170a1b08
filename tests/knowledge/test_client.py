"""The official hindsight-client 1.1.0's knowledge-base calls against our live server, a real
Celery worker and the scripted LLM writing the pages: build a tree, see a first refresh write a
page, see it turn stale after an in-scope retain (on the tree and on the page's model), move and
rename, refuse a duplicate name and a cycle, search, export, delete."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hindsight_client import Hindsight
from hindsight_client_api.exceptions import ApiException

from tests.live import LiveStack, write_documents

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-kb"
TEAM_DOC = "## Team\n\nAlice prefers async; Bob runs standups."
CAROL_DOC = "## Carol\n\nCarol has a cat named Miso."
WORLD = {"fact_types": ["world"]}


@pytest.fixture
def client(live_stack: LiveStack) -> Iterator[Hindsight]:
    hindsight = Hindsight(base_url=live_stack.url, timeout=30.0, max_attempts=1)
    hindsight.create_bank(BANK, name="Compat KB")
    hindsight.update_bank_config(BANK, enable_auto_consolidation=False)
    hindsight.retain_batch(BANK, [
        {"content": "Alice prefers async communication over Slack.", "tags": ["team"],
         "strategy": "verbatim"},
        {"content": "Bob runs the Monday standup.", "tags": ["team"], "strategy": "verbatim"},
        {"content": "Carol's cat is called Miso.", "tags": ["carol"], "strategy": "verbatim"},
    ])
    write_documents(live_stack.llm, {"How does the team communicate?": TEAM_DOC,
                                     "What about Carol?": CAROL_DOC})
    yield hindsight
    hindsight.close()


def by_name(nodes) -> dict:
    out = {}
    for node in nodes:
        out[node.name] = node
        out.update(by_name(node.children or []))
    return out


def test_the_client_drives_the_knowledge_base(client: Hindsight, live_stack: LiveStack):
    team = client.create_knowledge_folder(BANK, "Team")
    assert team.kind == "folder" and team.id.startswith("kf-") and team.parent_id is None
    people = client.create_knowledge_folder(BANK, "People", parent_id=team.id)
    assert people.parent_id == team.id
    comms = client.create_knowledge_page(BANK, "Communication", "How does the team communicate?",
                                         parent_id=team.id, tags=["team"], trigger=WORLD)
    carol = client.create_knowledge_page(BANK, "Carol", "What about Carol?", tags=["carol"],
                                         trigger=WORLD)
    assert comms.page_id.startswith("kp-") and comms.mental_model_id.startswith("mm-")
    for created in (comms, carol):
        assert live_stack.wait_operation(BANK, created.operation_id)["status"] == "completed"

    # The first refresh wrote the page's document.
    page = client.get_knowledge_page(BANK, comms.page_id)
    assert page.body == TEAM_DOC and page.name == "Communication" and page.tags == ["team"]
    assert page.markdown.startswith(f'---\nid: "{comms.page_id}"\ntype: "knowledge-page"\n')
    assert page.markdown.endswith(f"---\n\n{TEAM_DOC}\n")

    tree = client.get_knowledge_base_tree(BANK)
    assert [n.name for n in tree.roots] == ["Carol", "Team"]
    nodes = by_name(tree.roots)
    assert [n.name for n in nodes["Team"].children] == ["Communication", "People"]
    assert nodes["Communication"].is_stale is False and nodes["Carol"].is_stale is False
    assert nodes["Communication"].trigger.mode == "delta"  # the page default, kept
    assert nodes["Communication"].trigger.fact_types == ["world"]
    assert nodes["Communication"].timestamp and nodes["Communication"].last_refresh_failed_at is None
    assert nodes["Team"].is_stale is None and nodes["Team"].mental_model_id is None
    filtered = client.get_knowledge_base_tree(BANK, tags=["carol"], tags_match="any_strict")
    assert [n.name for n in filtered.roots] == ["Carol"]

    # A page is a mental model.
    model = client.get_mental_model(BANK, comms.mental_model_id)
    assert model.is_knowledge_page is True and model.content == TEAM_DOC
    listed = client.list_mental_models(BANK, exclude_knowledge_pages=True)
    assert listed.items == []
    assert {m.is_knowledge_page for m in client.list_mental_models(BANK).items} == {True}

    # An in-scope retain turns the team page stale (tree and model), not Carol's.
    client.retain_batch(BANK, [{"content": "Dana joined the team's standup.", "tags": ["team"],
                                "strategy": "verbatim"}])
    nodes = by_name(client.get_knowledge_base_tree(BANK).roots)
    assert nodes["Communication"].is_stale is True and nodes["Carol"].is_stale is False
    assert client.get_mental_model(BANK, comms.mental_model_id).is_stale is True

    # Move and rename (one call), then back to the root.
    moved = client.update_knowledge_node(BANK, comms.page_id, name="Comms", parent_id=people.id)
    assert moved.name == "Comms" and moved.parent_id == people.id
    assert client.get_mental_model(BANK, comms.mental_model_id).name == "Comms"
    assert client.update_knowledge_node(BANK, people.id, parent_id=None).parent_id is None

    # A duplicate name in the same folder and a cycle are refused.
    with pytest.raises(ApiException) as dup:
        client.create_knowledge_page(BANK, "comms", "Anything?", parent_id=people.id)
    assert dup.value.status == 409
    with pytest.raises(ApiException) as cycle:
        client.update_knowledge_node(BANK, team.id, parent_id=team.id)
    assert cycle.value.status == 400
    client.update_knowledge_node(BANK, team.id, parent_id=people.id)
    with pytest.raises(ApiException) as cycle:
        client.update_knowledge_node(BANK, people.id, parent_id=team.id)
    assert cycle.value.status == 400 and "own subtree" in cycle.value.body

    found = client.search_knowledge_base(BANK, "How does the team communicate standups")
    assert found.results[0].id == comms.page_id and found.total >= 1
    assert found.results[0].snippet.startswith("## Team")
    assert 0 < found.results[0].score <= 1

    bundle = client.export_knowledge_base(BANK)
    paths = {f.path: f.content for f in bundle.files}
    assert set(paths) >= {"index.md", f"{comms.page_id}.md", f"{carol.page_id}.md"}
    assert f"[Comms](./{comms.page_id}.md) — How does the team communicate?" in paths["index.md"]
    assert paths[f"{comms.page_id}.md"].endswith(f"\n\n{TEAM_DOC}\n")
    # The first refresh's version (the empty document it replaced) is the page's log.
    assert paths[f"{comms.page_id}.log.md"].startswith('---\ntype: "log"\ntitle: "Comms — history"')

    # Deleting the folder People takes Team, the Comms page and its mental model with it.
    assert client.delete_knowledge_node(BANK, people.id) == {"status": "deleted"}
    assert [n.name for n in client.get_knowledge_base_tree(BANK).roots] == ["Carol"]
    with pytest.raises(ApiException) as gone:
        client.get_mental_model(BANK, comms.mental_model_id)
    assert gone.value.status == 404
    with pytest.raises(ApiException) as gone:
        client.get_knowledge_page(BANK, comms.page_id)
    assert gone.value.status == 404
