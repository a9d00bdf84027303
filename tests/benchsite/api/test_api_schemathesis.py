"""Property-based run of every API operation from the OpenAPI schema: no server errors.

Schemathesis generates valid and invalid requests for each operation (bounded to a few dozen
examples) and sends them through the real WSGI application with a valid token, so writes
(launches, imports, token creation) are exercised too, against seeded data.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from benchsite.wsgi import application

MAX_EXAMPLES = 20


@pytest.fixture
def live_wsgi(db, settings, tmp_path):
    """Run requests the way a server would, but inside the test's transaction."""
    settings.API_WRITE_RATE = "100000/min"
    settings.API_UPLOADS_ROOT = tmp_path / "uploads"
    settings.ANONYMOUS_READ_ARTIFACTS = False
    # Django's WSGI handler closes connections around each request; inside the test's
    # transaction that would end it. The test client disconnects the same signals.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(live_wsgi):
    # Fetched through the application too, so only once the connection is safe to keep.
    return schemathesis.openapi.from_wsgi("/api/openapi.json", application)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.slow
def test_no_operation_answers_with_a_server_error(case, seeded, alice_token):
    response = case.call(headers={"Authorization": f"Bearer {alice_token}"})
    case.validate_response(response, checks=[not_a_server_error])
    assert response.status_code < 500
