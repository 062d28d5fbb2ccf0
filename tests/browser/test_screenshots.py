"""`make test` leaves the checkout as it was: the browser tests' screenshots go to pytest's
temporary folder, and only `make screenshots` renders docs/screenshots."""

from __future__ import annotations

import re
from pathlib import Path

from tests.browser.conftest import SCREENSHOTS_DIR, Screenshots

ROOT = Path(__file__).resolve().parents[2]


def test_screenshots_stay_out_of_the_checkout_unless_make_screenshots_asks(
    screenshots: Screenshots,
) -> None:
    if SCREENSHOTS_DIR:  # make screenshots
        assert screenshots.folder == (ROOT / "docs" / "screenshots").resolve()
    else:
        assert not screenshots.folder.resolve().is_relative_to(ROOT)


def test_only_the_screenshots_target_names_the_docs_folder() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = dict(re.findall(r"^([a-z-]+):[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.M))

    assert "SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots" in targets["screenshots"]
    assert "SCREENSHOTS_DIR" not in targets["pytest"]
    assert "SCREENSHOTS_DIR" not in makefile.replace(targets["screenshots"], "")
