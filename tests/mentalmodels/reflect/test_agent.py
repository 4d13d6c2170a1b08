"""The reflect loop against the scripted OpenAI-compatible server: what the "model" is asked."""

from __future__ import annotations

import json
import uuid

import pytest

from fakes.llm_server import Reply
from hindsight.banks.tokens import count_tokens
from hindsight.banks.writeclock import take_cutoff
from hindsight.infra.errors import LLMNotConfigured
from hindsight.infra.tagscope import TagScope
from mentalmodels.reflect import ReflectResult, RetrievalError, reflect_run
from mentalmodels.reflect.prompts import SYNTHESIS
from tests.mentalmodels.reflect.conftest import add_memory, add_model, tool_choices, tool_names

pytestmark = pytest.mark.django_db


def _run(bank, **kwargs) -> ReflectResult:
    kwargs.setdefault("query", "How does the team communicate?")
    kwargs.setdefault("scope", TagScope())
    kwargs.setdefault("budget", "mid")
    return reflect_run(bank_id=bank.id, **kwargs)


def _tool_payload(body: dict, index: int = -1) -> dict:
    message = body["messages"][index]
    assert message["role"] == "tool"
    return json.loads(message["content"])


def test_forced_turns_go_models_then_observations_then_recall_then_auto(bank, scripted_llm):
    fact = add_memory(bank, "Alice prefers async communication on Slack")
    obs = add_memory(bank, "The team communicates asynchronously", fact_type="observation")
    add_model(bank, "team-comms", name="Team communication", content="The team uses Slack.",
              fresh=False)
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "team communication"})]),
        Reply.tool_calls([("search_observations", {"query": "communication"})]),
        Reply.tool_calls([("recall", {"query": "Alice communication"})]),
        Reply.tool_calls([("done", {"answer": "Alice prefers async.",
                                    "memory_ids": [str(fact.id), str(obs.id)],
                                    "mental_model_ids": ["team-comms"]})]),
    )

    result = _run(bank)

    assert tool_choices(scripted_llm.requests) == [
        "search_mental_models", "search_observations", "recall", "auto",
    ]
    # Each tool result goes back as a tool message answering the call's id.
    for index in (1, 2, 3):
        messages = scripted_llm.requests[index]["messages"]
        assert messages[-1]["role"] == "tool"
        assert messages[-1]["tool_call_id"] == messages[-2]["tool_calls"][0]["id"]
    models = _tool_payload(scripted_llm.requests[1])["mental_models"]
    assert [(m["id"], m["is_stale"]) for m in models] == [("team-comms", True)]
    observations = _tool_payload(scripted_llm.requests[2])["observations"]
    assert [o["id"] for o in observations] == [str(obs.id)]
    facts = _tool_payload(scripted_llm.requests[3])["facts"]
    assert str(fact.id) in [f["id"] for f in facts]
    assert str(obs.id) not in [f["id"] for f in facts]  # recall reads raw facts only

    assert result.text == "Alice prefers async."
    assert [e["id"] for e in result.based_on["world"]] == [str(fact.id)]
    assert [e["id"] for e in result.based_on["observation"]] == [str(obs.id)]
    assert [e["id"] for e in result.based_on["mental-models"]] == ["team-comms"]
    assert result.cited_memory_ids == {str(fact.id), str(obs.id)}
    assert [c["name"] for c in result.tool_calls] == [
        "search_mental_models", "search_observations", "recall",
    ]
    assert [c["result_count"] for c in result.tool_calls] == [1, 1, len(facts)]
    assert result.iterations == 4 and result.finish == "done"
    assert [c["scope"] for c in result.llm_calls] == ["agent_1", "agent_2", "agent_3", "agent_4"]


def test_fresh_non_empty_models_release_the_remaining_forced_turns(bank, scripted_llm):
    add_memory(bank, "Alice prefers async communication")
    add_model(bank, "team-comms", name="Team communication",
              content="The team prefers async updates on Slack.", fresh=True)
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "team communication"})]),
        Reply.tool_calls([("done", {"answer": "Async on Slack.",
                                    "mental_model_ids": ["team-comms"]})]),
    )

    result = _run(bank)

    assert tool_choices(scripted_llm.requests) == ["search_mental_models", "auto"]
    assert _tool_payload(scripted_llm.requests[1])["mental_models"][0]["is_stale"] is False
    assert [m["id"] for m in result.based_on["mental-models"]] == ["team-comms"]
    assert result.mental_models_used[0]["id"] == "team-comms"
    assert result.based_on["world"] == []


