"""Gunicorn settings for ``ab serve`` (``gunicorn -c python:benchsite.gunicorn_conf``).

Every value comes from an environment variable with a default sized for this app: the pages
spend their time in Python (templates, leaderboard statistics), so processes, not threads,
are what use the cores; a few threads per process keep slow clients and keep-alive
connections from holding a whole process.
"""

from __future__ import annotations

import os

from benchsite.env import envint

bind = [os.environ.get("AB_SERVE_ADDR", "127.0.0.1:8000")]
# Gunicorn's own rule of thumb (2 x cores + 1), capped: each process holds a Django app and
# its database connections.
workers = envint("WEB_WORKERS", min(2 * (os.cpu_count() or 1) + 1, 9))
worker_class = "gthread"
threads = envint("WEB_THREADS", 4)
# A request that runs this long is stuck: gunicorn restarts its process.
timeout = envint("WEB_TIMEOUT_SEC", 60)
# SIGTERM: finish the requests in flight for at most this long, then stop.
graceful_timeout = envint("WEB_GRACEFUL_TIMEOUT_SEC", 10)
keepalive = 5
# Recycling processes now and then bounds the growth of any slow leak.
max_requests = envint("WEB_MAX_REQUESTS", 5000)
max_requests_jitter = 500
# Django is imported once in the master and shared by the forked processes (faster start,
# less memory). Database connections are opened lazily, after the fork.
preload_app = True
# Heartbeat files in memory: a slow disk must not make gunicorn think a process hangs.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
control_socket_disable = True
proc_name = "agentbench-web"
# Request lines come from benchsite.request_log (JSON, one per request); gunicorn's access
# log would be a second, unstructured copy.
accesslog = None
errorlog = "-"
loglevel = os.environ.get("WEB_LOG_LEVEL", "warning")
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "benchsite.request_log.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
    "loggers": {
        "gunicorn.error": {"handlers": ["console"], "level": loglevel.upper(), "propagate": False}
    },
}


def worker_exit(server, worker) -> None:
    """A stopping web process has answered its last request: exit now. Tearing down a
    Python interpreter holding Django takes seconds of CPU per process (and 5 processes do it
    at once), which made a SIGTERM to `ab serve` take 7-10 s instead of under one."""
    os._exit(0)
