"""docs/cabinet.md shows every screenshot the browser tests take, and only those, and says which
wrong passwords the sign-in page warns after."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from accounts.web.flows import FEW_ATTEMPTS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_cabinet_guide_shows_every_screenshot_and_only_existing_ones():
    shown = set(re.findall(r"\]\((screenshots/[^)]+\.png)\)", (DOCS / "cabinet.md").read_text()))
    taken = {f"screenshots/{path.name}" for path in (DOCS / "screenshots").glob("*.png")}

    assert shown
    assert shown == taken


ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth"}


def test_the_sign_in_row_names_the_wrong_passwords_that_count_down_and_the_one_that_locks():
    guide = (DOCS / "cabinet.md").read_text()
    row = next(line for line in guide.splitlines() if line.startswith("| `/login` |"))
    threshold = settings.ACCOUNTS_LOCKOUT_THRESHOLD
    warning = [ORDINALS[n] for n in range(threshold - FEW_ATTEMPTS, threshold)]

    assert f"The {warning[0]} and the {warning[1]} wrong password in a row say how many" in row
    assert f"the {ORDINALS[threshold]} in a row says the account is now locked" in row
