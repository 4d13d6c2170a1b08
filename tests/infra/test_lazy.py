"""The openai SDK is imported at the first LLM or embeddings call, not at every Django start
(hindsight.infra.lazy); onnxruntime only by the local embedder, not by token counting."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from hindsight.infra.lazy import LazyModule

# Django set up as manage.py, gunicorn and a Celery worker set it up (every app's modules, the
# gateway and the embedders included), then the first call's path: a client built.
PROBE = """
import sys, django
django.setup()
from hindsight.project.celery import app
app.loader.import_default_modules()
import hindsight.infra.llm.gateway, hindsight.infra.embeddings.openai_provider
print("openai" in sys.modules, "onnxruntime" in sys.modules)
from hindsight.banks.tokens import count_tokens
assert count_tokens("Alice runs the team") > 0
hindsight.infra.llm.gateway._client("http://127.0.0.1:1/v1", "key")
print("openai" in sys.modules, "onnxruntime" in sys.modules)
"""


def test_django_starts_without_the_openai_sdk_or_onnxruntime_and_the_first_client_imports_it(
) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hindsight.project.settings"}
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False", "True", "False"]


def test_a_lazy_module_reads_the_real_modules_attributes_from_any_thread() -> None:
    lazy = LazyModule("json.decoder")
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(lazy.JSONDecodeError))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    import json.decoder  # noqa: PLC0415 - the module the lazy one stands for

    assert seen == [json.decoder.JSONDecodeError] * 8
    assert repr(lazy) == "<LazyModule 'json.decoder'>"
