"""An unset OpenAI embeddings dimension is probed at start; a declared one is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fakes.llm_server import ScriptedLLMServer
from hindsight.infra.config import read_config
from hindsight.infra.embeddings.openai_provider import OpenAIEmbedder
from hindsight.infra.embeddings.probe import VARIABLE, embeddings_dimensions_probe

ROOT = Path(__file__).resolve().parents[3]


def _env(server: ScriptedLLMServer, **extra: str) -> dict[str, str]:
    return {
        "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL": server.base_url,
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_API_KEY": "test",
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": "scripted-embed",
        "HINDSIGHT_API_EMBEDDINGS_MAX_RETRIES": "0",
        **extra,
    }


@pytest.fixture
def server(llm_server: ScriptedLLMServer):
    llm_server.reset_embeddings()
    yield llm_server
    llm_server.embedding_dimensions = None
    llm_server.reset_embeddings()


def test_an_unset_dimension_is_the_length_of_the_models_first_answer(server) -> None:
    server.embedding_dimensions = 768
    config = embeddings_dimensions_probe(read_config(_env(server)))
    assert config.errors == ()
    assert config.embeddings_dimensions == 768 and config.embeddings_dimensions_probed
    [probe] = server.embedding_requests
    assert "dimensions" not in probe  # we do not know one to ask for


def test_a_declared_dimension_is_not_probed(server) -> None:
    config = embeddings_dimensions_probe(read_config(_env(
        server, HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS="384")))
    assert config.embeddings_dimensions == 384 and not config.embeddings_dimensions_probed
    assert server.embedding_requests == []


def test_a_declared_dimension_is_checked_against_the_first_answer(server) -> None:
    server.embedding_dimensions = 10  # the model ignores what it is asked for
    embedder = OpenAIEmbedder(base_url=server.base_url, api_key="test", model="scripted-embed",
                              dimensions=384, timeout_seconds=5, max_retries=0)
    with pytest.raises(Exception, match=f"{VARIABLE}=384"):
        embedder.embed(["first"])


def test_a_probed_dimension_is_not_sent_with_later_requests(server) -> None:
    embedder = OpenAIEmbedder(base_url=server.base_url, api_key="test", model="scripted-embed",
                              dimensions=384, timeout_seconds=5, max_retries=0,
                              send_dimensions=False)
    assert len(embedder.embed(["x"])[0]) == 384
    assert "dimensions" not in server.embedding_requests[-1]


def test_a_probe_that_fails_stops_start_up_naming_the_variable() -> None:
    env = {
        "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # nothing listens
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": "e",
        "HINDSIGHT_API_EMBEDDINGS_MAX_RETRIES": "0",
    }
    config = embeddings_dimensions_probe(read_config(env))
    [problem] = config.errors
    assert problem.variable == VARIABLE and "could not be probed" in problem.message
    assert problem.rule == "E002"  # hindsight.E002: set the variable


def test_the_settings_probe_before_the_models_take_the_dimension(server) -> None:
    server.embedding_dimensions = 512
    code = ("import django; django.setup(); from django.conf import settings; "
            "from hindsight.banks.models import MemoryUnit; "
            "print(settings.HINDSIGHT.embeddings_dimensions, "
            "MemoryUnit._meta.get_field('embedding').dimensions)")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "hindsight.project.settings",
             "HINDSIGHT_API_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/unused",
             **_env(server)},
    )
    assert result.stdout.split() == ["512", "512"], result.stderr
