from django.apps import AppConfig


class ExchangeConfig(AppConfig):
    name = "exchange"
    verbose_name = "Exchange"

    def ready(self) -> None:
        from exchange.metrics import QueueCollector
        from health.metrics import register_scrape_collector

        register_scrape_collector(QueueCollector())
