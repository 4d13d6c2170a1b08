"""The directive MCP tools (upstream's list_directives, create_directive, delete_directive) and
reflect's apply_all_directives, driven by the SDK's client over the live server's /mcp."""

from __future__ import annotations

import pytest
from mcp import Client

from mentalmodels.directives.models import Directive
from tests.factories import make_bank, make_memory
from tests.knowledge.test_mcp import session
from tests.mentalmodels.test_pipeline import answer_with
from tests.surfaces.mcp_server.test_mcp import call
from tests.surfaces.mcp_server.test_mcp import call_error as refused

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "mcp-kb"  # the bank session() pins


def test_the_directive_tools_create_list_and_delete(live_server):
    make_bank(BANK)

    async def body(client: Client) -> None:
        formal = await call(client, "create_directive", name="Formal",
                            content="Answer in formal English.", priority=3)
        team = await call(client, "create_directive", name="Team", content="Name the lead.",
                          tags=["team"], is_active=False)
        assert (formal["priority"], formal["is_active"], team["tags"]) == (3, True, ["team"])
        listed = await call(client, "list_directives")
        assert listed == {"items": [formal], "total": 1}
        listed = await call(client, "list_directives", active_only=False, tags=["ops"])
        assert [d["name"] for d in listed["items"]] == ["Formal"]
        listed = await call(client, "list_directives", active_only=False, limit=1, offset=1)
        assert [d["name"] for d in listed["items"]] == ["Team"] and listed["total"] == 2
        assert "name" in await refused(client, "create_directive", name="", content="c")
        assert await call(client, "delete_directive", directive_id=team["id"]) == {
            "status": "deleted", "directive_id": team["id"]}
        assert "404" in await refused(client, "delete_directive", directive_id=team["id"])

    session(live_server, body)
    assert list(Directive.objects.values_list("name", flat=True)) == ["Formal"]


def test_reflects_apply_all_directives_reaches_the_prompt(live_server, scripted_llm,
                                                          openai_embeddings):
    make_bank(BANK)
    fact = make_memory(BANK, "Alice leads the team", embed=True)
    Directive.objects.create(bank_id=BANK, name="Team", content="TEAM-RULE", tags=["team"])
    answer_with(scripted_llm, "Alice leads.", [str(fact.id)])

    async def body(client: Client) -> list[list[str]]:
        named = []
        for apply_all in (False, True):
            answer = await call(client, "reflect", query="Who leads?", include_based_on=True,
                                apply_all_directives=apply_all)
            named.append([d["name"] for d in answer["based_on"]["directives"]])
        return named

    assert session(live_server, body) == [[], ["Team"]]
    prompts = [next(m["content"] for m in r["messages"] if m["role"] == "system")
               for r in scripted_llm.requests]
    assert any("TEAM-RULE" in p for p in prompts) and not all("TEAM-RULE" in p for p in prompts)
