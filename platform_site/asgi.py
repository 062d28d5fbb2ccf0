"""ASGI entry point. It never starts the embedded PostgreSQL: set DATABASE_URL."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

application = get_asgi_application()
