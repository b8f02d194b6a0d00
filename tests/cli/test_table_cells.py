"""A table cell is shown as it is: square brackets in a reason are text, not Rich markup."""

from __future__ import annotations

import pytest

from drods.cli.remote import print_table


def test_a_cell_with_square_brackets_is_printed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(["cluster", "why not"], [["edge-1", "provider not in [aws, azure, gcp]"], ["b", "[bold]x[/bold]"]])
    out = capsys.readouterr().out
    assert "provider not in [aws, azure, gcp]" in out
    assert "[bold]x[/bold]" in out
