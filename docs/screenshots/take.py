"""Screenshots of the leaderboard, compare, run and attempt pages on Verified-sized data (issue
29): 500 SWE-bench instances, a run of this harness, seven published runs without usage and a
partial one (tests/support/verified_fixtures.py), served by ``manage.py runserver`` from a temporary
SQLite database and shot by Debian's Chromium at a 1440x900 viewport (the viewport only: what
a reader sees without scrolling).

    python docs/screenshots/take.py PREFIX    # writes docs/screenshots/PREFIX-<page>.png
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent


def main(prefix: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ab-shots-"))
    env = {
        **os.environ,
        "AB_VAR_DIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "ARTIFACTS_ROOT": str(tmp / "artifacts"),
        "DJANGO_SETTINGS_MODULE": "benchsite.settings",
        "PAGE_CACHE": "false",
    }
    os.environ.update(env)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from runs.models import Attempt
    from tests.support.verified_fixtures import OWN, PARTIAL, PUBLISHED, seed_verified

    call_command("migrate", verbosity=0, interactive=False)
    call_command("collectstatic", verbosity=0, interactive=False)
    data = seed_verified()
    user = get_user_model().objects.create_user("shots", password="x", is_staff=True)
    client = Client()
    client.force_login(user)
    session = client.cookies["sessionid"].value
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    runs = data["runs"]

    def key(name: str) -> str:
        run = runs[name]
        return f"{run.model_config.slug}@{str(run.public_id)[:8]}"

    attempt = Attempt.objects.filter(run=runs[OWN]).order_by("task__task_id").first()
    pages = {
        "leaderboard": "/suites/verified/leaderboard/",
        "compare": f"/suites/verified/compare/?models={key(PUBLISHED[0])},{key(PARTIAL)}",
        "run": f"/runs/{runs[PARTIAL].public_id}/",
        "attempt": f"/attempts/{attempt.public_id}/",
    }
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
            )
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            context.add_cookies([{"name": "sessionid", "value": session, "url": base}])
            page = context.new_page()
            page.set_default_timeout(120_000)
            for name, path in pages.items():
                page.goto(base + path)
                target = OUT / f"{prefix}-{name}.png"
                page.screenshot(path=str(target))
                print(f"{target.relative_to(REPO)}: {target.stat().st_size // 1024} KB {path}")
            browser.close()
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "after")
