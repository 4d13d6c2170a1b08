"""Django settings: everything comes from ``hindsight.config.read_config`` (the one env reader)."""

from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import unquote, urlparse

from hindsight.config import read_config

BASE_DIR = Path(__file__).resolve().parent.parent
HINDSIGHT = read_config()


def _database(url: str) -> dict[str, object]:
    parsed = urlparse(url or "postgresql://postgres@127.0.0.1:5432/hindsight")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": (parsed.path or "/hindsight").lstrip("/") or "hindsight",
        "USER": unquote(parsed.username or "postgres"),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "127.0.0.1",
        "PORT": str(parsed.port or 5432),
        "CONN_MAX_AGE": 0,
        "TEST": {"NAME": "test_hindsight"},
    }


# No production default for the secret: an unset key gets a random one per process, which is
# fine for the API (token auth) and only logs admin sessions out on restart.
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
    "django_celery_beat",
    "hindsight.apps.HindsightConfig",
    "hindsight.embeddings",
    "hindsight.banks",
    "operations",
    "mentalmodels",
]

MIDDLEWARE = [
    "hindsight.api.auth.TenantApiKeyMiddleware",
    "hindsight.api.middleware.RequestSizeLimitMiddleware",
    "hindsight.api.middleware.PathNulMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hindsight.urls"
WSGI_APPLICATION = "hindsight.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

DATABASES = {"default": _database(HINDSIGHT.database_url)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".devdata" / "static"
# The size limit is enforced by our middleware with a 413 in upstream's shape.
DATA_UPLOAD_MAX_MEMORY_SIZE = None

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["hindsight.api.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "hindsight.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Hindsight Mental Models API",
    "DESCRIPTION": "Hindsight v1 wire-compatible API: banks, memories, mental models, operations.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # One component name per choice set that several schemas share (drf-spectacular names enums
    # by field name otherwise, and warns on the collisions).
    "ENUM_NAME_OVERRIDES": {
        "Budget": "mentalmodels.triggers.BUDGETS",
        "TagsMatch": "hindsight.tagscope.TAGS_MATCH_MODES",
        "RefreshMode": "mentalmodels.api.schema.REFRESH_MODES",
        "ModeFallbackReason": "mentalmodels.api.schema.MODE_FALLBACK_REASONS",
        "RefreshOutcome": "operations.api.schema.REFRESH_OUTCOMES",
        "DryRunRefreshOutcome": "mentalmodels.api.schema.DRY_RUN_OUTCOMES",
        "RefreshFailureReason": "operations.api.schema.REFRESH_FAILURE_REASONS",
        "OperationStatus": "operations.api.schema.OPERATION_STATUSES",
    },
}

_REDIS_URL = HINDSIGHT.redis_url or "redis://127.0.0.1:6379/0"
REDIS_URL = _REDIS_URL
CELERY_BROKER_URL = _REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
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
    "loggers": {"httpx": {"level": "WARNING"}, "openai": {"level": "WARNING"}},
}
