"""Issue 28, degraded item: password guessing. Before, 40 wrong passwords in a row were all
answered and the 41st, right, signed in. Now LOGIN_FAILURE_LIMIT failures for one username from
one address lock that pair out for LOGIN_LOCKOUT_SEC, the right password included, on the site's
login page and the admin's, with a message saying so (benchsite/accounts/throttle.py)."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

LOCKED = "Too many failed sign-ins for &#x27;dave&#x27; from your address"


@pytest.fixture(autouse=True)
def limits(settings):
    cache.clear()  # counts live in the cache, which outlives a test's database
    settings.LOGIN_FAILURE_LIMIT = 5
    settings.LOGIN_LOCKOUT_SEC = 900
    yield settings
    cache.clear()


def sign_in(client: Client, password: str, username: str = "dave", where: str = "account-login"):
    return client.post(reverse(where), {"username": username, "password": password})


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_forty_wrong_passwords_then_the_right_one_does_not_sign_in(dave):
    client = Client()
    answers = [sign_in(client, f"guess-{i}").status_code for i in range(40)]
    assert answers[:4] == [200] * 4  # "enter a correct username and password"
    assert set(answers[4:]) == {429}
    right = sign_in(client, "dave-password")
    assert right.status_code == 429 and LOCKED in right.content.decode()
    assert not signed_in(client)


def test_the_limit_th_failure_says_so_and_other_pairs_are_untouched(dave, bob):
    client = Client()
    for _ in range(4):
        wrong = sign_in(client, "nope")
        assert wrong.status_code == 200
        assert "correct username and password" in wrong.content.decode()
    fifth = sign_in(client, "nope")
    assert fifth.status_code == 429 and LOCKED in fifth.content.decode()
    # Another account from the same address, and the same account from another address.
    assert sign_in(Client(), "bob-password", username="bob").status_code == 302
    elsewhere = Client(REMOTE_ADDR="192.0.2.7")
    assert sign_in(elsewhere, "dave-password").status_code == 302 and signed_in(elsewhere)


def test_a_success_forgets_the_failures_before_it(dave):
    client = Client()
    for _ in range(4):
        sign_in(client, "nope")
    assert sign_in(client, "dave-password").status_code == 302
    client.logout()
    for _ in range(4):
        assert sign_in(client, "nope").status_code == 200
    assert sign_in(client, "dave-password").status_code == 302


def test_the_admin_login_is_locked_out_alike(alice):
    client = Client()
    for _ in range(5):
        page = sign_in(client, "nope", username="alice", where="admin:login")
    assert "Too many failed sign-ins for &#x27;alice&#x27;" in page.content.decode()
    right = sign_in(client, "alice-password", username="alice", where="admin:login")
    assert right.status_code == 200 and not signed_in(client)
    # The lock is the pair's, whichever page: the site's login refuses alice too.
    assert sign_in(client, "alice-password", username="alice").status_code == 429


def test_the_lock_ends_after_its_period(dave, monkeypatch):
    from django.core.cache.backends import locmem

    client = Client()
    for _ in range(5):
        sign_in(client, "nope")
    assert sign_in(client, "dave-password").status_code == 429
    # The cache's clock moves past the lock's period (900 s): its entry expires.
    later = time.time() + 901
    monkeypatch.setattr(locmem.time, "time", lambda: later)
    assert sign_in(client, "dave-password").status_code == 302 and signed_in(client)
