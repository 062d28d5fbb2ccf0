from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from accounts import liveness, schema  # noqa: F401  (schema: the OpenAPI security scheme)

        liveness.connect()
