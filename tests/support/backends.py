"""The sandbox backends as test parameters, each carrying its own marker.

A marker added while a fixture sets up comes too late for ``-m``: the test is already
selected. As ``pytest.param(..., marks=...)`` the marker is there at collection, so
``-m "not docker"`` deselects the Docker half of a backend-parametrized test and
``-m "not bwrap"`` the bubblewrap half.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from sandbox import BACKENDS


def backend_params(names: Iterable[str] = BACKENDS) -> list:
    """One parameter per backend, id and marker named after it (``docker``, ``bwrap``)."""
    return [pytest.param(name, marks=getattr(pytest.mark, name), id=name) for name in names]


@pytest.fixture(params=backend_params())
def backend(request: pytest.FixtureRequest) -> str:
    """The sandbox backend a test runs on: each test that takes it runs once per backend."""
    return request.param
