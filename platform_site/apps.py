from django.apps import AppConfig


class PlatformSiteConfig(AppConfig):
    name = "platform_site"
    verbose_name = "Platform"

    def ready(self) -> None:
        from platform_site import checks  # noqa: F401  (registers the deploy checks)
