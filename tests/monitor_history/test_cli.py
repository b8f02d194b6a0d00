"""``--history-prometheus`` on the processes that keep metric history selects the Prometheus backend
(on top of the configuration, here the deprecated ``monitor.yaml``); without it the SQLite default stays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import drods.cli.components as components
import drods.server as server
from drods.cli.main import app
from drods.monitor.service import MonitorSettings


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What each server command would run with, instead of running it."""
    got: dict[str, Any] = {}
    monkeypatch.setattr(server, "run", lambda config: got.update(settings=config.settings))
    monkeypatch.setattr(components, "run_process", lambda name, comps, store, data_dir, settings, **kw:
                        got.update(settings=settings))
    return got


@pytest.mark.parametrize("command", ["serve", "apiserver", "controllers"])
def test_history_prometheus_option(tmp_path: Path, captured: dict[str, Any], command: str) -> None:
    (tmp_path / "monitor.yaml").write_text("heartbeatSeconds: 9\n")
    args = [command, "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--history-prometheus", "http://prom:9090"])
    assert result.exit_code == 0, result.output
    monitoring: MonitorSettings = captured["settings"].monitoring
    assert (monitoring.historyBackend, monitoring.historyPrometheusUrl) == ("prometheus", "http://prom:9090")
    assert monitoring.heartbeatSeconds == 9  # the rest of monitor.yaml still applies

    captured.clear()
    assert CliRunner().invoke(app, args).exit_code == 0
    plain: MonitorSettings = captured["settings"].monitoring
    assert (plain.historyBackend, plain.heartbeatSeconds) == ("sqlite", 9)  # monitor.yaml, SQLite history
