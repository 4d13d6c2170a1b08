"""The one environment reader: every ``HINDSIGHT_API_*`` setting, typed, in one place.

Names follow upstream Hindsight where upstream has one, so a deployment's environment carries
over. Reading never raises: problems are collected in ``Config.errors`` and reported by the
Django system checks (``hindsight.infra.checks``), which stop start-up naming the variable.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

# The package version, as /version reports it.
VERSION = "0.1.0"



class LLMProvider(NamedTuple):
    """A provider name's defaults: its OpenAI-compatible base URL, the model used when
    ``LLM_MODEL`` is unset ("" : it must be set), and whether it needs ``LLM_API_KEY``."""

    base_url: str
    model: str
    needs_key: bool


# Every name here is served through OpenAI's chat completions (the openai SDK). Base URLs, default
# models and which names need a key are upstream Hindsight 1.1.0's, so an upstream environment
# carries over; where upstream talks to a name some other way (gemini and anthropic through
# their own SDKs, llamacpp a server it starts itself), the provider's documented
# OpenAI-compatible address instead (docs/providers.md says which).
OPENAI_COMPATIBLE_PROVIDERS: dict[str, LLMProvider] = {
    "openai": LLMProvider("https://api.openai.com/v1", "", False),
    "groq": LLMProvider("https://api.groq.com/openai/v1", "openai/gpt-oss-120b", True),
    "ollama": LLMProvider("http://localhost:11434/v1", "gemma3:12b", False),
    "ollama-cloud": LLMProvider("https://ollama.com/v1", "gemma3:12b", True),
    "lmstudio": LLMProvider("http://localhost:1234/v1", "local-model", False),
    "llamacpp": LLMProvider("http://127.0.0.1:8080/v1", "gemma-4-e2b-it", False),
    "deepseek": LLMProvider("https://api.deepseek.com", "deepseek-v4-flash", True),
    "openrouter": LLMProvider("https://openrouter.ai/api/v1", "qwen/qwen3.5-9b", True),
    "requesty": LLMProvider("https://router.requesty.ai/v1", "openai/gpt-4o-mini", True),
    "zai": LLMProvider("https://api.z.ai/api/coding/paas/v4", "glm-4.5-flash", True),
    "fireworks": LLMProvider("https://api.fireworks.ai/inference/v1",
                             "accounts/fireworks/models/llama-v3p1-8b-instruct", True),
    "minimax": LLMProvider("https://api.minimax.io/v1", "MiniMax-M3", True),
    "atlas": LLMProvider("https://api.atlascloud.ai/v1", "deepseek-ai/deepseek-v4-pro", True),
    "nous": LLMProvider("https://inference-api.nousresearch.com/v1", "deepseek/deepseek-v4-flash",
                        True),
    "meta": LLMProvider("https://api.meta.ai/v1", "muse-spark-1.3", True),
    "opencode-go": LLMProvider("https://opencode.ai/zen/go/v1", "deepseek-v4-flash", True),
    "gemini": LLMProvider("https://generativelanguage.googleapis.com/v1beta/openai/",
                          "gemini-3.5-flash", True),
    "anthropic": LLMProvider("https://api.anthropic.com/v1/", "claude-haiku-4-5", True),
    # Upstream has no default address for it: HINDSIGHT_API_LLM_BASE_URL is required.
    "volcano": LLMProvider("", "doubao-pro-32k", True),
}
LLM_PROVIDERS = (*OPENAI_COMPATIBLE_PROVIDERS, "none")
# Upstream's names that need another protocol than chat completions (its own SDKs, LiteLLM, the
# Responses API, OAuth subscriptions): refused at start, naming the supported set.
OTHER_PROTOCOL_PROVIDERS = (
    "openai-responses", "vertexai", "bedrock", "litellm", "litellmrouter", "openai-codex",
    "chatgpt", "claude-code", "cursor", "github-copilot", "xai-oauth", "mock",
)
# Local servers whose OpenAI-compatible routes are always under /v1: a bare host gets it, as
# their UIs show the address without it (upstream does the same).
_V1_LOCAL_PROVIDERS = ("ollama", "lmstudio")
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
    "list_directives", "create_directive", "delete_directive",
    "list_memories", "get_memory", "update_memory", "invalidate_memory", "list_documents",
    "get_document", "delete_document", "list_operations", "get_operation", "cancel_operation",
    "list_tags",
    "get_bank", "get_bank_stats", "update_bank", "delete_bank", "clear_memories",
)
# hindsight.surfaces.mcp_server.knowledge_tools
MCP_KNOWLEDGE_TOOL_NAMES = (
    "get_knowledge_base_tree", "search_knowledge_base", "get_knowledge_page",
    "create_knowledge_folder", "create_knowledge_page", "update_knowledge_node",
    "delete_knowledge_node",
)
# Ours, after upstream's (hindsight.surfaces.mcp_server.review_tools).
MCP_REVIEW_TOOL_NAMES = (
    "get_mental_model_history", "restore_mental_model_version", "list_mental_model_proposals",
    "approve_mental_model_proposal", "reject_mental_model_proposal",
)
MCP_TOOL_NAMES = MCP_CORE_TOOL_NAMES + MCP_KNOWLEDGE_TOOL_NAMES + MCP_REVIEW_TOOL_NAMES
# Offered only across banks (/mcp, `hindsight mcp` without --bank), as upstream.
MCP_ONE_BANK_EXCLUDED = frozenset({"list_banks", "create_bank", "get_bank_stats"})


# The configuration rules, each with a stable system-check id (``hindsight.infra.checks``).
INVALID_VALUE = "E001"  # a value of the wrong type, outside its range or choices
MISSING_TOGETHER = "E002"  # a variable another setting requires
OUT_OF_ORDER = "E003"  # timings that must be ordered are not


# Every variable the service reads is this prefix and a name (upstream's names where it has one).
ENV_PREFIX = "HINDSIGHT_API_"


class ConfigProblem(NamedTuple):
    variable: str
    message: str
    rule: str


def _env(variable: str | tuple[str, ...], doc: str, *, shown: str | None = None) -> dict[str, Any]:
    """A field's documentation: the variable(s) it is read from (``HINDSIGHT_API_`` + the name),
    what it means, and its default as docs/configuration.md shows it when the value alone would
    mislead (``shown``). ``configuration_markdown`` writes the page from these."""
    names = (variable,) if isinstance(variable, str) else variable
    return {"variables": tuple(ENV_PREFIX + name for name in names), "doc": doc, "shown": shown}


@dataclass(frozen=True)
class Config:
    # The service.
    host: str = field(default="127.0.0.1", metadata=_env(
        "HOST", "The address `make run` serves the API on."))
    port: int = field(default=8888, metadata=_env(
        "PORT", "The port `make run` serves the API on."))
    database_url: str = field(default="", metadata=_env(
        "DATABASE_URL", "The PostgreSQL URL (`postgresql://…`). The database needs the `vector` "
        "and `btree_gin` extensions: the migrations create them, so a role that does not own the "
        "database needs them created beforehand.", shown="`make run`: its embedded server"))
    database_connect_timeout_seconds: int = field(default=5, metadata=_env(
        "DATABASE_CONNECT_TIMEOUT", "Seconds a process waits for PostgreSQL to accept a new "
        "connection (libpq's `connect_timeout`, at least 2): past it an API request answers 503 "
        "instead of hanging on a server that does not answer."))
    redis_url: str = field(default="", metadata=_env(
        "REDIS_URL", "The Redis URL (`redis://`, `rediss://`, `unix://`): the Celery broker and "
        "the per-key locks.", shown="`make run`: its embedded Valkey"))
    tenant_api_key: str = field(default="", metadata=_env(
        "TENANT_API_KEY", "When set, every `/v1` and `/mcp` request needs "
        "`Authorization: Bearer <key>`."))
    secret_key: str = field(default="", metadata=_env(
        "SECRET_KEY", "Django's secret key, the same in every process. Required outside "
        "`make run` (system check `hindsight.E200`).", shown="`make run`: kept in `.devdata/secret_key`"))
    debug: bool = field(default=False, metadata=_env(
        "DEBUG", "Django's debug mode (never in production)."))
    max_request_bytes: int = field(default=10 * 1024 * 1024, metadata=_env(
        "MAX_REQUEST_BYTES", "A larger request body is refused with 413.", shown="10 MiB"))

    # The LLM.
    llm_provider: str = field(default="none", metadata=_env(
        "LLM_PROVIDER", "`openai` (any OpenAI-compatible server), one of upstream's provider "
        "names that speak its protocol (`groq`, `ollama`, `ollama-cloud`, `lmstudio`, "
        "`llamacpp`, `deepseek`, `openrouter`, `requesty`, `zai`, `fireworks`, `minimax`, "
        "`atlas`, `nous`, `meta`, `opencode-go`, `gemini`, `anthropic`, `volcano`: "
        "docs/providers.md), or `none`. A name that needs another protocol (`bedrock`, "
        "`vertexai`, `litellm`, …) stops start-up. Without an LLM, reflect and dry runs answer "
        "400 naming these variables, retain stores items verbatim, and refreshes wait for one."))
    llm_base_url: str = field(default="", metadata=_env(
        "LLM_BASE_URL", "The LLM server's base URL, `/v1` included "
        "(`http://127.0.0.1:8000/v1`); overrides the provider's default address.",
        shown="the provider's (docs/providers.md)"))
    llm_api_key: str = field(default="", metadata=_env(
        "LLM_API_KEY", "The LLM server's key; required by the cloud providers "
        "(docs/providers.md), any value or none for a local server."))
    llm_model: str = field(default="", metadata=_env(
        "LLM_MODEL", "The chat model; required with `LLM_PROVIDER=openai`, the other names "
        "default to upstream's model for them (docs/providers.md).",
        shown="the provider's (docs/providers.md)"))
    llm_timeout_seconds: float = field(default=120.0, metadata=_env(
        "LLM_TIMEOUT", "Seconds one LLM request may take."))
    llm_json_object: bool | None = field(default=None, metadata=_env(
        "LLM_OPENAI_COMPATIBLE_JSON_MODE", "Whether a server that refuses `json_schema` is asked "
        "in `json_object` mode next (`true`), or shown the schema in the prompt alone (`false`). "
        "Unset, the provider decides: `false` for `zai` (its JSON mode deletes the word "
        "\"json\" from answers), `lmstudio`, `ollama` and `volcano`; `true` for the rest.",
        shown="the provider's (docs/providers.md)"))
    llm_reasoning_effort: str = field(default="", metadata=_env(
        "LLM_REASONING_EFFORT", "Sent as `reasoning_effort` (`low`, `medium`, `high`, …) with "
        "every LLM request; never to OpenAI's models that refuse it (`gpt-4o`, `gpt-4.1`, "
        "`gpt-3.5`…), and dropped for the process's life once a server refuses it.",
        shown="unset: not sent"))
    llm_max_retries: int = field(default=2, metadata=_env(
        "LLM_MAX_RETRIES", "Retries of one LLM request after a transient error (429, 5xx, no "
        "answer), each at least the answer's `Retry-After` later; other errors are not retried."))

    # Embeddings.
    embeddings_provider: str = field(default="local", metadata=_env(
        "EMBEDDINGS_PROVIDER", "`local` (all-MiniLM-L6-v2, 384 dimensions, offline) or `openai` "
        "(any OpenAI-compatible embeddings server). A changed provider, model or dimension is "
        "refused at `migrate` until `manage.py reembed` has rebuilt the vectors."))
    embeddings_base_url: str = field(default="", metadata=_env(
        "EMBEDDINGS_OPENAI_BASE_URL", "`openai` provider: the server's base URL, `/v1` included."))
    embeddings_api_key: str = field(default="", metadata=_env(
        "EMBEDDINGS_OPENAI_API_KEY", "`openai` provider: the server's key."))
    embeddings_model: str = field(default=LOCAL_EMBEDDING_MODEL, metadata=_env(
        ("EMBEDDINGS_LOCAL_MODEL", "EMBEDDINGS_OPENAI_MODEL"),
        "The embedding model: `local` ships only all-MiniLM-L6-v2; `openai` requires one."))
    # 0 until probed when HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS is unset (openai provider).
    embeddings_dimensions: int = field(default=LOCAL_EMBEDDING_DIMENSIONS, metadata=_env(
        "EMBEDDINGS_OPENAI_DIMENSIONS", "`openai` provider: the vectors' dimension (at most "
        "2000), requested and checked against every answer; unset, probed at start by asking the "
        "model once.", shown="384 (`local`); probed (`openai`)"))
    # True when the dimension came from asking the model rather than from the configuration:
    # requests then leave ``dimensions`` out, as upstream does when it is unset.
    embeddings_dimensions_probed: bool = False
    embeddings_timeout_seconds: float = field(default=60.0, metadata=_env(
        "EMBEDDINGS_TIMEOUT", "`openai` provider: seconds one embeddings request may take."))
    embeddings_max_retries: int = field(default=2, metadata=_env(
        "EMBEDDINGS_MAX_RETRIES", "`openai` provider: retries of one embeddings request."))

    # Workers and the job engine.
    worker_pool: str = field(default="threads", metadata=_env(
        "WORKER_POOL", "A worker's Celery pool when its command line names none: `threads` keeps "
        "many LLM-bound jobs in flight in one process, `prefork` runs each in a child process."))
    worker_concurrency: int = field(default=64, metadata=_env(
        "WORKER_CONCURRENCY", "Slots per worker process: jobs in flight at once."))
    worker_cpu_concurrency: int = field(default=8, metadata=_env(
        "WORKER_CPU_CONCURRENCY", "Slots of the worker `make run` (and compose) runs on the CPU "
        "queue; `0` under `make run`: no such worker, every job on the one worker."))
    worker_db_pool_size: int = field(default=8, metadata=_env(
        "WORKER_DB_POOL_SIZE", "A threads-pool worker's database connections, shared by its slots "
        "(a slot waiting on the LLM holds none)."))
    web_db_pool_size: int = field(default=4, metadata=_env(
        "WEB_DB_POOL_SIZE", "Each API process's database connections under gunicorn "
        "(`hindsight.project.gunicorn_conf`), shared by its request threads."))
    worker_max_retries: int = field(default=3, metadata=_env(
        "WORKER_MAX_RETRIES", "Attempts of a failed job after the first."))
    worker_retry_backoff_seconds: float = field(default=30.0, metadata=_env(
        "WORKER_TASK_RETRY_BACKOFF_SECONDS", "A job's retry backoff: doubled per attempt, jittered."))
    worker_retry_backoff_max_seconds: float = field(default=600.0, metadata=_env(
        "WORKER_TASK_RETRY_BACKOFF_MAX_SECONDS", "The retry backoff's cap."))
    lock_ttl_seconds: float = field(default=30.0, metadata=_env(
        "WORKER_LOCK_TTL_SECONDS", "The TTL of a job key's Redis lock, which the heartbeat extends."))
    heartbeat_seconds: float = field(default=10.0, metadata=_env(
        "WORKER_HEARTBEAT_SECONDS", "How often a running job extends its lock and lease; shorter "
        "than the lock TTL."))
    worker_probe_dir: str = field(default="", metadata=_env(
        "WORKER_PROBE_DIR", "The folder a worker keeps its probe's heartbeat file in "
        "(`<node name>.alive`, read by `hindsight worker probe`).",
        shown="the system's temporary folder"))
    recovery_threshold_seconds: float = field(default=60.0, metadata=_env(
        "WORKER_RECOVERY_THRESHOLD_SECONDS", "A running job silent this long is recovered by "
        "beat's sweep (an attempt counted): the backstop for a lost machine, since a killed worker "
        "process is recovered within seconds."))
    redispatch_after_seconds: float = field(default=120.0, metadata=_env(
        "WORKER_REDISPATCH_AFTER_SECONDS", "A pending job whose broker message was lost is sent "
        "again after this."))
    recovery_interval_seconds: float = field(default=30.0, metadata=_env(
        "WORKER_RECOVERY_INTERVAL_SECONDS", "How often beat runs the recovery sweep."))
    release_interval_seconds: float = field(default=5.0, metadata=_env(
        "WORKER_RELEASE_INTERVAL_SECONDS", "How often beat sends the parked jobs that came due."))
    recovery_batch_size: int = field(default=100, metadata=_env(
        "WORKER_RECOVERY_BATCH_SIZE", "Jobs one sweep recovers at most."))
    reflect_wall_timeout_seconds: float = field(default=300.0, metadata=_env(
        "REFLECT_WALL_TIMEOUT", "Seconds a whole refresh attempt, or a reflect, may take; a "
        "refresh that hits it is a failed attempt."))
    task_soft_time_limit_seconds: float = field(default=330.0, metadata=_env(
        "WORKER_TASK_SOFT_TIME_LIMIT", "Celery's soft time limit of a job (prefork pool only: in a "
        "threads pool the wall timeout bounds a job)."))
    task_time_limit_seconds: float = field(default=360.0, metadata=_env(
        "WORKER_TASK_TIME_LIMIT", "Celery's hard time limit of a job (prefork pool only)."))
    broker_visibility_timeout_seconds: float = field(default=3600.0, metadata=_env(
        "BROKER_VISIBILITY_TIMEOUT", "Seconds before Redis redelivers an unacknowledged message."))
    # Celery queue the API publishes to and workers consume (tests use one per session).
    task_queue: str = field(default="hindsight", metadata=_env(
        "TASK_QUEUE", "The Celery queue the API, the workers and beat use; the same in every "
        "process."))
    # Celery queue of the jobs whose work is CPU-heavy in the worker (retain: the extracted
    # facts embedded; consolidation: embedding and vector math), so that workers of their own
    # run them beside the LLM-bound refresh slots; empty: the task queue (one pool for all).
    cpu_queue: str = field(default="", metadata=_env(
        "WORKER_CPU_QUEUE", "The Celery queue of retains and consolidations (CPU-heavy in the "
        "worker); unset, they share the task queue. The same in every process, and some worker "
        "must consume it (`celery -A hindsight worker -Q …`).",
        shown="unset; `make run`: `<task queue>.cpu`"))
    # Extra modules whose import registers operation handlers (test-only handlers, plugins).
    extra_handler_modules: tuple[str, ...] = field(default=(), metadata=_env(
        "EXTRA_HANDLER_MODULES", "Comma-separated modules imported at start to register more "
        "operation handlers (the tests' handlers)."))
    publish_retries: int = field(default=2, metadata=_env(
        "WORKER_PUBLISH_RETRIES", "Short retries of one publish to the broker; a publish that "
        "still fails is sent again by recovery."))

    # Retain.
    retain_extraction_concurrency: int = field(default=8, metadata=_env(
        "RETAIN_EXTRACTION_CONCURRENCY", "A retain's LLM extraction calls in flight at once."))
    retain_sync_max_llm_items: int = field(default=100, metadata=_env(
        "RETAIN_SYNC_MAX_LLM_ITEMS", "A synchronous retain with more items for the LLM to extract "
        "is refused at once (422 on `items`, pointing to `async: true`)."))
    retain_sync_timeout_seconds: float = field(default=60.0, metadata=_env(
        "RETAIN_SYNC_TIMEOUT", "Seconds a synchronous retain's extraction may take (then 504, "
        "nothing stored)."))

    # Mental models.
    mental_model_refresh_tick_seconds: float = field(default=60.0, metadata=_env(
        "MENTAL_MODEL_REFRESH_TICK_SECONDS", "Beat's tick for `refresh_cron` and "
        "`full_refresh_cron` (the schedule is rewritten at `migrate`)."))
    mental_model_min_refresh_interval_seconds: float = field(default=0.0, metadata=_env(
        "MENTAL_MODEL_MIN_REFRESH_INTERVAL_SECONDS", "The deployment's rate floor for a model's "
        "automatic refreshes (a model's or a bank's own floor wins); a trigger inside it is "
        "parked until it ends."))
    mental_model_history_max_entries: int = field(default=50, metadata=_env(
        "MENTAL_MODEL_HISTORY_MAX_ENTRIES", "History entries kept per model and kind (versions "
        "and failures counted apart)."))
    # After a transient final failure (the LLM down), automatic refreshes of the model wait
    # min(max, base × 2^(n-1)) for the n-th in a row, or the provider's Retry-After if longer.
    mental_model_failure_backoff_seconds: float = field(default=60.0, metadata=_env(
        "MENTAL_MODEL_FAILURE_BACKOFF_SECONDS", "After the n-th transient refresh failure in a "
        "row, the model's automatic refreshes wait min(max, this × 2^(n−1)), or the provider's "
        "`Retry-After` if longer."))
    mental_model_failure_backoff_max_seconds: float = field(default=3600.0, metadata=_env(
        "MENTAL_MODEL_FAILURE_BACKOFF_MAX_SECONDS", "That backoff's cap."))
    enable_mental_model_history: bool = field(default=True, metadata=_env(
        "ENABLE_MENTAL_MODEL_HISTORY", "Keep the models' history (both kinds)."))
    mental_model_proposal_ttl_seconds: float = field(default=604800.0, metadata=_env(
        "MENTAL_MODEL_PROPOSAL_TTL_SECONDS", "How long a refresh's proposal waits for review "
        "(a model under review) before the beat marks it expired."))

    # MCP.
    mcp_enabled: bool = field(default=True, metadata=_env(
        "MCP_ENABLED", "Serve the MCP endpoint at `/mcp`."))
    mcp_enabled_tools: tuple[str, ...] = field(default=(), metadata=_env(
        "MCP_ENABLED_TOOLS", "Comma-separated allowlist of the MCP tools `/mcp` and "
        "`hindsight mcp` offer; an unknown name stops start-up.", shown="all"))

    # Consolidation (hindsight.banks.consolidation).
    consolidation_batch_size: int = field(default=50, metadata=_env(
        "CONSOLIDATION_BATCH_SIZE", "Facts per consolidation round."))
    consolidation_max_rounds: int = field(default=20, metadata=_env(
        "CONSOLIDATION_MAX_ROUNDS", "Rounds per consolidation operation; then it queues its "
        "continuation."))

    # The LLM request log (hindsight.infra.llm.models) and the spend it measures.
    llm_request_log_retention_hours: float = field(default=24.0, metadata=_env(
        "LLM_REQUEST_LOG_RETENTION_HOURS", "How long the LLM request log keeps a row (beat purges "
        "older ones; a row of the last 24 hours only loses its prompt and response)."))
    llm_request_log_max_chars: int = field(default=20_000, metadata=_env(
        "LLM_REQUEST_LOG_MAX_CHARS", "Characters of a prompt and of a response the log keeps."))
    llm_request_log_purge_interval_seconds: float = field(default=600.0, metadata=_env(
        "LLM_REQUEST_LOG_PURGE_INTERVAL_SECONDS", "How often beat purges the log."))
    # Tokens a bank may spend on the LLM in a rolling 24 h (hindsight.banks.budget), when the
    # bank's config sets no ``llm_token_budget_per_day`` of its own; None = unlimited.
    llm_token_budget_per_day: int | None = field(default=None, metadata=_env(
        "LLM_TOKEN_BUDGET_PER_DAY", "Tokens a bank may spend on the LLM in a rolling 24 hours, "
        "for banks whose config sets no `llm_token_budget_per_day`; a spent bank's calls answer "
        "429, its retains and due work are parked.", shown="unset (unlimited)"))

    # Bank transfer (mentalmodels.transfer): where archives are kept and what an upload may be.
    transfer_dir: str = field(default="", metadata=_env(
        "TRANSFER_DIR", "The folder bank export archives and uploaded imports are kept in, when "
        "no `HINDSIGHT_API_TRANSFER_STORAGE` is set.", shown="`.devdata/transfer`"))
    transfer_storage: str = field(default="", metadata=_env(
        "TRANSFER_STORAGE", "A Django storage backend for the archives instead of the folder: "
        "its dotted class path, e.g. `storages.backends.s3.S3Storage` (django-storages).",
        shown="unset (the folder)"))
    transfer_storage_options: str = field(default="{}", metadata=_env(
        "TRANSFER_STORAGE_OPTIONS", "That backend's options, a JSON object (e.g. "
        "`{\"bucket_name\": \"archives\"}`).", shown="`{}`"))
    transfer_download_ttl_seconds: int = field(default=86_400, metadata=_env(
        "TRANSFER_DOWNLOAD_TTL_SECONDS", "How long an export's download key works; an expired "
        "archive is deleted."))
    transfer_max_upload_bytes: int = field(default=2 * 1024 ** 3, metadata=_env(
        "TRANSFER_MAX_UPLOAD_BYTES", "The largest archive `…/transfer/import` takes (a larger "
        "upload is a 413).", shown="2 GiB"))
    transfer_max_unpacked_bytes: int = field(default=20 * 1024 ** 3, metadata=_env(
        "TRANSFER_MAX_UNPACKED_BYTES", "The most an archive may unpack to, counted while it is "
        "read: past it the import fails (a ZIP bomb).", shown="20 GiB"))

    # Webhooks (hindsight.webhooks): upstream's global webhook and SSRF allowlist, and the
    # delivery queue, retries and automatic disable (docs/behaviour.md#webhooks).
    webhook_url: str = field(default="", metadata=_env(
        "WEBHOOK_URL", "A global webhook: every bank's events of `WEBHOOK_EVENT_TYPES` are also "
        "delivered here.", shown="unset (none)"))
    webhook_secret: str = field(default="", metadata=_env(
        "WEBHOOK_SECRET", "The global webhook's signing secret (unset: its deliveries are not "
        "signed)."))
    webhook_event_types: tuple[str, ...] = field(default=("consolidation.completed",),
                                                 metadata=_env(
        "WEBHOOK_EVENT_TYPES", "Comma-separated events the global webhook receives.",
        shown="`consolidation.completed`"))
    webhook_allowed_hosts: tuple[str, ...] = field(default=(), metadata=_env(
        "WEBHOOK_ALLOWED_HOSTS", "Comma-separated hostnames, IPs or CIDR ranges a webhook may "
        "reach although private, loopback or link-local (refused otherwise, at create and at "
        "delivery).", shown="unset (public destinations only)"))
    webhook_expose_response_body: bool = field(default=False, metadata=_env(
        "WEBHOOK_EXPOSE_RESPONSE_BODY", "Show a receiver's response body in the deliveries list "
        "(its status code is always shown)."))
    webhook_queue: str = field(default="", metadata=_env(
        "WEBHOOK_QUEUE", "The Celery queue of webhook deliveries; some worker must consume it "
        "(`make run` starts one).", shown="`<task queue>.webhooks`"))
    webhook_worker_concurrency: int = field(default=16, metadata=_env(
        "WEBHOOK_WORKER_CONCURRENCY", "Slots of the webhook queue's worker `make run` starts "
        "(deliveries in flight at once)."))
    webhook_max_attempts: int = field(default=6, metadata=_env(
        "WEBHOOK_MAX_ATTEMPTS", "Attempts of one delivery before it ends `failed`."))
    webhook_retry_backoff_seconds: float = field(default=5.0, metadata=_env(
        "WEBHOOK_RETRY_BACKOFF_SECONDS", "The wait before a delivery's first retry; each next "
        "one waits 8 times longer."))
    webhook_retry_backoff_max_seconds: float = field(default=18_000.0, metadata=_env(
        "WEBHOOK_RETRY_BACKOFF_MAX_SECONDS", "That wait's cap."))
    webhook_disable_after_failures: int = field(default=5, metadata=_env(
        "WEBHOOK_DISABLE_AFTER_FAILURES", "A webhook whose deliveries ended `failed` this many "
        "times in a row is disabled (`0`: never)."))
    webhook_sweep_interval_seconds: float = field(default=5.0, metadata=_env(
        "WEBHOOK_SWEEP_INTERVAL_SECONDS", "How often beat sends the deliveries whose retry came "
        "due or whose message was lost."))

    errors: tuple[ConfigProblem, ...] = field(default=())

    @property
    def llm_configured(self) -> bool:
        return self.llm_provider != "none" and bool(self.llm_model)

    @property
    def llm_summary(self) -> dict[str, str | None]:
        """The resolved LLM, as the start log and ``GET /version`` name it."""
        if self.llm_provider == "none":
            return {"provider": "none", "base_url": None, "model": None}
        return {"provider": self.llm_provider, "base_url": self.llm_base_url,
                "model": self.llm_model}

    @property
    def llm_description(self) -> str:
        """The start log's line for the resolved LLM."""
        if self.llm_provider == "none":
            return "LLM: none (HINDSIGHT_API_LLM_PROVIDER): refreshes wait for one"
        return f"LLM: {self.llm_provider} at {self.llm_base_url}, model {self.llm_model}"


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

    def tristate(self, name: str) -> bool | None:
        """A flag that may be left unset (None): then someone else decides."""
        return None if self.raw(name) is None else self.flag(name, False)

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


