from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "health"
    verbose_name = "Health and metrics"

    def ready(self) -> None:
        from health.metrics import DatabaseCollector
        from platform_site.metrics import register_scrape_collector

        register_scrape_collector(DatabaseCollector())
