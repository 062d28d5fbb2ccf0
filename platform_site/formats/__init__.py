"""Django's formats for the platform's languages (FORMAT_MODULE_PATH), where they differ from
Django's own: a date and time Django renders by itself (the administration's columns, read-only
fields and history) says its zone, in one form for every language, as the cabinet's times do
(platform_site.timestamps): 2026-11-21 09:30:05 UTC. A time without its zone is a time misread.
"""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
