"""The one settings module. Every knob is an environment variable listed in .env.example."""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from benchsite.env import envbool, envfloat, envint, envlist, envstr

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("AB_VAR_DIR", str(BASE_DIR / "var")))
# Local state (SQLite files, artifacts, the broker file) lives here; it must exist to open them.
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = envstr("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
DEBUG = envbool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = envlist("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = envlist("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    # Listed so that /api/docs serves swagger-ui from the package's static files, not a CDN.
    "ninja",
    "benchsite.accounts",
    "tasks_app",
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "benchsite.urls"
WSGI_APPLICATION = "benchsite.wsgi.application"
ASGI_APPLICATION = "benchsite.asgi.application"

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
            ],
        },
    },
]

# SQLite by default (no server needed); DATABASE_URL=postgres://... selects PostgreSQL.
DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Workers and the web process share one file: WAL lets readers proceed while a worker
    # writes, and IMMEDIATE transactions make writers queue instead of failing with "locked".
    DATABASES["default"]["OPTIONS"] = {
        "timeout": envint("SQLITE_TIMEOUT_SEC", 30),
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve straight from the app folders: there is no build step and no collectstatic to forget.
WHITENOISE_USE_FINDERS = envbool("WHITENOISE_USE_FINDERS", True)

# Artifacts (stage logs, patches, events) go through Django's storage API, so S3-compatible
# storage is a matter of setting ARTIFACTS_STORAGE_BACKEND (for example django-storages').
ARTIFACTS_ROOT = Path(envstr("ARTIFACTS_ROOT", str(VAR_DIR / "artifacts")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": {
        "BACKEND": envstr(
            "ARTIFACTS_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage"
        ),
        "OPTIONS": {"location": str(ARTIFACTS_ROOT)}
        if envstr("ARTIFACTS_STORAGE_BACKEND", "") == ""
        else {},
    },
}

LOGIN_URL = "admin:login"

# Celery. The embedded default is kombu's SQL transport on a SQLite file: no server process.
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", f"sqla+sqlite:///{VAR_DIR / 'broker.sqlite3'}")
CELERY_RESULT_BACKEND = envstr("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Longer than the longest attempt, so a slow attempt is not redelivered while it runs.
    "visibility_timeout": envint("CELERY_VISIBILITY_TIMEOUT_SEC", 4 * 3600),
    "polling_interval": envfloat("CELERY_POLLING_INTERVAL_SEC", 0.2),
}
CELERY_WORKER_CONCURRENCY = envint("CELERY_WORKER_CONCURRENCY", 1)
# The queue attempts go to: deployments (or test sessions) sharing one broker use their own.
CELERY_TASK_DEFAULT_QUEUE = envstr("CELERY_QUEUE", "celery")
# The reaper (runs.tasks.attempts_reap_task) runs under celery beat: `ab serve` and
# `ab worker --beat` start it. Run beat once per deployment (it is idempotent if not).
ATTEMPT_REAPER_INTERVAL_SEC = envint("ATTEMPT_REAPER_INTERVAL_SEC", 30)
CELERY_BEAT_SCHEDULE = {
    "reap-stale-attempts": {
        "task": "runs.attempts_reap",
        "schedule": float(ATTEMPT_REAPER_INTERVAL_SEC),
        # A pass that waited behind busy workers longer than one interval is dropped: the
        # next one does the same work.
        "options": {"expires": float(ATTEMPT_REAPER_INTERVAL_SEC)},
    },
}

# Harness.
AB_TASKS_DIR = Path(envstr("AB_TASKS_DIR", str(BASE_DIR / "tasks")))
HARNESS_VERSION = "0.1.0"
SANDBOX_BACKEND = envstr("SANDBOX_BACKEND", "auto")  # auto | docker | bwrap
SANDBOX_IMAGE = envstr("SANDBOX_IMAGE", "agentbench/py-runner:0.1.0")
SANDBOX_MEMORY_MB = envint("SANDBOX_MEMORY_MB", 2048)
SANDBOX_CPUS = envfloat("SANDBOX_CPUS", 1.0)
SANDBOX_PIDS_LIMIT = envint("SANDBOX_PIDS_LIMIT", 256)
SANDBOX_OUTPUT_CAP_BYTES = envint("SANDBOX_OUTPUT_CAP_BYTES", 1_000_000)
# bubblewrap's root filesystem: the tree the runner image is imported from, left here by
# docker/py-runner/build-offline.sh (pass it to sandbox.open_sandbox(bwrap_rootfs=...)).
SANDBOX_BWRAP_ROOTFS = Path(envstr("SANDBOX_BWRAP_ROOTFS", "/var/lib/agentbench/rootfs/py-runner"))
# SWE-bench repositories for offline builds (ab swebench build): a folder of
# <owner>__<name>.git.tar.gz archives or <owner>__<name>.git bare repositories.
SWEBENCH_REPOS = envstr("SWEBENCH_REPOS", "")
# Output kept per stream of a SWE-bench instance's commands: graded from the test summary at
# the end of `pytest -rA`, which a big suite pushes past SANDBOX_OUTPUT_CAP_BYTES (sqlfluff's
# CLI tests print 2 MB); the official harness keeps the whole log.
SWEBENCH_OUTPUT_CAP_BYTES = envint("SWEBENCH_OUTPUT_CAP_BYTES", 20_000_000)
FAIL_FAST_THRESHOLD = envint("FAIL_FAST_THRESHOLD", 3)
ATTEMPT_HEARTBEAT_SEC = envint("ATTEMPT_HEARTBEAT_SEC", 10)
ATTEMPT_STALE_AFTER_SEC = envint("ATTEMPT_STALE_AFTER_SEC", 120)
# Host-side git clone / checkout of a task's repository (each); past it the attempt is TIMEOUT.
GIT_CLONE_TIMEOUT_SEC = envint("GIT_CLONE_TIMEOUT_SEC", 300)
# A running attempt whose worker went silent is requeued this many times, then ended.
ATTEMPT_MAX_REQUEUES = envint("ATTEMPT_MAX_REQUEUES", 1)
# Added to an attempt's budgets (setup + tests + agent max time) for Celery's soft time limit.
ATTEMPT_TIME_MARGIN_SEC = envint("ATTEMPT_TIME_MARGIN_SEC", 300)
# The reasons that count toward fail-fast's consecutive same-fingerprint failures.
FAIL_FAST_REASONS = envlist("FAIL_FAST_REASONS", "LLM_ERROR,SANDBOX_ERROR,UNKNOWN")

# LLM defaults for model configurations that leave them empty.
LLM_BASE_URL = envstr("LLM_BASE_URL", "https://api.openai.com/v1")
LLM_API_KEY_ENV = envstr("LLM_API_KEY_ENV", "OPENAI_API_KEY")
LLM_REQUEST_TIMEOUT_SEC = envfloat("LLM_REQUEST_TIMEOUT_SEC", 120.0)
LLM_LOG_MESSAGES = envbool("AGENTBENCH_LOG_LLM_MESSAGES", True)
LLM_LOG_MAX_CHARS = envint("AGENTBENCH_LLM_LOG_MAX_CHARS", 2_000_000)
STRICT_PATCH = envbool("AGENTBENCH_STRICT_PATCH", False)
# The LLM agent retries transient API errors itself (exponential backoff with jitter).
LLM_RETRY_MAX_ATTEMPTS = envint("LLM_RETRY_MAX_ATTEMPTS", 5)
LLM_RETRY_BASE_DELAY_SEC = envfloat("LLM_RETRY_BASE_DELAY_SEC", 1.0)
LLM_RETRY_MAX_DELAY_SEC = envfloat("LLM_RETRY_MAX_DELAY_SEC", 30.0)
# A JSON file of model prices (USD per million tokens) over the built-in table.
LLM_PRICE_TABLE = envstr("LLM_PRICE_TABLE", "")

# Access.
ANONYMOUS_READ_LEADERBOARDS = envbool("ANONYMOUS_READ_LEADERBOARDS", True)
ANONYMOUS_READ_ARTIFACTS = envbool("ANONYMOUS_READ_ARTIFACTS", False)
# Writes through the API per token (or signed-in user): "<count>/<sec|min|hour|day>".
API_WRITE_RATE = envstr("API_WRITE_RATE", "30/min")
# Uploaded task archives are unpacked here and kept: imported tasks point at their files.
API_UPLOADS_ROOT = Path(envstr("API_UPLOADS_ROOT", str(VAR_DIR / "uploads")))
API_UPLOAD_MAX_BYTES = envint("API_UPLOAD_MAX_BYTES", 200 * 1024 * 1024)


def _cache_from_url(url: str) -> dict:
    """locmem:// (one process), redis://host:port/db (shared by every web process), dummy://."""
    if url.startswith(("redis://", "rediss://", "unix://")):
        return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    if url.startswith("dummy://"):
        return {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}
    if url.startswith("locmem://"):
        return {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": url.removeprefix("locmem://") or "agentbench",
        }
    raise ValueError(f"CACHE_URL must be locmem://, redis://... or dummy://, got {url!r}")


# The write rate limit counts in this cache: point it at Redis when several web processes serve.
CACHES = {"default": _cache_from_url(envstr("CACHE_URL", "locmem://"))}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "WARNING")},
}
