from django.urls import path

from benchsite.accounts import views

urlpatterns = [
    path("account/tokens/", views.token_list, name="account-tokens"),
    path(
        "account/tokens/<uuid:public_id>/revoke/", views.token_revoke, name="account-token-revoke"
    ),
]
