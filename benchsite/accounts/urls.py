from django.contrib.auth import views as auth_views
from django.urls import path

from benchsite.accounts import views

urlpatterns = [
    path("account/login/", views.SiteLoginView.as_view(), name="account-login"),
    path("account/logout/", auth_views.LogoutView.as_view(), name="account-logout"),
    path("account/tokens/", views.token_list, name="account-tokens"),
    path(
        "account/tokens/<uuid:public_id>/revoke/", views.token_revoke, name="account-token-revoke"
    ),
]
