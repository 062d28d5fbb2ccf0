"""The apps' imports go one way (README.md, "Where things live"): platform_site (settings, errors,
the server, the rate-limit and metrics machinery, the database) imports no app; health imports
only platform_site; accounts knows nothing of the exchange; the exchange may use accounts. Every
import counts, also one inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

APPS = ("platform_site", "health", "accounts", "exchange")
# What each may import of the others.
ALLOWED = {
    "platform_site": set(),
    "health": {"platform_site"},
    "accounts": {"platform_site"},
    "exchange": {"platform_site", "accounts"},
}


def imported_apps(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` (migrations aside) with the other apps it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = {name for name in names if name in APPS} - {package}
    return found


@pytest.mark.parametrize("package", APPS)
def test_an_app_imports_only_the_layers_below_it(package: str) -> None:
    crossing = {
        module: sorted(apps - ALLOWED[package])
        for module, apps in imported_apps(package).items()
        if apps - ALLOWED[package]
    }
    assert crossing == {}


def test_the_rule_sees_what_it_judges() -> None:
    """The exchange does import accounts: a scan that found nothing would prove nothing."""
    assert any("accounts" in apps for apps in imported_apps("exchange").values())
    assert Path(ROOT / "platform_site" / "urls.py").exists()
