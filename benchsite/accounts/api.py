"""API tokens and the audit log over the REST API."""

import datetime as dt
import uuid
from typing import Annotated

from django.db.models import Q
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, FilterLookup, FilterSchema, Query, Router, Schema, Status
from ninja.pagination import paginate

from benchsite.accounts.auth import AUTHENTICATED, write_auth, write_throttle
from benchsite.accounts.models import Action, ApiToken, AuditEvent, Door
from benchsite.accounts.services import TOKEN_NAME_MAX, api_token_create, api_token_revoke
from benchsite.api.common import Pages, Text
from benchsite.api.errors import ErrorOut

router = Router(tags=["access"])


class ApiTokenOut(Schema):
    public_id: uuid.UUID
    name: str
    prefix: str
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    revoked_at: dt.datetime | None


class ApiTokenCreatedOut(ApiTokenOut):
    token: str = Field(description="The token itself. Shown only in this response.")


class ApiTokenIn(Schema):
    name: Text = Field(min_length=1, max_length=TOKEN_NAME_MAX)


class TokenFilter(FilterSchema):
    revoked: bool | None = Field(None, description="true: revoked tokens only; false: active")

    def filter_revoked(self, value: bool | None) -> Q:
        return Q() if value is None else Q(revoked_at__isnull=not value)


class AuditEventOut(Schema):
    id: int
    created_at: dt.datetime
    actor: str = Field(alias="actor_name")
    action: str
    via: str
    object_type: str
    object_ids: list
    details: dict
    ip: str | None


class AuditFilter(FilterSchema):
    action: Action | None = None
    since: Annotated[dt.datetime | None, FilterLookup("created_at__gte")] = None


@router.get(
    "/tokens",
    response={200: list[ApiTokenOut], 401: ErrorOut},
    auth=AUTHENTICATED,
    summary="List your API tokens",
)
@paginate(Pages)
def token_list(request: HttpRequest, filters: Query[TokenFilter]):
    return filters.filter(ApiToken.objects.for_user(request.user))


@router.post(
    "/tokens",
    response={
        201: ApiTokenCreatedOut,
        400: ErrorOut,
        401: ErrorOut,
        403: ErrorOut,
        422: ErrorOut,
        429: ErrorOut,
    },
    auth=write_auth(Action.TOKEN_CREATE),
    throttle=write_throttle,
    summary="Create an API token (the token is in this response only)",
)
def token_create(request: HttpRequest, payload: ApiTokenIn):
    token, raw = api_token_create(
        user=request.user, name=payload.name, door=Door.API, request=request
    )
    return Status(201, ApiTokenCreatedOut(**ApiTokenOut.from_orm(token).dict(), token=raw))


@router.post(
    "/tokens/{public_id}/revoke",
    response={200: ApiTokenOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut},
    auth=write_auth(Action.TOKEN_REVOKE),
    throttle=write_throttle,
    summary="Revoke one of your API tokens",
)
def token_revoke(request: HttpRequest, public_id: uuid.UUID):
    token = get_object_or_404(ApiToken.objects.for_user(request.user), public_id=public_id)
    return api_token_revoke(token=token, by=request.user, door=Door.API, request=request)


@router.get(
    "/audit-events",
    response={200: list[AuditEventOut], 401: ErrorOut},
    auth=AUTHENTICATED,
    summary="Audit events: your own, or everyone's for staff",
)
@paginate(Pages)
def audit_event_list(request: HttpRequest, filters: Query[AuditFilter]):
    events = AuditEvent.objects.all()
    if not request.user.is_staff:
        # auth=AUTHENTICATED: never the AnonymousUser the request's type allows.
        events = events.filter(actor=request.user)  # type: ignore[misc]
    return filters.filter(events)
