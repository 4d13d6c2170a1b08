"""docker-compose.yml stays consistent with the settings (no compose tool runs in CI)."""

from __future__ import annotations

from pathlib import Path

import yaml

from hindsight.infra.config import read_config

ROOT = Path(__file__).resolve().parent.parent


def test_compose_declares_the_production_stack_with_health_checks() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "migrate"} <= set(services)
    for name in ("postgres", "redis", "web", "worker"):
        assert "healthcheck" in services[name], name
    assert "pgvector" in services["postgres"]["image"]


def test_compose_runs_retain_and_consolidation_on_workers_of_the_cpu_queue_it_names() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    queue = services["web"]["environment"]["HINDSIGHT_API_WORKER_CPU_QUEUE"]
    for name in ("web", "worker", "worker-cpu", "beat"):  # who publishes and who consumes
        assert services[name]["environment"]["HINDSIGHT_API_WORKER_CPU_QUEUE"] == queue, name
    cpu = services["worker-cpu"]["command"]
    assert cpu[cpu.index("-Q") + 1] == queue and "healthcheck" in services["worker-cpu"]
    assert "-Q" not in services["worker"]["command"]  # the task queue, the settings' default


def test_compose_delivers_webhooks_from_workers_of_the_webhook_queue_it_names() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    queue = services["web"]["environment"]["HINDSIGHT_API_WEBHOOK_QUEUE"]
    for name in ("web", "worker", "worker-cpu", "worker-webhooks", "beat"):
        assert services[name]["environment"]["HINDSIGHT_API_WEBHOOK_QUEUE"] == queue, name
    hooks = services["worker-webhooks"]["command"]
    assert hooks[hooks.index("-Q") + 1] == queue and "healthcheck" in services["worker-webhooks"]


def test_compose_environment_is_valid_configuration() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    env = {
        key: ("x" if str(value).startswith("${") else str(value))
        for key, value in compose["services"]["web"]["environment"].items()
    }
    env["HINDSIGHT_API_LLM_PROVIDER"] = "none"
    assert all(key.startswith("HINDSIGHT_API_") for key in env)
    assert read_config(env).errors == ()


def test_the_image_collects_the_static_files_the_web_service_serves() -> None:
    from django.conf import settings

    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "manage.py collectstatic --noinput" in dockerfile
    # The web service is gunicorn alone: the app itself must serve /static/.
    assert "whitenoise.middleware.WhiteNoiseMiddleware" in settings.MIDDLEWARE
