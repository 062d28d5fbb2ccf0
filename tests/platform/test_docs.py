"""The documents a newcomer reads stay true to the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def variables_read() -> set[str]:
    settings = (ROOT / "platform_site/settings.py").read_text()
    gunicorn = (ROOT / "deploy/gunicorn.conf.py").read_text()
    read = set(re.findall(r'env_\w+\(\s*"([A-Z_]+)"', settings))
    read |= set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', gunicorn))
    return read


def test_the_scan_finds_the_variables():
    assert {"DATABASE_URL", "MANAGEMENT_ENDPOINTS_EXPOSURE", "GUNICORN_WORKERS"} <= variables_read()


def test_every_variable_is_in_env_example():
    listed = set(re.findall(r"^([A-Z_]+)=", (ROOT / ".env.example").read_text(), re.M))

    assert variables_read() - listed == set()


def test_every_variable_is_in_the_operations_configuration_table():
    documented = set(re.findall(r"`([A-Z][A-Z_]+)`", (ROOT / "docs/operations.md").read_text()))

    assert variables_read() - documented == set()


def test_the_readme_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()

    assert readme.index("make run") < readme.index("make test") < readme.index("## How it fits")
