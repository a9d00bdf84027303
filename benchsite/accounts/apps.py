from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "benchsite.accounts"
    label = "accounts"
    verbose_name = "Access control"

    def ready(self) -> None:
        from benchsite.accounts import throttle

        throttle.connect()