def _read_llm(r: _Reader) -> tuple[str, str, str]:
    """The provider name, its base URL and model, each the provider's default when unset."""
    p = ENV_PREFIX + "LLM_"
    name = r.text(p + "PROVIDER", "none").lower()
    supported = ", ".join(LLM_PROVIDERS)
    if name in OTHER_PROTOCOL_PROVIDERS:
        r.problem(INVALID_VALUE, p + "PROVIDER", f"{name!r} needs another protocol than OpenAI's "
                  f"chat completions, which every call here uses; supported: {supported}")
        return "none", "", ""
    if name != "none" and name not in OPENAI_COMPATIBLE_PROVIDERS:
        r.problem(INVALID_VALUE, p + "PROVIDER", f"must be one of {supported}; got {name!r}")
        return "none", "", ""
    if name == "none":
        return name, r.text(p + "BASE_URL"), r.text(p + "MODEL")
    provider = OPENAI_COMPATIBLE_PROVIDERS[name]
    base_url = r.text(p + "BASE_URL")
    if base_url and name in _V1_LOCAL_PROVIDERS and not urlsplit(base_url).path.strip("/"):
        base_url = base_url.rstrip("/") + "/v1"
    base_url = base_url or provider.base_url
    if not base_url:
        r.problem(MISSING_TOGETHER, p + "BASE_URL",
                  f"must be set when HINDSIGHT_API_LLM_PROVIDER={name} (it has no default)")
    model = r.text(p + "MODEL", provider.model)
    if not model:
        r.problem(MISSING_TOGETHER, p + "MODEL", f"must be set when HINDSIGHT_API_LLM_PROVIDER={name}")
    if provider.needs_key and not r.raw(p + "API_KEY"):
        r.problem(MISSING_TOGETHER, p + "API_KEY", f"must be set when HINDSIGHT_API_LLM_PROVIDER={name}")
    return name, base_url, model


