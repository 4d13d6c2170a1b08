"""The env reader and the system checks that stop start-up on bad configuration."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from django.core.checks import run_checks

from hindsight.infra.config import INVALID_VALUE, ConfigProblem, read_config


def test_defaults_listen_on_loopback_without_an_llm() -> None:
    config = read_config({})
    assert config.host == "127.0.0.1"
    assert config.port == 8888
    assert config.llm_provider == "none" and not config.llm_configured
    assert (config.embeddings_provider, config.embeddings_dimensions) == ("local", 384)
    assert config.errors == ()


def test_upstream_variable_names_carry_over() -> None:
    config = read_config({
        "HINDSIGHT_API_LLM_PROVIDER": "openai",
        "HINDSIGHT_API_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "HINDSIGHT_API_LLM_API_KEY": "k",
        "HINDSIGHT_API_LLM_MODEL": "m",
        "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": "e",
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS": "768",
        "HINDSIGHT_API_PORT": "9999",
    })
    assert config.errors == ()
    assert config.llm_configured and config.llm_model == "m"
    assert config.embeddings_dimensions == 768 and config.port == 9999


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"HINDSIGHT_API_LLM_PROVIDER": "gpt"}, "HINDSIGHT_API_LLM_PROVIDER"),
        ({"HINDSIGHT_API_LLM_PROVIDER": "openai"}, "HINDSIGHT_API_LLM_MODEL"),
        ({"HINDSIGHT_API_PORT": "eighty"}, "HINDSIGHT_API_PORT"),
        ({"HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai"}, "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL"),
        ({"HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai", "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": "e",
          "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS": "4096"},
         "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS"),
        ({"HINDSIGHT_API_DATABASE_URL": "mysql://x"}, "HINDSIGHT_API_DATABASE_URL"),
        ({"HINDSIGHT_API_REFLECT_WALL_TIMEOUT": "400"}, "HINDSIGHT_API_WORKER_TASK_SOFT_TIME_LIMIT"),
        ({"HINDSIGHT_API_ENABLE_MENTAL_MODEL_HISTORY": "maybe"},
         "HINDSIGHT_API_ENABLE_MENTAL_MODEL_HISTORY"),
    ],
)
def test_invalid_values_are_reported_naming_the_variable(env: dict[str, str], variable: str) -> None:
    config = read_config(env)
    assert variable in [problem.variable for problem in config.errors]


def test_system_check_turns_configuration_errors_into_errors(settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, errors=(ConfigProblem("HINDSIGHT_API_PORT", "must be an integer; got 'x'", INVALID_VALUE),)
    )
    messages = [m for m in run_checks() if m.id and m.id.startswith("hindsight.E")]
    assert [m.msg for m in messages] == ["HINDSIGHT_API_PORT must be an integer; got 'x'"]


def test_start_up_stops_on_invalid_configuration() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        # A database URL, so manage.py does not look for a running `make run` first.
        env={"PATH": "/usr/bin:/bin", "HINDSIGHT_API_LLM_PROVIDER": "gpt",
             "HINDSIGHT_API_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/unused"},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "HINDSIGHT_API_LLM_PROVIDER must be one of openai, groq, " in result.stderr


_OFFLINE_SERVERS = {"PATH": "/usr/bin:/bin", "HINDSIGHT_API_SECRET_KEY": "k" * 50,
                    "HINDSIGHT_API_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/unused",
                    "HINDSIGHT_API_REDIS_URL": "redis://127.0.0.1:1/0"}


def test_a_worker_with_invalid_configuration_stops_at_start_up_naming_the_variable() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "hindsight", "worker", "-P", "solo"],
        env={**_OFFLINE_SERVERS, "HINDSIGHT_API_LLM_PROVIDER": "gpt"},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "HINDSIGHT_API_LLM_PROVIDER must be one of openai, groq, " in result.stderr
    assert " ready." not in result.stdout + result.stderr


def test_a_missing_secret_key_stops_start_up_with_a_stable_id_and_a_hint(settings) -> None:
    from hindsight.infra.checks import SECRET_KEY_CHECK_ID, secret_key_check

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, secret_key="")
    [error] = secret_key_check()
    assert error.id == SECRET_KEY_CHECK_ID == "hindsight.E200"
    assert "HINDSIGHT_API_SECRET_KEY" in error.msg and "make run" in error.hint
    assert error.id in [m.id for m in run_checks()]
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, secret_key="k" * 50)
    assert secret_key_check() == []


def test_system_check_ids_name_the_rule_not_the_position(settings) -> None:
    # The same rule keeps its id whatever else is wrong; each error carries a hint.
    alone = read_config({"HINDSIGHT_API_WORKER_HEARTBEAT_SECONDS": "60"})
    crowded = read_config({
        "HINDSIGHT_API_PORT": "x",
        "HINDSIGHT_API_LLM_PROVIDER": "openai",
        "HINDSIGHT_API_WORKER_HEARTBEAT_SECONDS": "60",
    })
    for config, expected in ((alone, {"hindsight.E003"}),
                             (crowded, {"hindsight.E001", "hindsight.E002", "hindsight.E003"})):
        settings.HINDSIGHT = config
        errors = [e for e in run_checks() if e.id.startswith("hindsight.E00")]
        assert {e.id for e in errors} == expected
        assert all(e.hint for e in errors)
    heartbeat = [e for e in run_checks() if e.obj == "HINDSIGHT_API_WORKER_HEARTBEAT_SECONDS"]
    assert [e.id for e in heartbeat] == ["hindsight.E003"]
