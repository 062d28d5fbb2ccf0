"""The platform's database backend: ``DATABASES["default"]["ENGINE"] = "platform_site.db"``."""
