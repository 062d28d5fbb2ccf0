"""docs/cabinet.md shows every screenshot the browser tests take, and only those."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_cabinet_guide_shows_every_screenshot_and_only_existing_ones():
    shown = set(re.findall(r"\]\((screenshots/[^)]+\.png)\)", (DOCS / "cabinet.md").read_text()))
    taken = {f"screenshots/{path.name}" for path in (DOCS / "screenshots").glob("*.png")}

    assert shown
    assert shown == taken
