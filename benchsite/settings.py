"""The one settings module. Every knob is an environment variable listed in .env.example."""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from benchsite.env import envbool, envfloat, envint, envlist, envstr
from runs.upstreams import DEFAULT_KEY_ENVS, DEFAULT_UPSTREAMS, FORBIDDEN_KEY_ENVS

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
    # First, so its one line per request covers static files and every other middleware.
    "benchsite.request_log.request_log_middleware",
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads the body (CSRF does): upload size limits while it streams in.
    "tasks_app.uploads.files.UploadLimitMiddleware",
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
        # Kept open between requests (and checked before reuse): opening a connection per
        # request costs PostgreSQL a backend fork and SQLite its PRAGMAs.
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
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
# Vendored files carry their version in their name (plotly-4.1.1.min.js): browsers keep them
# for good. WhiteNoise serves a file's .gz sibling to clients that take gzip (plotly: 4.8 MB
# as 1.4 MB).
WHITENOISE_IMMUTABLE_FILE_TEST = r"/vendor/[^/]*-\d+\.\d+\.\d+[^/]*$"

# Artifacts (stage logs, patches, events) go through Django's storage API, so S3-compatible
# storage is a matter of setting ARTIFACTS_STORAGE_BACKEND (for example django-storages').
ARTIFACTS_ROOT = Path(envstr("ARTIFACTS_ROOT", str(VAR_DIR / "artifacts")))
_FILE_STORAGE = "django.core.files.storage.FileSystemStorage"
# A FileSystemStorage whose reads never follow a link (a sandbox plants them in its workspace,
# inside the attempt's folder); Django's own, named here, is read through it as well.
_ARTIFACT_STORAGE = "runs.artifact_storage.ArtifactStorage"
ARTIFACTS_STORAGE_BACKEND = envstr("ARTIFACTS_STORAGE_BACKEND", "") or _ARTIFACT_STORAGE
# A FileSystemStorage elsewhere than ARTIFACTS_ROOT, e.g. a mount every machine shares: the
# workers copy each attempt's folder there and the web app reads it
# (runs/workers/artifacts_sync.py).
ARTIFACTS_STORAGE_LOCATION = envstr("ARTIFACTS_STORAGE_LOCATION", "")
STORAGES = {
    "default": {"BACKEND": _FILE_STORAGE},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": {
        "BACKEND": ARTIFACTS_STORAGE_BACKEND,
        "OPTIONS": {"location": ARTIFACTS_STORAGE_LOCATION or str(ARTIFACTS_ROOT)}
        if ARTIFACTS_STORAGE_BACKEND in (_FILE_STORAGE, _ARTIFACT_STORAGE)
        else {},
    },
}

# The site's own login page (any account); the admin keeps its login for staff.
LOGIN_URL = "account-login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# `ab serve`: gunicorn finishes the requests in flight for this long on SIGTERM (the other WEB_*
# knobs are read by benchsite/gunicorn_conf.py).
WEB_GRACEFUL_TIMEOUT_SEC = envint("WEB_GRACEFUL_TIMEOUT_SEC", 10)

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
# Workers log through LOGGING below (JSON lines), not Celery's own format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# The queue attempts go to: deployments (or test sessions) sharing one broker use their own.
CELERY_TASK_DEFAULT_QUEUE = envstr("CELERY_QUEUE", "celery")
# The reaper (runs.workers.bookkeeping.attempts_reap) runs in its own process, `ab reaper`, which
# `ab serve` and `ab worker --beat` start: not as a Celery task, which would wait in the queue
# behind the attempts of busy workers, exactly when a lost worker needs it. Run one per
# deployment (a second one is harmless: every step is a compare-and-set).
ATTEMPT_REAPER_INTERVAL_SEC = envint("ATTEMPT_REAPER_INTERVAL_SEC", 10)

