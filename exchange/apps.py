from django.apps import AppConfig


class ExchangeConfig(AppConfig):
    name = "exchange"
    verbose_name = "Exchange"

    def ready(self) -> None:
        from exchange.metrics import QueueCollector
        from platform_site.metrics import register_scrape_collector

        register_scrape_collector(QueueCollector())

    def serving(self) -> None:
        """On each server process's event loop as it starts (platform_site.asgi): the listener
        that wakes long polls and streams, and the webhook deliverer unless it runs on its own
        (EXCHANGE_WEBHOOK_DELIVERY_SEPARATE)."""
        from django.conf import settings

        from exchange.wakeups import wakeups
        from exchange.webhooks.delivery import deliver_while_serving

        wakeups.start()
        if not settings.EXCHANGE_WEBHOOK_DELIVERY_SEPARATE:
            deliver_while_serving()
