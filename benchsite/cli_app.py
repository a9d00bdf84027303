"""``ab`` commands that run the application itself: serve, setup-demo, add-reader."""

from __future__ import annotations

import argparse
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management import call_command, get_commands


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the web app (and a local worker) on 127.0.0.1:8000")
    p.add_argument("--addr", default="127.0.0.1:8000", help="address:port to listen on")
    p.add_argument("--no-worker", action="store_true", help="do not start a local Celery worker")
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
    from benchsite.accounts.services import reader_add
    from benchsite.cli import CommandError

    try:
        user, password = reader_add(username=args.username, create=args.create)
    except LookupError as exc:
        raise CommandError(str(exc)) from None
    if password:
        print(f"created account {user.username!r}, password {password!r} (shown only now)")
    print(f"{user.username} is a reader: it sees patches, logs and transcripts once logged in")
    return 0


def _admin_password() -> str:
    path = Path(settings.VAR_DIR) / "admin-password.txt"
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_urlsafe(12)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(password + "\n")
    path.chmod(0o600)
    return password


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


def cmd_serve(args: argparse.Namespace) -> int:
    call_command("migrate", verbosity=0, interactive=False)
    worker = None
    if not args.no_worker:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "benchsite",
                "worker",
                "--beat",
                "--loglevel",
                "WARNING",
                "--concurrency",
                str(settings.CELERY_WORKER_CONCURRENCY),
                "--schedule",
                str(Path(settings.VAR_DIR) / "celerybeat-schedule"),
            ],
        )
    print(f"AgentBench on http://{args.addr}/  (Ctrl+C stops it)")
    try:
        call_command("runserver", args.addr, use_reloader=False)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
    return 0
