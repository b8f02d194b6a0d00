"""``python -m drods`` and ``python -m drods.cli.main`` run the ``drods`` command (the second printed
nothing and exited 0: a walkthrough's wrapper ran no command at all)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["drods", "drods.cli.main"])
def test_the_package_runs_as_the_drods_command(module: str) -> None:
    done = subprocess.run([sys.executable, "-m", module, "token", "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "Usage: drods token" in done.stdout, done.stdout
    bad = subprocess.run([sys.executable, "-m", module, "no-such-command"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert bad.returncode != 0 and "No such command" in bad.stderr, (bad.stdout, bad.stderr)
