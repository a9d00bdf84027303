"""The leaderboard reads at a glance on Verified-sized data (issue 29), in Debian's Chromium at
a desktop (1440x900) and a phone (390x844) viewport: the ranking above the fold (first ranked
row above y = 400 px, 8 rows visible without scrolling), no page-level horizontal scroll on the
leaderboard, the attempts list and the compare page (a wide table scrolls in its own wrapper),
one-line notices that concern the rows shown, no empty usage columns, and a partial run marked
"partial: n of N tasks" with its comparison with the leader one click away."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support.browser_fixtures import shot
from tests.support.verified_fixtures import OWN, PARTIAL, PUBLISHED, seed_verified

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORTS = [(1440, 900), (390, 844)]
FOLD_Y = 400  # the first ranked row starts above it
VISIBLE_ROWS = 8


@pytest.fixture
def verified(transactional_db) -> dict:
    return seed_verified()


@pytest.fixture
def session(django_user_model, live_server) -> dict:
    from benchsite.accounts.access import readers_group

    user = django_user_model.objects.create_user("carol", password="carol-password")
    user.groups.add(readers_group())
    client = Client()
    client.force_login(user)
    return {"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}


def open_at(browser, session: dict, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_cookies([session])
    page = context.new_page()
    page.set_default_timeout(90_000)
    page.set_default_navigation_timeout(90_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return context, page, errors


def key(run) -> str:
    return f"{run.model_config.slug}@{str(run.public_id)[:8]}"


def no_page_scroll(page) -> tuple[int, int]:
    return page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )


def test_the_ranking_is_above_the_fold_and_nothing_scrolls_sideways(
    browser, live_server, session, verified
):
    runs = verified["runs"]
    base = f"{live_server.url}/suites/verified"
    leader = runs[PUBLISHED[0]]
    for width, height in VIEWPORTS:
        context, page, errors = open_at(browser, session, width, height)
        page.goto(f"{base}/leaderboard/")
        shot(page, f"leaderboard-fold-{width}")
        ranked = page.locator("#leaderboard > tbody:first-of-type > tr[data-key]")
        assert ranked.count() == 9
        first = ranked.nth(0).bounding_box()
        eighth = ranked.nth(VISIBLE_ROWS - 1).bounding_box()
        assert first["y"] < FOLD_Y, (width, first)
        assert eighth["y"] + eighth["height"] <= height, (width, eighth)
        assert no_page_scroll(page)[0] == no_page_scroll(page)[1], (width, "leaderboard")
        if width >= 1440:  # the whole ranking table fits a desktop: nothing to scroll to
            inner = page.locator("#leaderboard-wrap").evaluate(
                "w => [w.scrollWidth, w.clientWidth]"
            )
            assert inner[0] == inner[1], inner
        # The by-repository table is wider than a phone: it scrolls in its own wrapper.
        wrap = page.locator("#by-repo").evaluate(
            "t => [t.parentElement.scrollWidth, t.parentElement.clientWidth,"
            " getComputedStyle(t.parentElement).overflowX]"
        )
        assert wrap[2] == "auto"

        page.goto(f"{base}/attempts/")
        assert page.locator("table").count() >= 1
        assert no_page_scroll(page)[0] == no_page_scroll(page)[1], (width, "attempts")

        page.goto(f"{base}/compare/?models={key(leader)},{key(runs[PARTIAL])}")
        page.wait_for_selector("#matrix")
        assert no_page_scroll(page)[0] == no_page_scroll(page)[1], (width, "compare")
        shot(page, f"compare-{width}")
        context.close()
        assert errors == []


def test_notices_are_one_line_and_concern_the_rows_shown(browser, live_server, session, verified):
    runs = verified["runs"]
    base = f"{live_server.url}/suites/verified/leaderboard/"
    context, page, errors = open_at(browser, session, 1440, 900)
    page.goto(base)
    notice = page.locator("details#approximate-env")
    summary = notice.locator("summary")
    # Closed, one line; the own run attempted every task, so every approximate one concerns it.
    assert notice.get_attribute("open") is None
    assert summary.bounding_box()["height"] < 30
    approximate = sum("env-approximate" in t.labels for t in verified["tasks"])
    assert approximate > 100
    assert f"{approximate} instance(s) graded here on an approximate environment" in (
        summary.inner_text()
    )
    assert "0 built on this machine" in summary.inner_text()
    assert notice.locator("li").first.is_hidden()
    summary.locator("strong").click()
    assert notice.locator("li").count() == approximate
    assert "(not built on this machine)" in notice.locator("li").first.inner_text()
    assert "were built" not in page.content()
    # The definitions are one line with a link to them.
    definitions = page.locator("#definitions")
    assert definitions.bounding_box()["height"] < 30
    assert definitions.locator("a").get_attribute("href") == "#how-scored"

    # Its own "Exact environments only" link: no approximate instance left, no notice.
    page.click("#exact-only")
    page.wait_for_url("**labels=env-exact**")
    assert page.locator("#approximate-env").count() == 0
    assert page.locator("#leaderboard tbody tr[data-key]").count() == 9

    # Only published rows (graded elsewhere): no notice, and no usage column (none recorded).
    published = ",".join(str(runs[n].public_id)[:8] for n in PUBLISHED)
    page.goto(f"{base}?runs={published}")
    assert page.locator("#leaderboard tbody tr[data-key]").count() == len(PUBLISHED)
    assert page.locator("#approximate-env").count() == 0
    headers = " ".join(page.locator("#leaderboard thead th").all_inner_texts())
    for heading in ("Cost", "Tokens", "Calls", "Wall"):
        assert heading not in headers
    # With the own run (costs known) the usage columns are back.
    page.goto(f"{base}?runs={published},{str(runs[OWN].public_id)[:8]}")
    headers = " ".join(page.locator("#leaderboard thead th").all_inner_texts())
    assert "Cost / attempt" in headers and "Wall / attempt" in headers
    context.close()
    assert errors == []


def test_a_partial_run_is_marked_partial_and_compared_with_the_leader_in_one_click(
    browser, live_server, session, verified
):
    runs = verified["runs"]
    context, page, errors = open_at(browser, session, 1440, 900)
    page.goto(f"{live_server.url}/suites/verified/leaderboard/")
    row = page.locator(f'#leaderboard tr[data-key="{key(runs[PARTIAL])}"]')
    standing = row.locator("td.standing")
    assert "partial: 100 of 500 tasks" in standing.inner_text()
    assert standing.locator(".badge.tied").count() == 0
    assert "tied" not in standing.inner_text()
    # The run's metadata is one line under its name (no squeezed column).
    meta = row.locator(".meta")
    assert meta.bounding_box()["height"] < 20
    assert row.bounding_box()["height"] < 70
    standing.locator("a.compare-leader").click()
    page.wait_for_selector("#matrix")
    assert f"models={key(runs[PUBLISHED[0]])}%2C{key(runs[PARTIAL])}" in page.url or (
        f"models={key(runs[PUBLISHED[0]])},{key(runs[PARTIAL])}" in page.url
    )
    assert "100 tasks both attempted" in page.locator("p.pair").first.inner_text()
    context.close()
    assert errors == []
