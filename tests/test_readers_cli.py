"""``ab add-reader``: an account joins the readers group from the command line."""

from __future__ import annotations

import pytest

from benchsite.accounts.access import can_read_artifacts
from benchsite.cli.main import main

pytestmark = pytest.mark.django_db


def test_it_makes_a_reader_account_and_adds_an_existing_one(
    capsys, dave, django_user_model, settings
):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    assert not can_read_artifacts(dave)
    assert main(["add-reader", "dave"]) == 0
    dave = django_user_model.objects.get(username="dave")
    assert can_read_artifacts(dave)
    assert main(["add-reader", "erin", "--create"]) == 0
    out = capsys.readouterr().out
    password = out.split("password '", 1)[1].split("'", 1)[0]
    erin = django_user_model.objects.get(username="erin")
    assert erin.check_password(password) and can_read_artifacts(erin) and not erin.is_staff


def test_an_unknown_account_is_named_and_nothing_is_made(capsys, django_user_model, settings):
    settings.ANONYMOUS_READ_ARTIFACTS = False
    assert main(["add-reader", "nobody"]) == 1
    assert "no account named 'nobody' (add --create to make one)" in capsys.readouterr().err
    assert not django_user_model.objects.filter(username="nobody").exists()