@pytest.mark.parametrize("stale, content", [(True, "The team uses Slack."), (False, "")])
def test_stale_or_empty_model_keeps_the_forced_turns(bank, scripted_llm, stale, content):
    add_memory(bank, "Alice prefers async communication")
    add_model(bank, "team-comms", name="Team communication", content=content, fresh=not stale)
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "team communication"})]),
        Reply.tool_calls([("search_observations", {"query": "team communication"})]),
        Reply.tool_calls([("recall", {"query": "team communication"})]),
        Reply.tool_calls([("done", {"answer": "Slack."})]),
    )

    _run(bank)

    assert tool_choices(scripted_llm.requests) == [
        "search_mental_models", "search_observations", "recall", "auto",
    ]
    entry = _tool_payload(scripted_llm.requests[1])["mental_models"][0]
    assert entry["is_stale"] is stale
    assert entry["is_empty"] is (content == "")


def test_without_visible_models_the_first_forced_turn_is_observations(bank, scripted_llm):
    add_memory(bank, "Alice prefers async communication", tags=["alice"])
    add_model(bank, "bob-model", name="Bob", content="Bob likes calls.", tags=["bob"])
    scripted_llm.script(
        Reply.tool_calls([("search_observations", {"query": "alice"})]),
        Reply.tool_calls([("recall", {"query": "alice"})]),
        Reply.tool_calls([("done", {"answer": "Nothing known."})]),
    )

    _run(bank, scope=TagScope(tags=("alice",), tags_match="any"))

    assert tool_choices(scripted_llm.requests) == ["search_observations", "recall", "auto"]
    assert "search_mental_models" not in tool_names(scripted_llm.requests[0])


def test_one_run_embeds_a_query_text_once(bank, scripted_llm, openai_embeddings):
    add_memory(bank, "Alice prefers async communication")
    openai_embeddings.embedding_requests.clear()
    scripted_llm.script(
        Reply.tool_calls([("search_observations", {"query": "alice"})]),
        Reply.tool_calls([("recall", {"query": "alice"})]),
        Reply.tool_calls([("recall", {"query": "bob"})]),
        Reply.tool_calls([("done", {"answer": "Nothing known."})]),
    )

    result = _run(bank)

    assert [c["name"] for c in result.tool_calls] == ["search_observations", "recall", "recall"]
    embedded = [body["input"] for body in openai_embeddings.embedding_requests]
    assert embedded == [["alice"], ["bob"]]


def test_the_mental_model_search_shares_the_runs_query_embedding(bank, scripted_llm,
                                                                 openai_embeddings):
    add_memory(bank, "Alice prefers async communication")
    add_model(bank, "alice-model", name="Alice", content="Alice writes.", fresh=False)
    openai_embeddings.embedding_requests.clear()
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "alice"})]),
        Reply.tool_calls([("search_observations", {"query": "alice"})]),
        Reply.tool_calls([("recall", {"query": "alice"})]),
        Reply.tool_calls([("done", {"answer": "Nothing known."})]),
    )

    result = _run(bank)

    assert [c["name"] for c in result.tool_calls] == [
        "search_mental_models", "search_observations", "recall"]
    embedded = [text for body in openai_embeddings.embedding_requests for text in body["input"]]
    assert embedded.count("alice") == 1


def test_excluded_mental_models_are_neither_forced_nor_offered(bank, scripted_llm):
    add_model(bank, "team-comms", name="Team communication", content="Slack.")
    scripted_llm.script(
        Reply.tool_calls([("search_observations", {"query": "x"})]),
        Reply.tool_calls([("recall", {"query": "x"})]),
        Reply.tool_calls([("done", {"answer": "Nothing."})]),
    )

    _run(bank, include_mental_models=False)

    assert "search_mental_models" not in tool_names(scripted_llm.requests[0])
    assert tool_choices(scripted_llm.requests)[0] == "search_observations"


