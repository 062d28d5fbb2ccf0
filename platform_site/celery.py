"""The Celery application: settings from Django's CELERY_* names, tasks from every app."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

app = Celery("platform_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
