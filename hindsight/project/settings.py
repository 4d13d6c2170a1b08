"""Django settings: everything comes from ``hindsight.infra.config.read_config`` (the one env reader)."""

from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import unquote, urlparse

from hindsight.infra.config import read_config
from hindsight.infra.embeddings.probe import embeddings_dimensions_probe

BASE_DIR = Path(__file__).resolve().parent.parent
# The vector columns' dimension is part of the models, so an unset OpenAI embeddings dimension is
# probed here, before any model is imported.
HINDSIGHT = embeddings_dimensions_probe(read_config())


TCP_USER_TIMEOUT_MS = 15_000


def _database(url: str, *, connect_timeout: int) -> dict[str, object]:
    parsed = urlparse(url or "postgresql://postgres@127.0.0.1:5432/hindsight")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": (parsed.path or "/hindsight").lstrip("/") or "hindsight",
        "USER": unquote(parsed.username or "postgres"),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "127.0.0.1",
        "PORT": str(parsed.port or 5432),
        "CONN_MAX_AGE": 0,
        # A server that does not answer (a network cut) fails the connection in seconds: a
        # request answers 503 (docs/behaviour.md#unavailable-never-500) instead of hanging.
        # An open connection the network drops is noticed too: what was sent and not
        # acknowledged for TCP_USER_TIMEOUT_MS fails the query, and an idle one is probed by
        # keepalives (Linux's defaults would take hours, or a retransmission timeout of ~15 min).
        "OPTIONS": {"connect_timeout": connect_timeout, "keepalives": 1,
                    "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
                    "tcp_user_timeout": TCP_USER_TIMEOUT_MS},
        "TEST": {"NAME": "test_hindsight"},
    }


# No production default for the secret. `make run` passes the stable key it keeps under
# .devdata/, and the hindsight.E200 system check (run by `migrate`, the first step of every start)
# refuses to start without one. A process that skips the checks gets a random key of its own,
# which the token-authenticated API does not need but the admin's sessions do.
SECRET_KEY = HINDSIGHT.secret_key or secrets.token_urlsafe(50)
DEBUG = HINDSIGHT.debug
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI and ReDoc served from this server (the docs work without internet access).
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "hindsight.project.apps.HindsightConfig",
    "hindsight.infra.embeddings",
    "hindsight.infra.llm",
    "hindsight.banks",
    "hindsight.webhooks",
    "operations",
    "mentalmodels",
    "mentalmodels.knowledge",
    "mentalmodels.directives",
    "mentalmodels.review",
]