@pytest.mark.parametrize(
    "fact_types, forced",
    [(("world",), ["recall"]), (("observation",), ["search_observations"])],
)
def test_fact_types_decide_which_memory_tools_exist(bank, scripted_llm, fact_types, forced):
    scripted_llm.script(
        Reply.tool_calls([(forced[0], {"query": "x"})]),
        Reply.tool_calls([("done", {"answer": "Nothing."})]),
    )

    _run(bank, scope=TagScope(fact_types=fact_types))

    assert tool_choices(scripted_llm.requests) == [*forced, "auto"]
    offered = tool_names(scripted_llm.requests[0])
    assert ("recall" in offered) is ("world" in fact_types)
    assert ("search_observations" in offered) is ("observation" in fact_types)


def test_iteration_cap_ends_with_a_synthesis_call_without_tools(bank, scripted_llm):
    fact = add_memory(bank, "Alice prefers async communication")
    scripted_llm.script(
        Reply.tool_calls([("search_observations", {"query": "alice"})]),
        Reply.tool_calls([("recall", {"query": "alice"})]),
        Reply.tool_calls([("recall", {"query": "alice async"})]),
        Reply.tool_calls([("recall", {"query": "alice slack"})]),
        Reply.text(f"Alice likes async.\nSources: {fact.id}"),
    )

    result = _run(bank, budget="low")

    assert len(scripted_llm.requests) == 5  # low = 5 iterations, the last one without tools
    last = scripted_llm.requests[-1]
    assert not last.get("tools") and last.get("tool_choice") is None
    assert last["messages"][-1] == {"role": "user", "content": SYNTHESIS}
    assert result.finish == "synthesis" and result.iterations == 5
    assert result.text == "Alice likes async."
    assert [e["id"] for e in result.based_on["world"]] == [str(fact.id)]
    assert result.llm_calls[-1]["scope"] == "final"
    assert any("iteration cap" in w for w in result.warnings)


def test_based_on_keeps_only_cited_ids_a_tool_returned(bank, scripted_llm):
    seen = add_memory(bank, "Alice prefers async communication", tags=["alice"])
    unseen = add_memory(bank, "Bob prefers phone calls")  # untagged: outside the scope
    invented = str(uuid.uuid4())
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "communication"})]),
        Reply.tool_calls([("done", {"answer": "Alice: async.",
                                    "memory_ids": [str(seen.id), str(unseen.id), invented],
                                    "mental_model_ids": ["ghost-model"]})]),
    )

    result = _run(bank, scope=TagScope(tags=("alice",), tags_match="any_strict",
                                       fact_types=("world",)))

    assert [e["id"] for e in result.based_on["world"]] == [str(seen.id)]
    assert result.cited_memory_ids == {str(seen.id)}
    assert result.based_on["mental-models"] == []
    assert [m.id for m in result.memories_read] == [str(seen.id)]
    ignored = next(w for w in result.warnings if w.startswith("ignored cited ids"))
    assert str(unseen.id) in ignored and invented in ignored and "ghost-model" in ignored


def test_cutoff_bounds_every_memory_tool(bank, scripted_llm):
    before = add_memory(bank, "Alice prefers async communication")
    before_obs = add_memory(bank, "Alice is async-first", fact_type="observation")
    cutoff = take_cutoff(bank.id)
    add_memory(bank, "Alice now prefers async communication by email")
    add_memory(bank, "Alice is async-first by email", fact_type="observation")
    scripted_llm.script(
        Reply.tool_calls([("search_observations", {"query": "Alice async"})]),
        Reply.tool_calls([("recall", {"query": "Alice async communication"})]),
        Reply.tool_calls([("done", {"answer": "Async."})]),
    )

    result = _run(bank, cutoff=cutoff)

    assert {m.id for m in result.memories_read} == {str(before.id), str(before_obs.id)}
    assert all(m.updated_at <= cutoff for m in result.memories_read)


def test_retrieval_failure_raises_retrieval_error(bank, scripted_llm, openai_embeddings):
    add_memory(bank, "Alice prefers async communication")
    openai_embeddings.fail_embeddings(5)
    scripted_llm.script(Reply.tool_calls([("recall", {"query": "alice"})]))

    with pytest.raises(RetrievalError, match="recall") as raised:
        _run(bank, scope=TagScope(fact_types=("world",)))

    assert len(scripted_llm.requests) == 1  # no answer is written from a failed lookup
    partial = raised.value.reflect_partial
    assert [c["scope"] for c in partial.llm_calls] == ["agent_1"] and partial.text == ""


