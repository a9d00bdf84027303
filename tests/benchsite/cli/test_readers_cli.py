"""``ab add-reader``: an account joins the readers group from the command line."""

from __future__ import annotations

import pytest

from benchsite.accounts.access import can_read_artifacts
from tests.support.ab_cli import ab_main

pytestmark = pytest.mark.django_db


def test_it_makes_a_reader_account_and_adds_an_existing_one(dave, django_user_model, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    assert not can_read_artifacts(dave)
    assert ab_main("add-reader", "dave").returncode == 0
    dave = django_user_model.objects.get(username="dave")
    assert can_read_artifacts(dave)
    made = ab_main("add-reader", "erin", "--create")
    assert made.returncode == 0
    out = made.stdout
    password = out.split("password '", 1)[1].split("'", 1)[0]
    erin = django_user_model.objects.get(username="erin")
    assert erin.check_password(password) and can_read_artifacts(erin) and not erin.is_staff


def test_an_unknown_account_is_named_and_nothing_is_made(django_user_model, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    refused = ab_main("add-reader", "nobody")
    assert refused.returncode == 1
    assert "no account named 'nobody' (add --create to make one)" in refused.stderr
    assert not django_user_model.objects.filter(username="nobody").exists()
