"""WSGI entry point of the benchmark's gunicorn: the platform with bench.settings."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

application = get_wsgi_application()
