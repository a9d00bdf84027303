"""``ab`` commands that run the application itself: serve, setup-demo, add-reader."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command, get_commands

from benchsite.cli.main import CommandError
from benchsite.processes import Supervisor


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve", help="run the web app (gunicorn), a local worker and the reaper on 127.0.0.1:8000"
    )
    p.add_argument("--addr", default="127.0.0.1:8000", help="HOST:PORT to listen on")
    p.add_argument("--no-worker", action="store_true", help="web only: no local worker or reaper")
    p.add_argument("--workers", type=int, default=None, help="web processes (default WEB_WORKERS)")
    p.add_argument(
        "--dev",
        action="store_true",
        help="Django's development server instead of gunicorn (one process, not for users)",
    )
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser(
        "setup-demo",
        help="migrate, import the example tasks and SWE-bench sample, seed demo runs, "
        "and create an admin login",
    )
    p.add_argument("--no-seed", action="store_true", help="skip the generated demo runs")
    p.set_defaults(handler=cmd_setup_demo)

    p = sub.add_parser(
        "add-reader",
        help="let an account read patches, logs and transcripts (the readers group)",
    )
    p.add_argument("username")
    p.add_argument(
        "--create", action="store_true", help="make the account (a generated password is printed)"
    )
    p.set_defaults(handler=cmd_add_reader)


def cmd_add_reader(args: argparse.Namespace) -> int:
    from benchsite.accounts.access import reader_add
    from benchsite.cli.main import CommandError

    try:
        user, password = reader_add(username=args.username, create=args.create)
    except LookupError as exc:
        raise CommandError(str(exc)) from None
    if password:
        print(f"created account {user.username!r}, password {password!r} (shown only now)")
    print(f"{user.username} is a reader: it sees patches, logs and transcripts once logged in")
    return 0


def _admin_password() -> str:
    password = _stored_admin_password()
    if password is not None:
        return password
    password = secrets.token_urlsafe(12)
    path = Path(settings.VAR_DIR) / "admin-password.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(password + "\n")
    path.chmod(0o600)
    return password


def _stored_admin_password() -> str | None:
    path = Path(settings.VAR_DIR) / "admin-password.txt"
    return path.read_text().strip() if path.exists() else None


def cmd_setup_demo(args: argparse.Namespace) -> int:
    from django.contrib.auth import get_user_model

    from tasks_app.services import tasks_import

    Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
    call_command("migrate", verbosity=0, interactive=False)
    report = tasks_import(directory=settings.AB_TASKS_DIR)
    print(f"tasks: {report.summary()} (suites: {', '.join(report.suites)})")
    commands = get_commands()
    if "import_swebench_sample" in commands:
        call_command("import_swebench_sample")
    if not args.no_seed and "seed_demo" in commands:
        call_command("seed_demo")
    password = _admin_password()
    user_model = get_user_model()
    admin, _ = user_model.objects.get_or_create(
        username="admin", defaults={"is_staff": True, "is_superuser": True}
    )
    admin.is_staff = admin.is_superuser = True
    admin.set_password(password)
    admin.save()
    print(f"admin login: username 'admin', password '{password}'")
    return 0


def web_argv(*, dev: bool, addr: str, workers: int | None = None) -> list[str]:
    """The web server's command line: gunicorn (benchsite/gunicorn_conf.py), or with ``dev``
    Django's development server."""
    if dev:
        manage = str(settings.BASE_DIR / "manage.py")
        return [sys.executable, manage, "runserver", addr, "--noreload", "--skip-checks"]
    argv = [sys.executable, "-m", "gunicorn", "-c", "python:benchsite.gunicorn_conf"]
    argv += ["--bind", addr]
    if workers:
        argv += ["--workers", str(workers)]
    return [*argv, "benchsite.wsgi:application"]


def _health_url(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    host = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}.get(host, host)
    return f"http://{host}:{port}/healthz"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the web server, a worker and the reaper; print the URL once they answer; stop
    them all on SIGINT/SIGTERM (the worker warmly: see runs.cli.worker)."""
    from runs.cli.worker import LocalWorker

    if ":" not in args.addr:
        raise CommandError(f"--addr must be HOST:PORT, got {args.addr!r}")
    supervisor = Supervisor()
    supervisor.install_signal_handlers()
    # The development server renders every page in full (runs/web/page_cache.py) unless PAGE_CACHE
    # says otherwise: it is where page code is changed and its cost looked at.
    env = {**os.environ, "PAGE_CACHE": os.environ.get("PAGE_CACHE", "false")} if args.dev else None
    web = supervisor.start(
        "web", web_argv(dev=args.dev, addr=args.addr, workers=args.workers), env=env
    )
    worker = None if args.no_worker else LocalWorker(supervisor)
    health = _health_url(args.addr)
    state = supervisor.wait_until(
        lambda: _answers(health) and (worker is None or worker.ready()), timeout=120
    )
    if state == "ready":
        print(_banner(args, worker), flush=True)
    elif state == "timeout":
        print(f"ab serve: not ready after 120s; see {health}", file=sys.stderr, flush=True)
    gone = supervisor.exited() if state == "exited" else supervisor.wait()
    if gone is not None:
        print(f"ab serve: {gone.name} exited with status {gone.proc.returncode}", file=sys.stderr)
    print("ab serve: stopping", flush=True)
    supervisor.terminate_all()
    supervisor.stop(web, grace=settings.WEB_GRACEFUL_TIMEOUT_SEC + 5)
    if worker is not None:
        worker.shutdown()
    return 0 if gone is None else 1


def _banner(args: argparse.Namespace, worker) -> str:
    from django.contrib.auth import get_user_model

    url = _health_url(args.addr).removesuffix("healthz")
    server = "Django's development server (--dev)" if args.dev else "gunicorn"
    lines = [f"AgentBench is up: {url}  ({server}; health: {url}healthz)"]
    password = _stored_admin_password()
    if password and get_user_model().objects.filter(username="admin").exists():
        lines.append(f"admin login: username 'admin', password '{password}'")
    else:
        lines.append("admin login: none yet (`ab setup-demo` creates one)")
    if worker is not None:
        lines.append(f"worker {worker.node} (concurrency {worker.concurrency}) and the reaper")
    lines.append("Ctrl+C or SIGTERM stops everything; running attempts finish first")
    return "\n".join(lines)
