"""The ``autoscaling`` section of the configuration file reaches the autoscaler's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from drods.assembly import ComponentSettings
from drods.autoscaling.controller import AutoscalerSettings
from drods.config.load import load_file


def test_the_section_reaches_the_autoscaler(tmp_path: Path) -> None:
    path = tmp_path / "drods.yaml"
    path.write_text("apiVersion: config.drods.io/v1alpha1\nkind: DRODSConfiguration\n"
                    "autoscaling: {syncSeconds: 5, forecastHorizonSeconds: 0, feedback: {cooldownSeconds: 10}}\n")
    s = ComponentSettings.from_config(load_file(path)).autoscaling
    assert (s.sync_seconds, s.forecast_horizon_s, s.feedback.cooldown_s) == (5.0, 0.0, 10.0)
    assert s.feedback.kp == AutoscalerSettings().feedback.kp  # untouched knobs keep their default


def test_unknown_knob_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "drods.yaml"
    path.write_text("apiVersion: config.drods.io/v1alpha1\nkind: DRODSConfiguration\n"
                    "autoscaling: {syncSecs: 5}\n")
    with pytest.raises(Exception, match="syncSecs"):
        load_file(path)