def read_config(env: Mapping[str, str] | None = None) -> Config:
    """Read the whole configuration from ``env`` (the process environment by default)."""
    r = _Reader(os.environ if env is None else env)
    p = ENV_PREFIX

    llm_provider, llm_base_url, llm_model = _read_llm(r)

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

    transfer_storage_options = r.text(p + "TRANSFER_STORAGE_OPTIONS", "{}")
    try:
        if not isinstance(json.loads(transfer_storage_options), dict):
            raise ValueError
    except ValueError:
        r.problem(INVALID_VALUE, p + "TRANSFER_STORAGE_OPTIONS", "must be a JSON object")
        transfer_storage_options = "{}"

    webhook_event_types = tuple(
        t.strip() for t in r.text(p + "WEBHOOK_EVENT_TYPES", "consolidation.completed").split(",")
        if t.strip()
    )

    cfg = Config(
        host=r.text(p + "HOST", "127.0.0.1"),
        port=r.integer(p + "PORT", 8888, minimum=1),
        database_url=database_url,
        database_connect_timeout_seconds=r.integer(p + "DATABASE_CONNECT_TIMEOUT", 5, minimum=2),
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
        llm_json_object=r.tristate(p + "LLM_OPENAI_COMPATIBLE_JSON_MODE"),
        llm_reasoning_effort=r.text(p + "LLM_REASONING_EFFORT"),
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
        worker_probe_dir=r.text(p + "WORKER_PROBE_DIR"),
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
        mental_model_proposal_ttl_seconds=r.number(
            p + "MENTAL_MODEL_PROPOSAL_TTL_SECONDS", 604800.0, minimum=1.0
        ),
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
        transfer_dir=r.text(p + "TRANSFER_DIR"),
        transfer_storage=r.text(p + "TRANSFER_STORAGE"),
        transfer_storage_options=transfer_storage_options,
        transfer_download_ttl_seconds=r.integer(p + "TRANSFER_DOWNLOAD_TTL_SECONDS", 86_400,
                                                minimum=1),
        transfer_max_upload_bytes=r.integer(p + "TRANSFER_MAX_UPLOAD_BYTES", 2 * 1024 ** 3,
                                            minimum=1024),
        transfer_max_unpacked_bytes=r.integer(p + "TRANSFER_MAX_UNPACKED_BYTES", 20 * 1024 ** 3,
                                              minimum=1024),
        webhook_url=r.text(p + "WEBHOOK_URL"),
        webhook_secret=r.text(p + "WEBHOOK_SECRET"),
        webhook_event_types=webhook_event_types,
        webhook_allowed_hosts=tuple(
            h.strip() for h in r.text(p + "WEBHOOK_ALLOWED_HOSTS").split(",") if h.strip()
        ),
        webhook_expose_response_body=r.flag(p + "WEBHOOK_EXPOSE_RESPONSE_BODY", False),
        webhook_queue=r.text(p + "WEBHOOK_QUEUE"),
        webhook_worker_concurrency=r.integer(p + "WEBHOOK_WORKER_CONCURRENCY", 16, minimum=1),
        webhook_max_attempts=r.integer(p + "WEBHOOK_MAX_ATTEMPTS", 6, minimum=1),
        webhook_retry_backoff_seconds=r.number(p + "WEBHOOK_RETRY_BACKOFF_SECONDS", 5.0),
        webhook_retry_backoff_max_seconds=r.number(
            p + "WEBHOOK_RETRY_BACKOFF_MAX_SECONDS", 18_000.0),
        webhook_disable_after_failures=r.integer(p + "WEBHOOK_DISABLE_AFTER_FAILURES", 5,
                                                 minimum=0),
        webhook_sweep_interval_seconds=r.number(p + "WEBHOOK_SWEEP_INTERVAL_SECONDS", 5.0,
                                                minimum=0.5),
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


# docs/configuration.md: written from the fields' documentation above, never by hand.
# (``-c``, not ``-m``: the package's __init__ imports this module first, and runpy warns.)
PAGE_COMMAND = (".venv/bin/python -c 'from hindsight.infra.config import main; main()'"
                " > docs/configuration.md")
# The page's sections, each from its first field on, in the dataclass's order.
_PAGE_SECTIONS = (
    ("The service", "host"), ("The LLM", "llm_provider"), ("Embeddings", "embeddings_provider"),
    ("Workers and the job engine", "worker_pool"), ("Retain", "retain_extraction_concurrency"),
    ("Mental models", "mental_model_refresh_tick_seconds"), ("MCP", "mcp_enabled"),
    ("Consolidation", "consolidation_batch_size"),
    ("The LLM request log and the token budget", "llm_request_log_retention_hours"),
    ("Bank transfer", "transfer_dir"),
)
# Read by other modules, not part of ``Config``: the page lists them after it.
_OTHER_VARIABLES = (
    ("`HINDSIGHT_URL`, `HINDSIGHT_API_KEY`", "The `hindsight` CLI's (and `hindsight mcp`'s) "
     "server, default `http://127.0.0.1:8888`, and the key it sends as `Authorization: Bearer`."),
    ("`PROMETHEUS_MULTIPROC_DIR`", "The folder every process writes its metric files to, so a "
     "scrape of any API process sums them all; `make run` uses `.devdata/metrics`, the image "
     "`/var/lib/hindsight/metrics`."),
    ("`DJANGO_SETTINGS_MODULE`", "`hindsight.project.settings` (the default); beat runs with "
     "`hindsight.project.settings_beat`."),
    ("`HINDSIGHT_DEVSTACK`", "Set to `1` by `make run` for the processes it starts (and by "
     "`python -m hindsight.devstack env`)."),
)


def documented_fields() -> list[dataclasses.Field[Any]]:
    """The fields of ``Config`` read from the environment, in their order."""
    return [f for f in dataclasses.fields(Config) if "variables" in f.metadata]


def _default_text(f: dataclasses.Field[Any]) -> str:
    if f.metadata["shown"]:
        return str(f.metadata["shown"])
    value = f.default
    if value in ("", (), None):
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def configuration_markdown() -> str:
    """docs/configuration.md, from the documentation of ``Config``'s fields."""
    starts = dict((first, title) for title, first in _PAGE_SECTIONS)
    lines = [
        "# Configuration",
        "",
        "This page is written from the `Config` dataclass of `hindsight/infra/config.py`: change a",
        "field's documentation there, then run",
        "",
        "```sh",
        PAGE_COMMAND,
        "```",
        "",
        "Every setting is an environment variable, read once at start (names follow upstream",
        "Hindsight's where it has one, so a deployment's environment carries over). An invalid value",
        "stops start-up with a message naming the variable and its rule: the API and `manage.py`",
        "through Django's system checks, a Celery worker through the same check at its start. The",
        "timings must be ordered — `REFLECT_WALL_TIMEOUT` < `WORKER_TASK_SOFT_TIME_LIMIT` <",
        "`WORKER_TASK_TIME_LIMIT` < `BROKER_VISIBILITY_TIMEOUT`, and `WORKER_HEARTBEAT_SECONDS` <",
        "`WORKER_LOCK_TTL_SECONDS` — and start-up refuses a configuration whose timings are not.",
        "Durations are in seconds unless the name says otherwise.",
    ]
    for f in documented_fields():
        if f.name in starts:
            lines += ["", f"## {starts[f.name]}", "", "| variable | default | meaning |",
                      "|---|---|---|"]
        names = " / ".join(f"`{name}`" for name in f.metadata["variables"])
        doc = str(f.metadata["doc"]).replace("|", "\\|")
        lines.append(f"| {names} | {_default_text(f)} | {doc} |")
    lines += ["", "## Read elsewhere", "", "| variable | meaning |", "|---|---|"]
    lines += [f"| {names} | {doc} |" for names, doc in _OTHER_VARIABLES]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Print docs/configuration.md (``PAGE_COMMAND``)."""
    print(configuration_markdown(), end="")
