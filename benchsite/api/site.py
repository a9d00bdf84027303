"""The REST API: one NinjaAPI at /api/, one router per app, schema at /api/openapi.json."""

from __future__ import annotations

from ninja import NinjaAPI

from benchsite.accounts.api import router as accounts_router
from benchsite.api.errors import install_error_handlers
from runs.api.agents import router as agents_router
from runs.api.runs import router as runs_router
from runs.bundles.api import router as bundles_router
from runs.imports.api import router as imports_router
from runs.search.api import router as search_router
from tasks_app.api import router as tasks_router

api = NinjaAPI(
    title="AgentBench API",
    version="1.0.0",
    description=(
        "Read suites, tasks, runs, attempts, leaderboards, comparisons and the failure "
        "taxonomy; launch, cancel and retry runs; import tasks and SWE-bench files. "
        "Authenticate with `Authorization: Bearer <token>` (tokens at /account/tokens/) "
        "or a signed-in session plus the CSRF token."
    ),
    urls_namespace="api",
)
install_error_handlers(api)
api.add_router("", tasks_router)
# Right after the tasks router, whose tag they share: the schema lists the paths as before.
api.add_router("", imports_router)
api.add_router("", runs_router)
api.add_router("", agents_router)
api.add_router("", bundles_router)
api.add_router("", accounts_router)
api.add_router("", search_router)
