"""``drods token create`` refuses a lifetime it cannot mint, as an option error, not a traceback."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from drods.cli.main import app


def test_a_negative_ttl_is_an_option_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["token", "create", "--role", "admin", "--ttl", "-5", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "Invalid value for '--ttl'" in r.output, r.output  # typer's usage error
    assert not (tmp_path / "drods.db").exists()  # nothing minted, nothing recorded