# Harness.
AB_TASKS_DIR = Path(envstr("AB_TASKS_DIR", str(BASE_DIR / "tasks")))
# Folders a locally imported task.yaml may name (repo.url as a path, reference_solution) beside
# the tasks folder imported, AB_TASKS_DIR and the repository's tasks/ and examples/
# (tasks_app/spec.py, PathRules).
# Uploaded tasks may only name files inside their own upload, whatever this says.
TASK_PATH_ROOTS = [Path(p) for p in envlist("TASK_PATH_ROOTS", "")]
HARNESS_VERSION = "0.1.0"
SANDBOX_BACKEND = envstr("SANDBOX_BACKEND", "auto")  # auto | docker | bwrap
SANDBOX_IMAGE = envstr("SANDBOX_IMAGE", "agentbench/py-runner:0.1.0")
SANDBOX_MEMORY_MB = envint("SANDBOX_MEMORY_MB", 2048)
SANDBOX_CPUS = envfloat("SANDBOX_CPUS", 1.0)
# The most a task may ask for itself (a Harbor task's memory_mb and storage_mb): more is
# refused at import, and at run time if the limit was lowered since ([resource-cap]).
SANDBOX_MAX_MEMORY_MB = envint("SANDBOX_MAX_MEMORY_MB", 16384)
SANDBOX_MAX_DISK_MB = envint("SANDBOX_MAX_DISK_MB", 102400)
SANDBOX_PIDS_LIMIT = envint("SANDBOX_PIDS_LIMIT", 256)
SANDBOX_OUTPUT_CAP_BYTES = envint("SANDBOX_OUTPUT_CAP_BYTES", 1_000_000)
# Disk quota per sandbox (workspace, /tmp and home share it; sandbox/disk.py); 0 turns it off.
SANDBOX_DISK_MB = envint("SANDBOX_DISK_MB", 10240)
# Files (inodes) a sandbox may leave: the quota filesystem's inode count, and a check after the
# agent where there is no quota (runs/pipeline/change_set.py: SANDBOX_ERROR [file-limit]);
# reading a tree back costs the host per file. 0 turns it off.
SANDBOX_MAX_FILES = envint("SANDBOX_MAX_FILES", 100_000)
# bubblewrap's root filesystem: the tree the runner image is imported from, left here by
# docker/py-runner/build-offline.sh (pass it to sandbox.open_sandbox(bwrap_rootfs=...)).
SANDBOX_BWRAP_ROOTFS = Path(envstr("SANDBOX_BWRAP_ROOTFS", "/var/lib/agentbench/rootfs/py-runner"))
# SWE-bench repositories for offline builds (ab swebench build): a folder of
# <owner>__<name>.git.tar.gz archives or <owner>__<name>.git bare repositories.
SWEBENCH_REPOS = envstr("SWEBENCH_REPOS", "")
# Where the commits of a repository SWEBENCH_REPOS lacks are fetched from: the base of its URL
# https://github.com/<owner>/<name>.git, rewritten like git's insteadOf (git://mirror:9418/);
# "off": never fetch (sandbox/environments/repo_fetch.py).
SWEBENCH_GIT_BASE = envstr("SWEBENCH_GIT_BASE", "https://github.com/")
# Output kept per stream of a SWE-bench instance's commands: graded from the test summary at
# the end of `pytest -rA`, which a big suite pushes past SANDBOX_OUTPUT_CAP_BYTES (sqlfluff's
# CLI tests print 2 MB); the official harness keeps the whole log.
SWEBENCH_OUTPUT_CAP_BYTES = envint("SWEBENCH_OUTPUT_CAP_BYTES", 20_000_000)
FAIL_FAST_THRESHOLD = envint("FAIL_FAST_THRESHOLD", 3)
# A lost worker's attempt is taken back within STALE_AFTER + REAPER_INTERVAL (40 + 10 s): eight
# missed heartbeats, so a worker slowed by load or a database lock is not taken for dead.
ATTEMPT_HEARTBEAT_SEC = envint("ATTEMPT_HEARTBEAT_SEC", 5)
ATTEMPT_STALE_AFTER_SEC = envint("ATTEMPT_STALE_AFTER_SEC", 40)
# Host-side git clone / checkout of a task's repository (each); past it the attempt is TIMEOUT.
GIT_CLONE_TIMEOUT_SEC = envint("GIT_CLONE_TIMEOUT_SEC", 300)
# SIGTERM/SIGINT to `ab worker` / `ab serve`: running attempts may finish for this long, then
# the worker is killed and they go back to the queue (runs.cli.worker).
WORKER_SHUTDOWN_GRACE_SEC = envint("WORKER_SHUTDOWN_GRACE_SEC", 30)
# A running attempt whose worker went silent is requeued this many times, then ended.
ATTEMPT_MAX_REQUEUES = envint("ATTEMPT_MAX_REQUEUES", 1)
# Added to an attempt's budgets (setup + tests + agent max time) for Celery's soft time limit.
ATTEMPT_TIME_MARGIN_SEC = envint("ATTEMPT_TIME_MARGIN_SEC", 300)
# The reasons that count toward fail-fast's consecutive same-fingerprint failures.
FAIL_FAST_REASONS = envlist("FAIL_FAST_REASONS", "LLM_ERROR,SANDBOX_ERROR,UNKNOWN")