def test_no_llm_configured_raises_before_reading(bank, settings, openai_embeddings):
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_provider="none")
    with pytest.raises(LLMNotConfigured):
        _run(bank)
    assert openai_embeddings.embedding_requests == []


def test_done_without_answer_is_refused_and_the_loop_goes_on(bank, scripted_llm):
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "x"})]),
        Reply.tool_calls([("done", {"memory_ids": []})]),
        Reply.tool_calls([("done", {"answer": "Now with an answer."})]),
    )

    result = _run(bank, scope=TagScope(fact_types=("world",)))

    assert result.text == "Now with an answer."
    assert "non-empty `answer`" in _tool_payload(scripted_llm.requests[2])["error"]


def test_recall_output_is_cut_to_its_token_budget(bank, scripted_llm):
    for index in range(25):
        add_memory(bank, f"Alice fact {index}: " + "async communication matters " * 20)
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "Alice async communication", "max_tokens": 300})]),
        Reply.tool_calls([("done", {"answer": "Async."})]),
    )

    result = _run(bank, scope=TagScope(fact_types=("world",)))

    content = scripted_llm.requests[1]["messages"][-1]["content"]
    assert count_tokens(content) <= 300
    assert 0 < result.tool_calls[0]["result_count"] < 25


def test_recall_output_keeps_the_longest_prefix_that_fits_past_the_first_count_chunk(
    bank, scripted_llm
):
    for index in range(40):
        add_memory(bank, f"Alice fact {index}: async communication matters")
    query = "Alice async communication"
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": query, "max_tokens": 8192})]),
        Reply.tool_calls([("done", {"answer": "Async."})]),
        Reply.tool_calls([("recall", {"query": query, "max_tokens": 2500})]),
        Reply.tool_calls([("done", {"answer": "Async."})]),
    )

    _run(bank, scope=TagScope(fact_types=("world",)))
    _run(bank, scope=TagScope(fact_types=("world",)))

    every = json.loads(scripted_llm.requests[1]["messages"][-1]["content"])["facts"]
    sent = json.loads(scripted_llm.requests[3]["messages"][-1]["content"])["facts"]
    assert len(every) == 40
    # The longest prefix whose JSON fits (wrapper 16, one token per separator), counted whole.
    sizes = [count_tokens(json.dumps(item, ensure_ascii=False)) for item in every]
    fits = max(k for k in range(41) if 16 + sum(sizes[:k]) + k <= 2500)
    assert 16 < fits < 40  # the cut lies past the first batch of counted items
    assert sent == every[:fits]


def test_usage_is_summed_over_every_call(bank, scripted_llm):
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "x"})],
                         usage={"prompt_tokens": 100, "completion_tokens": 10}),
        Reply.tool_calls([("done", {"answer": "A."})],
                         usage={"prompt_tokens": 200, "completion_tokens": 20}),
    )

    result = _run(bank, scope=TagScope(fact_types=("world",)))

    assert result.usage == {"input_tokens": 300, "output_tokens": 30, "total_tokens": 330}


def test_response_schema_yields_structured_output(bank, scripted_llm):
    schema = {"type": "object", "properties": {"channel": {"type": "string"}},
              "required": ["channel"]}
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "x"})]),
        Reply.tool_calls([("done", {"answer": "They use Slack."})]),
        Reply.json({"channel": "Slack"}),
    )

    result = _run(bank, scope=TagScope(fact_types=("world",)), response_schema=schema)

    assert result.structured_output == {"channel": "Slack"}
    assert "They use Slack." in json.dumps(scripted_llm.requests[-1]["messages"])
    assert result.llm_calls[-1]["scope"] == "structured"


def test_tool_output_budget_of_a_run_refuses_lookups_once_spent(bank, scripted_llm, monkeypatch):
    from mentalmodels.reflect import tools

    monkeypatch.setattr(tools, "RUN_TOOL_TOKENS", 600)
    for index in range(20):
        add_memory(bank, f"Alice fact {index}: " + "async communication matters " * 10)
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "Alice async", "max_tokens": 2000})]),
        Reply.tool_calls([("recall", {"query": "Alice communication"})]),
        Reply.tool_calls([("done", {"answer": "Async."})]),
    )

    result = _run(bank, scope=TagScope(fact_types=("world",)))

    first = scripted_llm.requests[1]["messages"][-1]["content"]
    assert count_tokens(first) <= 600  # the request's 2000 were cut to the run's budget
    refused = _tool_payload(scripted_llm.requests[2])
    assert "budget" in refused["error"] and result.tool_calls[1]["result_count"] == 0
    assert any("budget" in w for w in result.warnings)


