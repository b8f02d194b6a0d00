"""docs/configuration.md states the scheduler profile's default plugins: they are the code's (the
page had gone without UserLatencySLO and UserLatency after they joined the default profile)."""

from __future__ import annotations

import re
from pathlib import Path

from drods.scheduler.profile import DEFAULT_FILTERS, DEFAULT_SCORES

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _default(knob: str) -> str:
    row = next(line for line in DOC.read_text().splitlines() if line.startswith(f"| `{knob}` |"))
    return row.split("|")[2].strip().strip("`")


def test_the_documented_default_plugins_are_the_codes() -> None:
    assert _default("filters") == f"[{', '.join(DEFAULT_FILTERS)}]"
    scores = dict((k, float(v)) for k, v in re.findall(r"(\w+): ([\d.]+)", _default("scores")))
    assert scores == dict(DEFAULT_SCORES)