# LLM defaults for model configurations that leave them empty.
LLM_BASE_URL = envstr("LLM_BASE_URL", "https://api.openai.com/v1")
LLM_API_KEY_ENV = envstr("LLM_API_KEY_ENV", "OPENAI_API_KEY")
# Where a model configuration may send the worker's key, and which key (runs/upstreams.py):
# the variables a configuration's api_key_env may name (LLM_API_KEY_ENV is always allowed, the
# site's own secrets never), and the upstream hosts its base_url may name ("host" for any port,
# "host:port"; LLM_BASE_URL's host is always in). Checked when a configuration is written and
# again when an attempt starts. Writing either field is for superusers only.
GATEWAY_API_KEY_ENVS = envlist("GATEWAY_API_KEY_ENVS", ",".join(DEFAULT_KEY_ENVS))
GATEWAY_UPSTREAMS = envlist("GATEWAY_UPSTREAMS", ",".join(DEFAULT_UPSTREAMS))
if _secrets := sorted(FORBIDDEN_KEY_ENVS.intersection([*GATEWAY_API_KEY_ENVS, LLM_API_KEY_ENV])):
    raise ValueError(f"GATEWAY_API_KEY_ENVS or LLM_API_KEY_ENV name the site's secrets: {_secrets}")
# The module prefixes a model configuration's agent_import_path may name ("pkg" allows pkg and
# pkg.sub; runs/agents/imported.py). Importing runs the module's code in the worker: empty
# (the default) allows none. Checked when a configuration is written and when an attempt starts.
AGENT_IMPORT_PATHS = envlist("AGENTBENCH_AGENT_IMPORT_PATHS", "")
LLM_REQUEST_TIMEOUT_SEC = envfloat("LLM_REQUEST_TIMEOUT_SEC", 120.0)
LLM_LOG_MESSAGES = envbool("AGENTBENCH_LOG_LLM_MESSAGES", True)
LLM_LOG_MAX_CHARS = envint("AGENTBENCH_LLM_LOG_MAX_CHARS", 2_000_000)
STRICT_PATCH = envbool("AGENTBENCH_STRICT_PATCH", False)
# The LLM agent retries transient API errors itself (exponential backoff with jitter).
LLM_RETRY_MAX_ATTEMPTS = envint("LLM_RETRY_MAX_ATTEMPTS", 5)
LLM_RETRY_BASE_DELAY_SEC = envfloat("LLM_RETRY_BASE_DELAY_SEC", 1.0)
LLM_RETRY_MAX_DELAY_SEC = envfloat("LLM_RETRY_MAX_DELAY_SEC", 30.0)

# Conditions: the files a model configuration adds to the workspace (runs/conditions.py).
CONDITION_FILES_MAX = envint("CONDITION_FILES_MAX", 200)
CONDITION_FILE_MAX_BYTES = envint("CONDITION_FILE_MAX_BYTES", 256 * 1024)
CONDITION_FILES_MAX_BYTES = envint("CONDITION_FILES_MAX_BYTES", 1024 * 1024)
# A JSON file of model prices (USD per million tokens) over the built-in table.
LLM_PRICE_TABLE = envstr("LLM_PRICE_TABLE", "")
# The bytes of one attempt's model_calls.jsonl (on the host, outside the sandbox's quota):
# past them records are summarised, then counted (runs/gateway/record.py).
GATEWAY_RECORD_MAX_BYTES = envint("GATEWAY_RECORD_MAX_BYTES", 64 * 1024 * 1024)

