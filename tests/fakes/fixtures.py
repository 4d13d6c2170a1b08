"""Fixtures for the scripted OpenAI-compatible server (fakes/llm_server.py).

- ``llm_server`` (session): the running server; use it directly only to read or script.
- ``scripted_llm`` (function): resets the server and points ``settings.HINDSIGHT`` at it —
  provider openai, base_url, api_key "test", model "scripted", ``llm_max_retries=0`` (a test
  that wants retries sets it) — and makes the gateway forget what servers refused before
  (``hindsight.infra.llm.servers``: one scripted server plays many). ``scripted_llm.env`` has the same as ``HINDSIGHT_API_*`` variables
  for worker subprocesses.
- ``openai_embeddings`` (function): the embeddings provider switched to the same server
  (model "scripted-embed", 384 dims, ``embeddings_max_retries=0``).
- ``llm`` (function): both at once — chat and embeddings from the scripted server, which it
  returns (the fixture of every test that runs a refresh or a consolidation end to end).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from fakes.llm_server import Reply, ScriptedLLMServer
from hindsight.infra.llm.servers import traits_forget

__all__ = ["Reply", "ScriptedLLMServer", "llm", "llm_server", "openai_embeddings", "scripted_llm"]


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def scripted_llm(llm_server: ScriptedLLMServer, settings) -> Iterator[ScriptedLLMServer]:
    llm_server.reset()
    traits_forget()
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT,
        llm_provider="openai",
        llm_base_url=llm_server.base_url,
        llm_api_key="test",
        llm_model="scripted",
        llm_max_retries=0,
    )
    yield llm_server
    llm_server.reset()  # releases held requests so no server thread outlives the test
    traits_forget()


@pytest.fixture
def openai_embeddings(llm_server: ScriptedLLMServer, settings) -> Iterator[ScriptedLLMServer]:
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT,
        embeddings_provider="openai",
        embeddings_base_url=llm_server.base_url,
        embeddings_api_key="test",
        embeddings_model="scripted-embed",
        embeddings_dimensions=384,
        embeddings_max_retries=0,
    )
    llm_server.reset_embeddings()  # not the chat side: scripted_llm may have set it up
    yield llm_server


@pytest.fixture
def llm(scripted_llm: ScriptedLLMServer, openai_embeddings: ScriptedLLMServer) -> ScriptedLLMServer:
    return scripted_llm
