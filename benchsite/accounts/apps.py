from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "benchsite.accounts"
    label = "accounts"
    verbose_name = "Access control"