# Access.
# Sign-in: this many failed passwords for one username from one address lock that pair out
# for LOGIN_LOCKOUT_SEC (benchsite/accounts/throttle.py; counted in CACHE_URL's cache).
LOGIN_FAILURE_LIMIT = envint("LOGIN_FAILURE_LIMIT", 5)
LOGIN_LOCKOUT_SEC = envint("LOGIN_LOCKOUT_SEC", 900)
AUTHENTICATION_BACKENDS = ["benchsite.accounts.throttle.LockoutBackend"]
ANONYMOUS_READ_LEADERBOARDS = envbool("ANONYMOUS_READ_LEADERBOARDS", True)
ANONYMOUS_READ_ARTIFACTS = envbool("ANONYMOUS_READ_ARTIFACTS", False)
# Writes through the API per token (or signed-in user): "<count>/<sec|min|hour|day>".
API_WRITE_RATE = envstr("API_WRITE_RATE", "30/min")
# Uploaded task archives are unpacked here and kept: imported tasks point at their files.
API_UPLOADS_ROOT = Path(envstr("API_UPLOADS_ROOT", str(VAR_DIR / "uploads")))
# Applied while the body arrives (tasks_app.uploads.files.UploadLimitMiddleware), never after.
API_UPLOAD_MAX_BYTES = envint("API_UPLOAD_MAX_BYTES", 200 * 1024 * 1024)
# One file of an imported run folder (a trajectory, a report, an Inspect sample) is parsed in
# memory; a larger one is refused naming it (ab import-run, POST /api/imports/run). Real
# trajectories take a few MB; a web worker that has imported a dataset holds ~220 MB of code
# (the swebench harness's imports), and an import must keep it under 300 MB.
IMPORT_FILE_MAX_BYTES = envint("IMPORT_FILE_MAX_BYTES", 16 * 1024 * 1024)
# How deep, how many JSON values (parser events) and how much memory once built one imported
# JSON file may take: checked while it streams from disk, before it is built
# (runs/imports/jsonfile.py). Real trajectories hold some thousands of values at depth
# 10-12; the limits keep an import's worker under 300 MB
# (tests/runs/imports/test_security_imports.py).
IMPORT_JSON_MAX_DEPTH = envint("IMPORT_JSON_MAX_DEPTH", 100)
IMPORT_JSON_MAX_ITEMS = envint("IMPORT_JSON_MAX_ITEMS", 200_000)
IMPORT_JSON_MAX_MEMORY_MB = envint("IMPORT_JSON_MAX_MEMORY_MB", 48)
# The patches one import keeps until it writes (submissions, patch.diff files, predictions),
# all files together: a folder of many large patches is refused naming the file that passes it.
IMPORT_PATCHES_MAX_MB = envint("IMPORT_PATCHES_MAX_MB", 16)
# What opening one uploaded archive may unpack (tasks_app/uploads/archives.py): files, bytes
# per file, bytes in total. Declared sizes are checked first, actual bytes counted while reading.
API_ARCHIVE_MAX_MEMBERS = envint("API_ARCHIVE_MAX_MEMBERS", 10_000)
API_ARCHIVE_MEMBER_MAX_BYTES = envint("API_ARCHIVE_MEMBER_MAX_BYTES", 100 * 1024 * 1024)
API_ARCHIVE_TOTAL_MAX_BYTES = envint("API_ARCHIVE_TOTAL_MAX_BYTES", 400 * 1024 * 1024)


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
# The results pages' data-heavy HTML, per data version (runs/web/page_cache.py): on by default;
# `ab serve --dev` turns it off unless PAGE_CACHE is set. Same backend as CACHE_URL, entries
# apart; a process's locmem keeps at most PAGE_CACHE_MAX_ENTRIES of them.
PAGE_CACHE = envbool("PAGE_CACHE", True)
CACHES["pages"] = CACHES["default"] | {"KEY_PREFIX": "pages"}
# Each run's per-task tallies and usage sums, kept in each process under the run's stamp and
# reread only for runs whose attempts changed (runs/results/run_tallies.py).
RESULTS_RUN_CACHE = envbool("RESULTS_RUN_CACHE", True)
if CACHES["pages"]["BACKEND"].endswith("LocMemCache"):
    CACHES["pages"] |= {
        "LOCATION": CACHES["default"]["LOCATION"] + "-pages",
        "OPTIONS": {"MAX_ENTRIES": envint("PAGE_CACHE_MAX_ENTRIES", 200)},
    }

# Structured logs: one JSON object a line (LOG_FORMAT=text for plain lines), on stderr.
LOG_FORMAT = envstr("LOG_FORMAT", "json")
if LOG_FORMAT not in ("json", "text"):
    raise ValueError(f"LOG_FORMAT must be json or text, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "benchsite.request_log.JsonFormatter"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "WARNING")},
    "loggers": {
        # One line per request (benchsite.request_log); REQUEST_LOG_LEVEL=WARNING silences it.
        "agentbench.requests": {
            "handlers": ["console"],
            "level": envstr("REQUEST_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
    },
}
