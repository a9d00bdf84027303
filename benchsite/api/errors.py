"""The API's error bodies and the handlers that turn exceptions into them.

Every error is JSON ``{"detail": ..., "errors": [{"field", "location", "message"}]}`` with a
4xx status naming what was wrong. Nothing a client sends should produce a 500.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, Throttled
from ninja.errors import ValidationError as NinjaValidationError

from benchsite.accounts.services import TokenError
from tasks_app.spec import TaskSpecError
from tasks_app.swebench.errors import SwebenchInputError
from tasks_app.uploads.archives import ArchiveLimitError


class FieldError(Schema):
    field: str
    location: str = ""
    message: str


class ErrorOut(Schema):
    detail: str
    errors: list[FieldError] = []


class ApiInputError(Exception):
    """Bad input the endpoint found itself (an unknown suite name, a malformed list...)."""

    def __init__(self, field: str, message: str, *, status: int = 400, location: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.status = status
        self.location = location


class ApiConflict(Exception):
    """The request is valid but the object's state forbids it (cancel a finished run...)."""


def _respond(api: NinjaAPI, request: HttpRequest, status: int, detail: str, errors=()) -> Any:
    body = ErrorOut(detail=detail, errors=list(errors)).dict()
    return api.create_response(request, body, status=status)


# Parameter locations ninja reports first in ``loc``; the rest of the path is the field.
_LOCATIONS = {"query", "path", "body", "form", "file", "header", "cookie"}


def _field_errors(errors: list[dict[str, Any]]) -> list[FieldError]:
    out = []
    for err in errors:
        loc = [str(part) for part in err.get("loc", ())]
        location = loc[0] if loc and loc[0] in _LOCATIONS else ""
        parts = loc[1:] if location else loc
        # ninja nests a body or query schema under its argument name: drop that wrapper.
        if location in {"body", "query", "form"} and len(parts) > 1:
            parts = parts[1:]
        out.append(
            FieldError(
                field=".".join(parts) or location, location=location, message=str(err.get("msg"))
            )
        )
    return out


def install_error_handlers(api: NinjaAPI) -> None:
    @api.exception_handler(NinjaValidationError)
    def validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
        errors = _field_errors(exc.errors)
        detail = "; ".join(f"{e.field}: {e.message}" for e in errors) or "invalid input"
        return _respond(api, request, 422, detail, errors)

    @api.exception_handler(ApiInputError)
    def input_error(request: HttpRequest, exc: ApiInputError) -> HttpResponse:
        error = FieldError(field=exc.field, location=exc.location, message=exc.message)
        return _respond(api, request, exc.status, f"{exc.field}: {exc.message}", [error])

    @api.exception_handler(ArchiveLimitError)
    def archive_limit(request: HttpRequest, exc: ArchiveLimitError) -> HttpResponse:
        error = FieldError(field="file", location=exc.member, message=str(exc))
        return _respond(api, request, 413, f"file: {exc}", [error])

    @api.exception_handler(TokenError)
    def token_error(request: HttpRequest, exc: TokenError) -> HttpResponse:
        error = FieldError(field=exc.field, location="body", message=str(exc))
        return _respond(api, request, 400, f"{exc.field}: {exc}", [error])

    @api.exception_handler(ApiConflict)
    def conflict(request: HttpRequest, exc: ApiConflict) -> HttpResponse:
        return _respond(api, request, 409, str(exc))

    @api.exception_handler(TaskSpecError)
    def task_spec_error(request: HttpRequest, exc: TaskSpecError) -> HttpResponse:
        errors = [
            FieldError(
                field=problem.field or "file",
                location=f"{problem.file}:{problem.line}" if problem.line else problem.file,
                message=problem.message,
            )
            for problem in exc.problems
        ]
        return _respond(api, request, 400, "invalid task files:\n" + str(exc), errors)

    @api.exception_handler(SwebenchInputError)
    def swebench_error(request: HttpRequest, exc: SwebenchInputError) -> HttpResponse:
        errors = [
            # A problem with no field but a bare name for "where" is about that parameter.
            FieldError(
                field=p.field or (p.where if p.where.isidentifier() else "file"),
                location=p.where,
                message=p.message,
            )
            for p in exc.problems
        ]
        return _respond(api, request, 400, str(exc), errors)

    @api.exception_handler(DjangoValidationError)
    def model_validation_error(request: HttpRequest, exc: DjangoValidationError) -> HttpResponse:
        if hasattr(exc, "error_dict"):
            errors = [
                FieldError(field=name, location="body", message=" ".join(messages))
                for name, messages in exc.message_dict.items()
            ]
        else:
            errors = [FieldError(field="", location="body", message=m) for m in exc.messages]
        detail = "; ".join(f"{e.field}: {e.message}" if e.field else e.message for e in errors)
        return _respond(api, request, 400, detail, errors)

    @api.exception_handler(Http404)
    def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
        return _respond(api, request, 404, str(exc) or "not found")

    @api.exception_handler(PermissionDenied)
    def forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
        return _respond(api, request, 403, str(exc) or "forbidden")

    @api.exception_handler(Throttled)
    def throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
        return _respond(api, request, 429, "write rate limit exceeded (API_WRITE_RATE)")

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        message = str(exc.message) if exc.message != "Unauthorized" else "authentication required"
        response = _respond(api, request, 401, message)
        response["WWW-Authenticate"] = 'Bearer realm="agentbench"'
        return response

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        return _respond(api, request, exc.status_code, str(exc))
