"""The platform's settings with the benchmark's URLs: the API plus a bare Django view."""

from platform_site.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
