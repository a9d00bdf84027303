"""The task page follows an image pull live in Chromium (static/js/image_progress.js): it polls
the progress endpoint, moves the bar, shows the registry's words as text, and stops once the
pull ended. The pull's record is written by the test as tasks_app/images.py writes it (the real
pull against a registry is tests/sandbox/environments/test_registry_images.py's)."""

from __future__ import annotations

import pytest

from sandbox.environments import registry

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_task_page_follows_a_pull_until_it_ends(page, live_server) -> None:
    from tasks_app.images import progress_of
    from tasks_app.models import Suite, Task

    suite = Suite.objects.create(name="pull-live")
    reference = "127.0.0.1:5000/o/x:1"
    state = registry.Progress(reference, layers=2, bytes_total=20_000_000, status="Waiting")
    task = Task.objects.create(
        suite=suite, task_id="pull_live", docker_image=reference, image_progress=progress_of(state)
    )
    page.goto(live_server.url + task.get_absolute_url())
    assert "0/2 layers" in page.inner_text("#image-progress")
    evil = '<img src=x onerror="window.__xss=1">'
    state.layers_done, state.bytes_done, state.status = 1, 10_000_000, evil
    Task.objects.filter(pk=task.pk).update(image_progress=progress_of(state))
    page.wait_for_function("document.querySelector('#image-progress progress').value == 10000000")
    shown = page.inner_text("#image-progress")
    assert "1/2 layers, 10 MB of 20 MB" in shown and evil in shown  # as text, never as HTML
    assert page.locator("#image-progress img").count() == 0
    done = progress_of(state) | {"state": "done", "line": "pulled o/x@sha256:ab in 3 s"}
    Task.objects.filter(pk=task.pk).update(image_progress=done)
    page.wait_for_function("document.querySelector('#image-progress').dataset.final === '1'")
    assert page.inner_text("#image-progress [data-field=line]") == "pulled o/x@sha256:ab in 3 s"
    assert page.evaluate("window.__xss") is None
