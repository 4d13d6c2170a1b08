"""Upstream's provider names that speak OpenAI's protocol: each starts with its default address and
key variable, ``HINDSIGHT_API_LLM_BASE_URL`` overrides it, a name needing another protocol stops
start-up in one line naming the supported set, and the resolved LLM is shown at ``/version``."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from django.core.checks import run_checks
from django.utils import timezone
from rest_framework.test import APIClient

from fakes.whole_model import document, whole_model
from hindsight.infra.config import (
    OPENAI_COMPATIBLE_PROVIDERS,
    OTHER_PROTOCOL_PROVIDERS,
    read_config,
)
from hindsight.infra.llm.models import LLMRequest
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run

# Upstream Hindsight 1.1.0's names and default addresses (engine/llm_wrapper.py,
# engine/providers/openai_compatible_llm.py), and the three it talks to otherwise here.
UPSTREAM_DEFAULT_BASE_URLS = {
    "groq": "https://api.groq.com/openai/v1",
    "ollama": "http://localhost:11434/v1",
    "ollama-cloud": "https://ollama.com/v1",
    "lmstudio": "http://localhost:1234/v1",
    "deepseek": "https://api.deepseek.com",
    "openrouter": "https://openrouter.ai/api/v1",
    "requesty": "https://router.requesty.ai/v1",
    "zai": "https://api.z.ai/api/coding/paas/v4",
    "fireworks": "https://api.fireworks.ai/inference/v1",
    "minimax": "https://api.minimax.io/v1",
    "atlas": "https://api.atlascloud.ai/v1",
    "nous": "https://inference-api.nousresearch.com/v1",
    "meta": "https://api.meta.ai/v1",
    "opencode-go": "https://opencode.ai/zen/go/v1",
    # Upstream uses their own SDKs, or starts a llama.cpp server itself: the providers'
    # documented OpenAI-compatible addresses instead (docs/providers.md).
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai/",
    "anthropic": "https://api.anthropic.com/v1/",
    "llamacpp": "http://127.0.0.1:8080/v1",
}
KEYLESS = {"ollama", "lmstudio", "llamacpp"}


def env_for(name: str, **more: str) -> dict[str, str]:
    env = {"HINDSIGHT_API_LLM_PROVIDER": name, **more}
    if name not in KEYLESS:
        env["HINDSIGHT_API_LLM_API_KEY"] = "k"
    return env


def test_the_seventeen_names_are_all_accepted() -> None:
    assert len(UPSTREAM_DEFAULT_BASE_URLS) == 17
    assert set(UPSTREAM_DEFAULT_BASE_URLS) <= set(OPENAI_COMPATIBLE_PROVIDERS)


@pytest.mark.parametrize("name", UPSTREAM_DEFAULT_BASE_URLS)
def test_each_name_starts_with_its_default_address_and_passes_the_checks(name, settings) -> None:
    config = read_config(env_for(name))
    assert config.errors == ()
    assert config.llm_base_url == UPSTREAM_DEFAULT_BASE_URLS[name]
    assert config.llm_configured and config.llm_model == OPENAI_COMPATIBLE_PROVIDERS[name].model
    settings.HINDSIGHT = config
    assert [e.msg for e in run_checks() if e.id and e.id.startswith("hindsight.E00")] == []


@pytest.mark.parametrize("name", ["groq", "ollama", "gemini"])
def test_the_base_url_and_model_variables_override_the_defaults(name) -> None:
    config = read_config(env_for(name, HINDSIGHT_API_LLM_BASE_URL="http://10.0.0.5:9000/v1",
                                 HINDSIGHT_API_LLM_MODEL="mine"))
    assert (config.llm_base_url, config.llm_model, config.errors) == (
        "http://10.0.0.5:9000/v1", "mine", ())


@pytest.mark.parametrize("name", sorted(set(UPSTREAM_DEFAULT_BASE_URLS) - KEYLESS))
def test_a_cloud_name_without_its_key_is_refused(name) -> None:
    config = read_config({"HINDSIGHT_API_LLM_PROVIDER": name})
    assert [(p.variable, p.rule) for p in config.errors] == [("HINDSIGHT_API_LLM_API_KEY", "E002")]


def test_a_local_servers_bare_address_gets_v1_as_its_ui_shows_it_without() -> None:
    config = read_config(env_for("lmstudio", HINDSIGHT_API_LLM_BASE_URL="http://127.0.0.1:1234"))
    assert config.llm_base_url == "http://127.0.0.1:1234/v1"
    proxied = read_config(env_for("ollama", HINDSIGHT_API_LLM_BASE_URL="http://h/ollama/v1"))
    assert proxied.llm_base_url == "http://h/ollama/v1"


def test_volcano_has_no_default_address_so_its_base_url_is_required() -> None:
    config = read_config(env_for("volcano"))
    assert [p.variable for p in config.errors] == ["HINDSIGHT_API_LLM_BASE_URL"]


@pytest.mark.parametrize("name", OTHER_PROTOCOL_PROVIDERS)
def test_a_name_needing_another_protocol_is_refused_naming_the_supported_set(name) -> None:
    (problem,) = read_config(env_for(name)).errors
    assert problem.variable == "HINDSIGHT_API_LLM_PROVIDER" and problem.rule == "E001"
    assert f"{name!r} needs another protocol" in problem.message
    assert "supported: openai, groq, ollama," in problem.message and "\n" not in problem.message


def test_manage_py_check_passes_with_a_name_and_no_base_url_and_stops_on_bedrock() -> None:
    base = {"PATH": "/usr/bin:/bin", "HINDSIGHT_API_LLM_API_KEY": "k",
            "HINDSIGHT_API_SECRET_KEY": "k" * 50,
            "HINDSIGHT_API_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/unused"}
    # Both at once: each spends seconds setting Django up, and neither needs the other.
    checks = {name: subprocess.Popen([sys.executable, "manage.py", "check"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**base, "HINDSIGHT_API_LLM_PROVIDER": name})
              for name in ("groq", "bedrock")}
    try:
        said = {name: check.communicate(timeout=120)[1] for name, check in checks.items()}
    finally:
        for check in checks.values():
            if check.poll() is None:
                check.kill()
                check.communicate()
    assert checks["groq"].returncode == 0, said["groq"]
    assert checks["bedrock"].returncode != 0
    (line,) = [ln for ln in said["bedrock"].splitlines() if "HINDSIGHT_API_LLM_PROVIDER" in ln]
    assert "'bedrock' needs another protocol" in line and "supported: openai, groq" in line


@pytest.mark.django_db
def test_version_names_the_resolved_provider_base_url_and_model(settings) -> None:
    settings.HINDSIGHT = read_config(env_for("deepseek"))
    assert APIClient().get("/version").json()["llm"] == {
        "provider": "deepseek", "base_url": "https://api.deepseek.com",
        "model": "deepseek-v4-flash"}
    settings.HINDSIGHT = read_config({})
    assert APIClient().get("/version").json()["llm"] == {
        "provider": "none", "base_url": None, "model": None}


def test_the_start_log_line_names_the_resolved_llm() -> None:
    assert read_config(env_for("groq")).llm_description == (
        "LLM: groq at https://api.groq.com/openai/v1, model openai/gpt-oss-120b")


# Every name takes the same path past the configuration: one gateway, one openai SDK client on
# the resolved base URL, nothing else keyed by the name. Two of them — a cloud one with a key
# and a local one without — refresh end to end against the scripted server.
@pytest.mark.django_db
@pytest.mark.parametrize("name", ["groq", "ollama"])
def test_a_name_with_its_base_url_on_the_scripted_server_refreshes(name, bank, llm,
                                                                   settings) -> None:
    resolved = read_config(env_for(name, HINDSIGHT_API_LLM_BASE_URL=llm.base_url))
    assert resolved.errors == ()
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, llm_provider=resolved.llm_provider,
        llm_base_url=resolved.llm_base_url, llm_api_key=resolved.llm_api_key,
        llm_model=resolved.llm_model)
    whole_model(llm)
    make_memory(bank, "Alice leads the team.", embed=True)
    model = make_mental_model(bank, "team")
    started = timezone.now()
    refresh_run(bank_id=bank.id, mental_model_id="team")
    model.refresh_from_db()
    assert model.content == document(["Alice leads the team."])
    assert {r["model"] for r in llm.requests} == {OPENAI_COMPATIBLE_PROVIDERS[name].model}
    # This refresh's rows: the request log is written outside the test's transaction, so rows
    # of earlier tests on this database may still be there.
    logged = LLMRequest.objects.filter(started_at__gte=started)
    assert set(logged.values_list("provider", flat=True)) == {name}
