"""What the bench scripts share: percentiles, the synthetic workload's words, JSON over HTTP, the
throw-away stacks they start and how they write their figures.

Only the standard library at import: ``bench_hotpaths`` imports this module in a process whose
``hindsight`` is an older checkout's, so the stack helpers import the dev stack when called.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fakes.llm_server import ScriptedLLMServer
    from hindsight.devstack.stack import Stack

REPO = Path(__file__).resolve().parent.parent
FINAL = ("completed", "failed", "cancelled")

# The synthetic workload: texts from a small vocabulary (so the lexical arm of recall has work),
# tags and tag modes drawn at random.
VOCAB = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "team", "project",
         "deadline", "meeting", "budget", "invoice", "release", "roadmap", "design", "review",
         "customer", "support", "incident", "outage", "deploy", "database", "index", "query",
         "latency", "cache", "memory", "model", "refresh", "policy", "holiday", "travel",
         "office", "remote", "async", "slack", "email", "coffee", "lunch", "morning", "evening",
         "weekend", "quarter", "report", "metric", "goal", "hiring", "onboarding", "security"]
TAGS = ["team", "ops", "eng", "sales", "hr", "user:alice", "user:bob", "project:x", "project:y"]
MODES = ["any", "all", "any_strict", "all_strict", "exact", None]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.sample(VOCAB, rng.randint(6, 14))).capitalize() + "."


# ---------------------------------------------------------------------------------------------
# Arguments, statistics and printing


def argument_parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """A script's parser: ``--help`` prints the module's docstring as written and names the
    command that runs it (``python -m bench.<name>``)."""
    return argparse.ArgumentParser(prog=f"python -m {module}", description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 to 1) of ``values``: a value that was measured."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def spread_ms(values: list[float]) -> str:
    return (f"p50 {percentile(values, 0.5):8.1f} ms  p95 {percentile(values, 0.95):8.1f} ms  "
            f"max {max(values):8.1f} ms")


def ratio(numerator: float, denominator: float, digits: int = 2) -> str:
    """``numerator`` as a multiple of ``denominator``, ``1.50x``."""
    return f"{numerator / denominator:.{digits}f}x"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def write_json(result: Any, path: str | None) -> str:
    """The report as indented JSON, also written to ``path`` when one is given (``--json``)."""
    text = json.dumps(result, indent=2, default=str)
    if path:
        Path(path).write_text(text)
    return text


# ---------------------------------------------------------------------------------------------
# The API


def call_json(base_url: str, method: str, path: str, body: Any = None, *,
              timeout: float = 600.0, api_key: str | None = None) -> Any:
    """One JSON request to the API; its JSON answer (an HTTP error raises)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base_url.rstrip("/") + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


# ---------------------------------------------------------------------------------------------
# The stacks


def bench_stack(prefix: str, *, llm: ScriptedLLMServer | None = None, queue: bool = True,
                env: Mapping[str, str] | None = None, **options: Any) -> Stack:
    """A throw-away stack (``hindsight.devstack.stack.Stack``) in a scratch folder ``prefix-…``:
    the project's settings; with ``queue``, a task queue of its own, so a worker another run
    left behind never takes its jobs; with ``llm``, the LLM and the embeddings on that scripted
    server (the local model would cost minutes to load on every process and is not what a
    bench measures) and no LLM retries, so every request the server counts was asked once.
    ``env`` adds variables; ``options`` go to ``Stack`` (servers to reuse, no Valkey)."""
    from hindsight.devstack.stack import Stack, openai_compatible_env

    variables = {"DJANGO_SETTINGS_MODULE": "hindsight.project.settings"}
    if queue:
        variables["HINDSIGHT_API_TASK_QUEUE"] = f"{prefix}-{uuid.uuid4().hex[:6]}"
    if llm is not None:
        variables |= {**openai_compatible_env(llm.base_url, api_key="bench"),
                      "HINDSIGHT_API_LLM_MAX_RETRIES": "0"}
    return Stack(Path(tempfile.mkdtemp(prefix=f"{prefix}-")), env={**variables, **(env or {})},
                 **options)


def task_queue(stack: Stack) -> str:
    return stack.env["HINDSIGHT_API_TASK_QUEUE"]


def start_worker(stack: Stack, *, concurrency: int, name: str) -> None:
    """One quiet worker on the stack's own queue. No pool named: the settings' pool, as
    ``make run`` has it (an explicit ``-P prefork`` would read as "no choice" to Celery)."""
    stack.start_worker(queue=task_queue(stack), concurrency=concurrency, name=name,
                       log_level="WARNING")


def start_api_and_worker(stack: Stack, *, concurrency: int, name: str) -> None:
    """The stack as a bench measures it over HTTP: servers, migrations, this process's Django
    on them and the API (``Stack.start_measured``), one worker, ``/health`` answering."""
    stack.start_measured()
    start_worker(stack, concurrency=concurrency, name=name)
    stack.wait_healthy(60)
