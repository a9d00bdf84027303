"""The site's login page (for every account, not only staff) and the token page, where a
signed-in user creates and revokes their own API tokens (``Action.TOKEN_CREATE`` and
``TOKEN_REVOKE``, the same right as ``POST /api/tokens``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.views import LoginView
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from benchsite.accounts.access import write_view
from benchsite.accounts.models import Action, ApiToken, Door
from benchsite.accounts.services import TokenError, api_token_create, api_token_revoke
from benchsite.accounts.throttle import SiteAuthenticationForm


class SiteLoginView(LoginView):
    """Username and password, then back to ``next``. The admin keeps its own login for staff."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True
    form_class = SiteAuthenticationForm  # password guessing locks out (accounts/throttle.py)

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.has_error(NON_FIELD_ERRORS, code="locked"):
            response.status_code = 429
        return response


def _tokens_page(
    request: HttpRequest, *, new_token: str = "", error: str = "", status: int = 200
) -> HttpResponse:
    tokens = ApiToken.objects.for_user(request.user).order_by("-created_at")
    context = {"tokens": tokens, "new_token": new_token, "error": error}
    return render(request, "accounts/tokens.html", context, status=status)


@require_http_methods(["GET", "POST"])
@write_view(Action.TOKEN_CREATE)
def token_list(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _tokens_page(request)
    try:
        _, raw = api_token_create(
            user=request.user, name=request.POST.get("name", ""), door=Door.PAGE, request=request
        )
    except TokenError as exc:
        return _tokens_page(request, error=f"{exc.field}: {exc}", status=400)
    # Rendered, not redirected: the token exists in clear only in this one response.
    return _tokens_page(request, new_token=raw)


@require_POST
@write_view(Action.TOKEN_REVOKE)
def token_revoke(request: HttpRequest, public_id: str) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.for_user(request.user), public_id=public_id)
    api_token_revoke(token=token, by=request.user, door=Door.PAGE, request=request)
    messages.success(request, f"Revoked token {token.name} ({token.prefix}…).")
    return redirect("account-tokens")