MIDDLEWARE = [
    "hindsight.infra.edge.auth.TenantApiKeyMiddleware",
    "hindsight.infra.edge.middleware.RequestSizeLimitMiddleware",
    "hindsight.infra.edge.middleware.PathNulMiddleware",
    "hindsight.infra.edge.middleware.UnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS, the API docs' assets) from the API process itself: `make
    # run` and the compose web service have no separate web server in front.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hindsight.project.urls"
WSGI_APPLICATION = "hindsight.project.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Our overrides of third-party pages (the offline ReDoc page).
        "DIRS": [BASE_DIR / "hindsight" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {"default": _database(HINDSIGHT.database_url,
                                  connect_timeout=HINDSIGHT.database_connect_timeout_seconds)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"
# Filled by `collectstatic`, which `make run` runs at start and the Docker image at build.
STATIC_ROOT = BASE_DIR / ".devdata" / "static"
# Also serve straight from the apps' static folders, so a checkout whose collectstatic has not
# run yet (or is stale after an upgrade) still has a styled admin and working docs.
WHITENOISE_USE_FINDERS = True
try:
    # WhiteNoise warns at start about a missing STATIC_ROOT; before the first collectstatic the
    # folder is simply empty (the finders serve everything). An image built read-only has it.
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
except OSError:
    pass
# The size limit is enforced by our middleware with a 413 in upstream's shape.
DATA_UPLOAD_MAX_MEMORY_SIZE = None

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["hindsight.infra.edge.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "hindsight.infra.edge.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Hindsight Mental Models API",
    "DESCRIPTION": "Hindsight v1 wire-compatible API: banks, memories, mental models, operations.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The tenant API key (HINDSIGHT_API_TENANT_API_KEY) as a bearer scheme, so the docs' "Try it
    # out" can send it; optional per operation because a server without a key needs none.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "hindsight.infra.edge.openapi.declare_tenant_bearer",
    ],
    # One component name per choice set that several schemas share (drf-spectacular names enums
    # by field name otherwise, and warns on the collisions).
    "ENUM_NAME_OVERRIDES": {
        "Budget": "hindsight.infra.vocabulary.BUDGETS",
        "TagsMatch": "hindsight.infra.vocabulary.TAGS_MATCH_MODES",
        "RefreshMode": "hindsight.infra.vocabulary.REFRESH_MODES",
        "ModeFallbackReason": "mentalmodels.api.preview.MODE_FALLBACK_REASONS",
        "RefreshOutcome": "mentalmodels.api.operation_details.REFRESH_OUTCOMES",
        "DryRunRefreshOutcome": "mentalmodels.api.preview.DRY_RUN_OUTCOMES",
        "RefreshFailureReason": "mentalmodels.api.operation_details.REFRESH_FAILURE_REASONS",
        "OperationStatus": "operations.api.serializers.OPERATION_STATUSES",
        "TriggerFactType": "hindsight.infra.vocabulary.SCOPE_FACT_TYPES",
        "FactType": "hindsight.infra.vocabulary.FACT_TYPES",
        "HealthStatus": "hindsight.infra.edge.schema.HEALTH_STATUSES",
        "LivenessStatus": "hindsight.infra.edge.schema.LIVENESS_STATUSES",
    },
}

_REDIS_URL = HINDSIGHT.redis_url or "redis://127.0.0.1:6379/0"
REDIS_URL = _REDIS_URL
CELERY_BROKER_URL = _REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# How long the pool waits for a dead child's result before reporting WorkerLostError (Celery's
# default is 10 s). Results live in PostgreSQL, not in that pipe: report at once, so the main
# process recovers the job in about a second (operations.tasks.RunRequest).
CELERY_WORKER_LOST_WAIT = 0.5
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The pool and its slots when the worker's command line names none (`make run`, compose):
# threads by default, many slots, since a job mostly waits on the LLM (hindsight.project.celery).
CELERY_WORKER_POOL = HINDSIGHT.worker_pool
CELERY_WORKER_CONCURRENCY = HINDSIGHT.worker_concurrency
# Celery's Django fixup closes a pool process's database connections every this many tasks
# (twice per task without it); between those, hindsight.project.celery keeps the connection, dropping
# it when broken or too old and health-checking it before each task.
CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_SOFT_TIME_LIMIT = HINDSIGHT.task_soft_time_limit_seconds
CELERY_TASK_TIME_LIMIT = HINDSIGHT.task_time_limit_seconds
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": HINDSIGHT.broker_visibility_timeout_seconds,
    # Without these a broker that accepts connections but never answers (hung, half-open)
    # blocks a publish forever: an API request's on-commit send, a finishing job's hand-on,
    # the recovery sweep. With them the publish fails in seconds and recovery re-sends
    # (dispatched_at stays unset). Longer than the worker's 1 s BRPOP poll.
    "socket_timeout": 5.0,
    "socket_connect_timeout": 2.0,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_DEFAULT_QUEUE = HINDSIGHT.task_queue
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
# Task events, so `celery -A hindsight flower` (or `celery events`) sees the workers and every
# operations task from sent to succeeded/failed; the worker's -E flag is then unnecessary.
CELERY_WORKER_SEND_TASK_EVENTS = True
CELERY_TASK_SEND_SENT_EVENT = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    # The openai SDK sends through its vendored httpx2, which logs every request at INFO.
    "loggers": {"httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"},
                "openai": {"level": "WARNING"}},
}
