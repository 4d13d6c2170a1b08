"""The one environment reader: every ``HINDSIGHT_API_*`` setting, typed, in one place.

Names follow upstream Hindsight where upstream has one, so a deployment's environment carries
over. Reading never raises: problems are collected in ``Config.errors`` and reported by the
Django system checks (``hindsight.infra.checks``), which stop start-up naming the variable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

# The package version, as /version reports it.
VERSION = "0.1.0"

LLM_PROVIDERS = ("openai", "none")
EMBEDDINGS_PROVIDERS = ("local", "openai")
# Celery pools a worker may run (HINDSIGHT_API_WORKER_POOL): ``threads`` keeps many LLM-bound
# jobs in flight in one process; ``prefork`` isolates each job in a child process.
WORKER_POOLS = ("threads", "prefork")
LOCAL_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
LOCAL_EMBEDDING_DIMENSIONS = 384
# The MCP server's tools, upstream 1.1.0's names in its order (hindsight/surfaces/mcp_server/tools.py,
# then the knowledge base's in knowledge_tools.py); HINDSIGHT_API_MCP_ENABLED_TOOLS picks.
MCP_CORE_TOOL_NAMES = (
    "retain", "sync_retain", "recall", "reflect", "list_banks", "create_bank",
    "list_mental_models", "get_mental_model", "create_mental_model", "update_mental_model",
    "delete_mental_model", "refresh_mental_model", "clear_mental_model",
    "list_memories", "list_operations", "get_operation", "cancel_operation", "list_tags",
    "get_bank", "get_bank_stats", "update_bank", "delete_bank",
)
# hindsight.surfaces.mcp_server.knowledge_tools
MCP_KNOWLEDGE_TOOL_NAMES = (
    "get_knowledge_base_tree", "search_knowledge_base", "get_knowledge_page",
    "create_knowledge_folder", "create_knowledge_page", "update_knowledge_node",
    "delete_knowledge_node",
)
MCP_TOOL_NAMES = MCP_CORE_TOOL_NAMES + MCP_KNOWLEDGE_TOOL_NAMES
# Offered only across banks (/mcp, `hindsight mcp` without --bank), as upstream.
MCP_ONE_BANK_EXCLUDED = frozenset({"list_banks", "create_bank", "get_bank_stats"})


# The configuration rules, each with a stable system-check id (``hindsight.infra.checks``).
INVALID_VALUE = "E001"  # a value of the wrong type, outside its range or choices
MISSING_TOGETHER = "E002"  # a variable another setting requires
OUT_OF_ORDER = "E003"  # timings that must be ordered are not


class ConfigProblem(NamedTuple):
    variable: str
    message: str
    rule: str


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8888
    database_url: str = ""
    redis_url: str = ""
    tenant_api_key: str = ""
    secret_key: str = ""
    debug: bool = False
    max_request_bytes: int = 10 * 1024 * 1024

    llm_provider: str = "none"
    llm_base_url: str = ""
    llm_api_key: str = ""
    llm_model: str = ""
    llm_timeout_seconds: float = 120.0
    llm_max_retries: int = 2

    embeddings_provider: str = "local"
    embeddings_base_url: str = ""
    embeddings_api_key: str = ""
    embeddings_model: str = LOCAL_EMBEDDING_MODEL
    # 0 until probed when HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS is unset (openai provider).
    embeddings_dimensions: int = LOCAL_EMBEDDING_DIMENSIONS
    # True when the dimension came from asking the model rather than from the configuration:
    # requests then leave ``dimensions`` out, as upstream does when it is unset.
    embeddings_dimensions_probed: bool = False
    embeddings_timeout_seconds: float = 60.0
    embeddings_max_retries: int = 2

    # The worker's Celery pool and slots (jobs in flight per worker process), and, for a
    # threads pool, the database connections its slots share (a slot waiting on the LLM holds
    # none).
    worker_pool: str = "threads"
    worker_concurrency: int = 64
    # Slots of the worker that `make run` (and compose) runs on ``cpu_queue``.
    worker_cpu_concurrency: int = 8
    worker_db_pool_size: int = 8
    # The API process's database connections under gunicorn, shared by its request threads
    # (hindsight.project.gunicorn_conf).
    web_db_pool_size: int = 4
    worker_max_retries: int = 3
    worker_retry_backoff_seconds: float = 30.0
    worker_retry_backoff_max_seconds: float = 600.0
    lock_ttl_seconds: float = 30.0
    heartbeat_seconds: float = 10.0
    recovery_threshold_seconds: float = 60.0
    redispatch_after_seconds: float = 120.0
    recovery_interval_seconds: float = 30.0
    release_interval_seconds: float = 5.0
    recovery_batch_size: int = 100
    reflect_wall_timeout_seconds: float = 300.0
    task_soft_time_limit_seconds: float = 330.0
    task_time_limit_seconds: float = 360.0
    broker_visibility_timeout_seconds: float = 3600.0
    # Celery queue the API publishes to and workers consume (tests use one per session).
    task_queue: str = "hindsight"
    # Celery queue of the jobs whose work is CPU-heavy in the worker (retain: the extracted
    # facts embedded; consolidation: embedding and vector math), so that workers of their own
    # run them beside the LLM-bound refresh slots; empty: the task queue (one pool for all).
    cpu_queue: str = ""
    # Extra modules whose import registers operation handlers (test-only handlers, plugins).
    extra_handler_modules: tuple[str, ...] = ()
    # Short retry of one publish to the broker; a publish that still fails is re-sent by recovery.
    publish_retries: int = 2

    # Retain: LLM extraction calls in flight at once per retain; a sync retain extracts at most
    # this many items (more: a 422 pointing to ``async: true``) within this many seconds.
    retain_extraction_concurrency: int = 8
    retain_sync_max_llm_items: int = 100
    retain_sync_timeout_seconds: float = 60.0

    mental_model_refresh_tick_seconds: float = 60.0
    mental_model_min_refresh_interval_seconds: float = 0.0
    mental_model_history_max_entries: int = 50
    # After a transient final failure (the LLM down), automatic refreshes of the model wait
    # min(max, base × 2^(n-1)) for the n-th in a row, or the provider's Retry-After if longer.
    mental_model_failure_backoff_seconds: float = 60.0
    mental_model_failure_backoff_max_seconds: float = 3600.0
    enable_mental_model_history: bool = True

    # The MCP endpoint at /mcp and which tools it (and `hindsight mcp`) offers; () = all.
    mcp_enabled: bool = True
    mcp_enabled_tools: tuple[str, ...] = ()
    # Consolidation (hindsight.banks.consolidation): facts per round, rounds per operation.
    consolidation_batch_size: int = 50
    consolidation_max_rounds: int = 20
    # The LLM request log (hindsight.infra.llm.models): how long rows are kept, how much of a prompt
    # and a response each keeps, how often the purge runs.
    llm_request_log_retention_hours: float = 24.0
    llm_request_log_max_chars: int = 20_000
    llm_request_log_purge_interval_seconds: float = 600.0
    # Tokens a bank may spend on the LLM in a rolling 24 h (hindsight.banks.budget), when the
    # bank's config sets no ``llm_token_budget_per_day`` of its own; None = unlimited.
    llm_token_budget_per_day: int | None = None

    errors: tuple[ConfigProblem, ...] = field(default=())

    @property
    def llm_configured(self) -> bool:
        return self.llm_provider != "none" and bool(self.llm_model)


class _Reader:
    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.errors: list[ConfigProblem] = []

    def problem(self, rule: str, name: str, message: str) -> None:
        self.errors.append(ConfigProblem(name, message, rule))

    def raw(self, name: str) -> str | None:
        value = self.env.get(name)
        return None if value is None or value.strip() == "" else value.strip()

    def text(self, name: str, default: str = "") -> str:
        value = self.raw(name)
        return default if value is None else value

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = self.text(name, default).lower()
        if value not in choices:
            self.problem(INVALID_VALUE, name, f"must be one of {', '.join(choices)}; got {value!r}")
            return default
        return value

    def integer(self, name: str, default: int, *, minimum: int | None = None) -> int:
        value = self.raw(name)
        if value is None:
            return default
        try:
            parsed = int(value)
        except ValueError:
            self.problem(INVALID_VALUE, name, f"must be an integer; got {value!r}")
            return default
        if minimum is not None and parsed < minimum:
            self.problem(INVALID_VALUE, name, f"must be >= {minimum}; got {parsed}")
            return default
        return parsed

    def number(self, name: str, default: float, *, minimum: float = 0.0) -> float:
        value = self.raw(name)
        if value is None:
            return default
        try:
            parsed = float(value)
        except ValueError:
            self.problem(INVALID_VALUE, name, f"must be a number; got {value!r}")
            return default
        if not math.isfinite(parsed):
            # inf/nan pass a minimum check and then overflow int() or timedelta where used.
            self.problem(INVALID_VALUE, name, f"must be a finite number; got {value!r}")
            return default
        if parsed < minimum:
            self.problem(INVALID_VALUE, name, f"must be >= {minimum}; got {parsed}")
            return default
        return parsed

    def flag(self, name: str, default: bool) -> bool:
        value = self.raw(name)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        self.problem(INVALID_VALUE, name, f"must be true or false; got {value!r}")
        return default


def read_config(env: Mapping[str, str] | None = None) -> Config:
    """Read the whole configuration from ``env`` (the process environment by default)."""
    r = _Reader(os.environ if env is None else env)
    p = "HINDSIGHT_API_"

    llm_provider = r.choice(p + "LLM_PROVIDER", LLM_PROVIDERS, "none")
    llm_base_url = r.text(p + "LLM_BASE_URL")
    llm_model = r.text(p + "LLM_MODEL")
    if llm_provider == "openai" and not llm_model:
        r.problem(MISSING_TOGETHER, p + "LLM_MODEL", "must be set when HINDSIGHT_API_LLM_PROVIDER=openai")

    emb_provider = r.choice(p + "EMBEDDINGS_PROVIDER", EMBEDDINGS_PROVIDERS, "local")
    if emb_provider == "local":
        emb_model = r.text(p + "EMBEDDINGS_LOCAL_MODEL", LOCAL_EMBEDDING_MODEL)
        if emb_model != LOCAL_EMBEDDING_MODEL:
            r.problem(INVALID_VALUE, p + "EMBEDDINGS_LOCAL_MODEL",
                      f"only {LOCAL_EMBEDDING_MODEL} ships offline")
            emb_model = LOCAL_EMBEDDING_MODEL
        emb_dims = LOCAL_EMBEDDING_DIMENSIONS
        dims_raw = r.raw(p + "EMBEDDINGS_OPENAI_DIMENSIONS")
        del dims_raw  # the OpenAI dimension setting does not apply to the local model
    else:
        emb_model = r.text(p + "EMBEDDINGS_OPENAI_MODEL")
        if not emb_model:
            r.problem(MISSING_TOGETHER, p + "EMBEDDINGS_OPENAI_MODEL",
                      "must be set when EMBEDDINGS_PROVIDER=openai")
        # Unset (0): probed at start by asking the model once, as upstream does
        # (hindsight.infra.embeddings.probe, called by the settings).
        emb_dims = r.integer(p + "EMBEDDINGS_OPENAI_DIMENSIONS", 0, minimum=1)
        if emb_dims > 2000:
            r.problem(INVALID_VALUE, p + "EMBEDDINGS_OPENAI_DIMENSIONS",
                      "must be <= 2000 (pgvector HNSW limit)")

    mcp_tools = tuple(
        t.strip() for t in r.text(p + "MCP_ENABLED_TOOLS").split(",") if t.strip()
    )
    unknown_tools = sorted(set(mcp_tools) - set(MCP_TOOL_NAMES))
    if unknown_tools:
        r.problem(INVALID_VALUE, p + "MCP_ENABLED_TOOLS",
                  f"unknown tools {unknown_tools}; known: {', '.join(MCP_TOOL_NAMES)}")
        mcp_tools = tuple(t for t in mcp_tools if t in MCP_TOOL_NAMES)

    database_url = r.text(p + "DATABASE_URL")
    if database_url and not database_url.startswith(("postgres://", "postgresql://")):
        r.problem(INVALID_VALUE, p + "DATABASE_URL", "must be a postgresql:// URL")
    redis_url = r.text(p + "REDIS_URL")
    if redis_url and not redis_url.startswith(("redis://", "rediss://", "unix://")):
        r.problem(INVALID_VALUE, p + "REDIS_URL", "must be a redis:// URL")

    cfg = Config(
        host=r.text(p + "HOST", "127.0.0.1"),
        port=r.integer(p + "PORT", 8888, minimum=1),
        database_url=database_url,
        redis_url=redis_url,
        tenant_api_key=r.text(p + "TENANT_API_KEY"),
        secret_key=r.text(p + "SECRET_KEY"),
        debug=r.flag(p + "DEBUG", False),
        max_request_bytes=r.integer(p + "MAX_REQUEST_BYTES", 10 * 1024 * 1024, minimum=1024),
        llm_provider=llm_provider,
        llm_base_url=llm_base_url,
        llm_api_key=r.text(p + "LLM_API_KEY"),
        llm_model=llm_model,
        llm_timeout_seconds=r.number(p + "LLM_TIMEOUT", 120.0, minimum=0.1),
        llm_max_retries=r.integer(p + "LLM_MAX_RETRIES", 2, minimum=0),
        embeddings_provider=emb_provider,
        embeddings_base_url=r.text(p + "EMBEDDINGS_OPENAI_BASE_URL"),
        embeddings_api_key=r.text(p + "EMBEDDINGS_OPENAI_API_KEY"),
        embeddings_model=emb_model,
        embeddings_dimensions=emb_dims,
        embeddings_timeout_seconds=r.number(p + "EMBEDDINGS_TIMEOUT", 60.0, minimum=0.1),
        embeddings_max_retries=r.integer(p + "EMBEDDINGS_MAX_RETRIES", 2, minimum=0),
        worker_pool=r.choice(p + "WORKER_POOL", WORKER_POOLS, "threads"),
        worker_concurrency=r.integer(p + "WORKER_CONCURRENCY", 64, minimum=1),
        worker_cpu_concurrency=r.integer(p + "WORKER_CPU_CONCURRENCY", 8, minimum=0),
        worker_db_pool_size=r.integer(p + "WORKER_DB_POOL_SIZE", 8, minimum=1),
        web_db_pool_size=r.integer(p + "WEB_DB_POOL_SIZE", 4, minimum=1),
        worker_max_retries=r.integer(p + "WORKER_MAX_RETRIES", 3, minimum=0),
        worker_retry_backoff_seconds=r.number(p + "WORKER_TASK_RETRY_BACKOFF_SECONDS", 30.0),
        worker_retry_backoff_max_seconds=r.number(p + "WORKER_TASK_RETRY_BACKOFF_MAX_SECONDS", 600.0),
        lock_ttl_seconds=r.number(p + "WORKER_LOCK_TTL_SECONDS", 30.0, minimum=1.0),
        heartbeat_seconds=r.number(p + "WORKER_HEARTBEAT_SECONDS", 10.0, minimum=0.1),
        recovery_threshold_seconds=r.number(p + "WORKER_RECOVERY_THRESHOLD_SECONDS", 60.0, minimum=1.0),
        redispatch_after_seconds=r.number(p + "WORKER_REDISPATCH_AFTER_SECONDS", 120.0, minimum=1.0),
        recovery_interval_seconds=r.number(p + "WORKER_RECOVERY_INTERVAL_SECONDS", 30.0, minimum=0.5),
        release_interval_seconds=r.number(p + "WORKER_RELEASE_INTERVAL_SECONDS", 5.0, minimum=0.5),
        recovery_batch_size=r.integer(p + "WORKER_RECOVERY_BATCH_SIZE", 100, minimum=1),
        reflect_wall_timeout_seconds=r.number(p + "REFLECT_WALL_TIMEOUT", 300.0, minimum=0.1),
        task_soft_time_limit_seconds=r.number(p + "WORKER_TASK_SOFT_TIME_LIMIT", 330.0, minimum=1.0),
        task_time_limit_seconds=r.number(p + "WORKER_TASK_TIME_LIMIT", 360.0, minimum=1.0),
        task_queue=r.text(p + "TASK_QUEUE", "hindsight"),
        cpu_queue=r.text(p + "WORKER_CPU_QUEUE", ""),
        extra_handler_modules=tuple(
            m.strip() for m in r.text(p + "EXTRA_HANDLER_MODULES").split(",") if m.strip()
        ),
        publish_retries=r.integer(p + "WORKER_PUBLISH_RETRIES", 2, minimum=0),
        broker_visibility_timeout_seconds=r.number(
            p + "BROKER_VISIBILITY_TIMEOUT", 3600.0, minimum=1.0
        ),
        retain_extraction_concurrency=r.integer(p + "RETAIN_EXTRACTION_CONCURRENCY", 8, minimum=1),
        retain_sync_max_llm_items=r.integer(p + "RETAIN_SYNC_MAX_LLM_ITEMS", 100, minimum=1),
        retain_sync_timeout_seconds=r.number(p + "RETAIN_SYNC_TIMEOUT", 60.0, minimum=0.1),
        mental_model_refresh_tick_seconds=r.number(
            p + "MENTAL_MODEL_REFRESH_TICK_SECONDS", 60.0, minimum=1.0
        ),
        mental_model_min_refresh_interval_seconds=r.number(
            p + "MENTAL_MODEL_MIN_REFRESH_INTERVAL_SECONDS", 0.0
        ),
        mental_model_failure_backoff_seconds=r.number(
            p + "MENTAL_MODEL_FAILURE_BACKOFF_SECONDS", 60.0, minimum=0.0
        ),
        mental_model_failure_backoff_max_seconds=r.number(
            p + "MENTAL_MODEL_FAILURE_BACKOFF_MAX_SECONDS", 3600.0, minimum=0.0
        ),
        mental_model_history_max_entries=r.integer(
            p + "MENTAL_MODEL_HISTORY_MAX_ENTRIES", 50, minimum=1
        ),
        enable_mental_model_history=r.flag(p + "ENABLE_MENTAL_MODEL_HISTORY", True),
        mcp_enabled=r.flag(p + "MCP_ENABLED", True),
        mcp_enabled_tools=mcp_tools,
        consolidation_batch_size=r.integer(p + "CONSOLIDATION_BATCH_SIZE", 50, minimum=1),
        consolidation_max_rounds=r.integer(p + "CONSOLIDATION_MAX_ROUNDS", 20, minimum=1),
        llm_request_log_retention_hours=r.number(
            p + "LLM_REQUEST_LOG_RETENTION_HOURS", 24.0, minimum=0.0
        ),
        llm_request_log_max_chars=r.integer(p + "LLM_REQUEST_LOG_MAX_CHARS", 20_000, minimum=0),
        llm_request_log_purge_interval_seconds=r.number(
            p + "LLM_REQUEST_LOG_PURGE_INTERVAL_SECONDS", 600.0, minimum=1.0
        ),
        llm_token_budget_per_day=(
            r.integer(p + "LLM_TOKEN_BUDGET_PER_DAY", 0, minimum=0)
            if r.raw(p + "LLM_TOKEN_BUDGET_PER_DAY") is not None else None
        ),
        errors=(),
    )
    # DESIGN: reflect wall timeout < soft limit < hard limit < broker visibility timeout.
    order = [
        (p + "REFLECT_WALL_TIMEOUT", cfg.reflect_wall_timeout_seconds),
        (p + "WORKER_TASK_SOFT_TIME_LIMIT", cfg.task_soft_time_limit_seconds),
        (p + "WORKER_TASK_TIME_LIMIT", cfg.task_time_limit_seconds),
        (p + "BROKER_VISIBILITY_TIMEOUT", cfg.broker_visibility_timeout_seconds),
    ]
    for (lower_name, lower), (upper_name, upper) in zip(order, order[1:], strict=False):
        if not lower < upper:
            r.problem(OUT_OF_ORDER, upper_name, f"must be greater than {lower_name} ({lower} >= {upper})")
    if cfg.heartbeat_seconds >= cfg.lock_ttl_seconds:
        r.problem(OUT_OF_ORDER, p + "WORKER_HEARTBEAT_SECONDS",
                  "must be shorter than WORKER_LOCK_TTL_SECONDS")
    return Config(**{**cfg.__dict__, "errors": tuple(r.errors)})