def test_model_search_without_embedder_ranks_lexically_and_omits_relevance(
    bank, scripted_llm, openai_embeddings
):
    add_model(bank, "deploys", name="Deploy process", content="Deploys run on Fridays.")
    add_model(bank, "comms", name="Team communication", content="Slack, async first.")
    openai_embeddings.fail_embeddings(1)  # only the model search's request fails
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "team communication"})]),
        Reply.tool_calls([("done", {"answer": "Slack.", "mental_model_ids": ["comms"]})]),
    )

    result = _run(bank)

    entries = _tool_payload(scripted_llm.requests[1])["mental_models"]
    assert [e["id"] for e in entries] == ["comms", "deploys"]
    assert all("relevance" not in e for e in entries)
    assert any("lexical" in w for w in result.warnings)
    assert [m["id"] for m in result.based_on["mental-models"]] == ["comms"]


def test_model_search_with_embedder_reports_relevance(bank, scripted_llm):
    add_model(bank, "comms", name="Team communication", content="Slack, async first.")
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "team communication"})]),
        Reply.tool_calls([("done", {"answer": "Slack."})]),
    )

    _run(bank)

    [entry] = _tool_payload(scripted_llm.requests[1])["mental_models"]
    assert 0 < entry["relevance"] <= 1


def test_malformed_tool_arguments_are_reported_back_to_the_model(bank, scripted_llm):
    scripted_llm.script(
        Reply.tool_calls([("recall", "{not json")]),
        Reply.tool_calls([("done", {"answer": "Sorry."})]),
    )

    result = _run(bank, scope=TagScope(fact_types=("world",)))

    assert "JSON object" in _tool_payload(scripted_llm.requests[1])["error"]
    assert result.text == "Sorry." and result.tool_calls == []


def test_a_plain_text_answer_ends_the_loop_citing_the_ids_it_names(bank, scripted_llm):
    fact = add_memory(bank, "Alice prefers async communication")
    other = add_memory(bank, "Bob prefers calls")
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "communication"})]),
        Reply.text(f"Alice prefers async ({fact.id}).\n\n**Sources:** {fact.id}"),
    )

    result = _run(bank, scope=TagScope(fact_types=("world",)))

    assert result.finish == "text" and len(scripted_llm.requests) == 2
    assert result.text == f"Alice prefers async ({fact.id})."
    assert result.cited_memory_ids == {str(fact.id)}
    assert str(other.id) in {m.id for m in result.memories_read}


def test_a_tool_never_offered_is_refused_and_reads_nothing(bank, scripted_llm):
    # The model may name any tool: one left out of this run (mental models excluded) or one
    # that does not exist must be answered with an error, never run.
    add_memory(bank, "Alice prefers async communication")
    add_model(bank, "team-comms", name="Team communication", content="The team uses Slack.")
    scripted_llm.script(
        Reply.tool_calls([("search_mental_models", {"query": "team"}),
                          ("drop_bank", {"query": "team"})]),
        Reply.tool_calls([("done", {"answer": "Nothing.", "mental_model_ids": ["team-comms"]})]),
    )

    result = _run(bank, include_mental_models=False, scope=TagScope(fact_types=("world",)))

    offered = tool_names(scripted_llm.requests[0])
    assert "search_mental_models" not in offered and "drop_bank" not in offered
    answers = [json.loads(m["content"]) for m in scripted_llm.requests[1]["messages"]
               if m["role"] == "tool"]
    assert answers == [
        {"error": "unknown tool 'search_mental_models'; available: recall, done"},
        {"error": "unknown tool 'drop_bank'; available: recall, done"},
    ]
    assert [(c["name"], c["result_count"]) for c in result.tool_calls] == [
        ("search_mental_models", 0), ("drop_bank", 0)]
    # The model cites what it was never shown: nothing of it counts as a source.
    assert result.based_on["mental-models"] == [] and result.mental_models_used == []
