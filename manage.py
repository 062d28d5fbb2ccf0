#!/usr/bin/env python
"""Django's command-line utility; starts the embedded PostgreSQL when DATABASE_URL is unset."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
    from platform_site.embedded import ensure_database_url

    ensure_database_url()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
