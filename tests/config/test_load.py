"""The configuration file: schema, errors that name the key, defaults, precedence, old inputs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from drods.assembly import ComponentSettings
from drods.config import (
    CONFIG_ENV,
    ConfigError,
    DRODSConfiguration,
    default_yaml,
    load_file,
    parse,
    resolve,
)
from drods.model.placement import DEFAULT_WATER_LEVEL_LIMIT, Placement
from drods.monitor.service import MonitorSettings
from drods.scheduler.profile import Profile

HEAD = "apiVersion: config.drods.io/v1alpha1\nkind: DRODSConfiguration\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_round_trip() -> None:
    text = default_yaml()
    doc = yaml.safe_load(text)
    assert set(doc) == {"apiVersion", "kind", "api", "scheduler", "monitoring", "members", "autoops", "steering",
                        "autoscaling", "datasets", "migration", "encryption"}
    assert parse(doc, "default") == DRODSConfiguration.default()
    assert doc["scheduler"]["profile"]["filters"][0] == "Readiness"  # the profile is spelled out, not null


def test_loading_a_file(tmp_path: Path) -> None:
    cfg = load_file(write(tmp_path / "drods.yaml", HEAD + """
members: {probeIntervalSeconds: 2, tolerationSeconds: 7}
monitoring: {sustainedSeconds: 60}
autoops: {enabled: false}
api: {maxBodyBytes: 4096}
scheduler:
  batchSize: 64
  profile: {name: spread, adjuster: {packBelow: 0.0, spreadAbove: 0.0}}
"""))
    assert (cfg.members.probeIntervalSeconds, cfg.members.tolerationSeconds) == (2.0, 7.0)
    assert cfg.members.notReadyGraceSeconds == 15.0  # untouched knobs keep their default
    assert cfg.monitoring.sustainedSeconds == 60.0 and not cfg.autoops.enabled and cfg.api.maxBodyBytes == 4096
    settings = ComponentSettings.from_config(cfg, identity="me", lease_ttl=3)
    assert settings.scheduler.batch_size == 64 and settings.scheduler.identity == "me"
    assert settings.scheduler.lease_ttl == 3 and settings.lease_ttl == 3
    assert settings.profile is not None and settings.profile.name == "spread"
    assert settings.profile.adjuster.config.spread_above == 0.0
    assert settings.members is cfg.members and settings.autoops is cfg.autoops and settings.api is cfg.api


@pytest.mark.parametrize(("text", "named"), [
    ("monitoring: {fooBar: 1}", "monitoring.fooBar: unknown key"),
    ("fooBar: 1", "fooBar: unknown key"),
    ("scheduler: {profile: {defaults: {fooBar: 1}}}", "scheduler.profile.defaults.fooBar: unknown key"),
    ("autoops: {evacuateFraction: 2}", "autoops.evacuateFraction: Input should be less than or equal to 1"),
    ("members: {probeIntervalSeconds: 0}", "members.probeIntervalSeconds"),
    ("scheduler: {profile: {filters: [NoSuchFilter]}}", "scheduler.profile.filters: unknown filter plugin"),
])
def test_errors_name_the_key(tmp_path: Path, text: str, named: str) -> None:
    path = write(tmp_path / "drods.yaml", HEAD + text)
    with pytest.raises(ConfigError) as e:
        load_file(path)
    assert named in str(e.value) and str(path) in str(e.value)
    assert any(err.startswith(named.split(":")[0] + ":") for err in e.value.errors)


@pytest.mark.parametrize(("text", "named"), [
    ("kind: DRODSConfiguration\n", "apiVersion: required"),
    ("apiVersion: config.drods.io/v1\nkind: DRODSConfiguration\n", "apiVersion: Input should be"),
    ("apiVersion: config.drods.io/v1alpha1\nkind: KubeSchedulerConfiguration\n", "kind: Input should be"),
    ("- a list\n", "must be a YAML mapping"),
    ("members: {probeIntervalSeconds: [\n", "not valid YAML"),
])
def test_header_and_shape_errors(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_file(write(tmp_path / "drods.yaml", text))


def test_one_water_level_limit_for_scheduling_and_evacuation() -> None:
    # One default, the scheduler's: placements and monitoring agree.
    default = DRODSConfiguration.default()
    assert DEFAULT_WATER_LEVEL_LIMIT == 0.85
    assert Placement().waterLevelLimit == MonitorSettings().waterLevelLimit == DEFAULT_WATER_LEVEL_LIMIT
    assert default.scheduler.profile.defaults.waterLevelLimit == DEFAULT_WATER_LEVEL_LIMIT
    assert Profile.default().spec.defaults.waterLevelLimit == DEFAULT_WATER_LEVEL_LIMIT
    # Set in one place, it is the other's too.
    cfg = parse(yaml.safe_load(HEAD + "monitoring: {waterLevelLimit: 0.7}"), "t")
    assert cfg.scheduler.profile.defaults.waterLevelLimit == 0.7
    cfg = parse(yaml.safe_load(HEAD + "scheduler: {profile: {defaults: {waterLevelLimit: 0.75}}}"), "t")
    assert cfg.monitoring.waterLevelLimit == 0.75
    # Set differently in both: refused, naming both.
    with pytest.raises(ConfigError, match="monitoring.waterLevelLimit .0.7. and scheduler.profile.defaults"):
        parse(yaml.safe_load(HEAD + "monitoring: {waterLevelLimit: 0.7}\n"
                                    "scheduler: {profile: {defaults: {waterLevelLimit: 0.9}}}"), "t")


def test_precedence_flag_then_environment_then_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write(data / "drods.yaml", HEAD + "members: {retries: 1}")
    env_file = write(tmp_path / "env.yaml", HEAD + "members: {retries: 2}")
    flag_file = write(tmp_path / "flag.yaml", HEAD + "members: {retries: 3}")
    env = {CONFIG_ENV: str(env_file)}
    assert resolve(data, flag_file, environ=env).config.members.retries == 3
    assert resolve(data, None, environ=env).config.members.retries == 2
    got = resolve(data, None, environ={})
    assert got.config.members.retries == 1 and got.path == data / "drods.yaml"
    nothing = resolve(tmp_path / "empty", None, environ={})
    assert nothing.path is None and nothing.config == DRODSConfiguration.default()
    # A file that is named must exist.
    with pytest.raises(ConfigError, match="--config .*: no such file"):
        resolve(data, tmp_path / "missing.yaml", environ={})
    with pytest.raises(ConfigError, match=f"\\${CONFIG_ENV}.*no such file"):
        resolve(data, None, environ={CONFIG_ENV: str(tmp_path / "missing.yaml")})


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "drods.config" and r.levelno == logging.WARNING]


def test_members_yaml_still_works_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = write(tmp_path / "members.yaml", "probeIntervalSeconds: 1.5\n")
    with caplog.at_level(logging.WARNING, "drods.config"):
        got = resolve(tmp_path, environ={})
    assert got.config.members.probeIntervalSeconds == 1.5 and got.deprecated == (str(old),)
    assert any(str(old) in w and "members" in w for w in _warnings(caplog))


def test_monitor_yaml_and_its_autoops_still_work(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = write(tmp_path / "monitor.yaml", "sustainedSeconds: 42\nautoops: {cooldownSeconds: 5}\n")
    with caplog.at_level(logging.WARNING, "drods.config"):
        cfg = resolve(tmp_path, environ={}).config
    assert cfg.monitoring.sustainedSeconds == 42 and cfg.autoops.cooldownSeconds == 5
    warnings = _warnings(caplog)
    assert any(str(old) in w and "autoops" in w for w in warnings)
    assert any(str(old) in w and "monitoring" in w for w in warnings)


def test_old_profile_inputs_in_their_order(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    write(data / "scheduler-profile.yaml", "name: from-data-dir\n")
    env_profile = write(tmp_path / "env-profile.yaml", "name: from-env\n")
    flag_profile = write(tmp_path / "flag-profile.yaml", "name: from-flag\n")
    env = {"DRODS_SCHEDULER_PROFILE": str(env_profile)}
    with caplog.at_level(logging.WARNING, "drods.config"):
        assert resolve(data, profile=flag_profile, environ=env).config.scheduler.profile.name == "from-flag"
        assert any(f"--profile {flag_profile}" in w for w in _warnings(caplog))
        caplog.clear()
        assert resolve(data, environ=env).config.scheduler.profile.name == "from-env"
        assert any("$DRODS_SCHEDULER_PROFILE" in w and str(env_profile) in w for w in _warnings(caplog))
        caplog.clear()
        assert resolve(data, environ={}).config.scheduler.profile.name == "from-data-dir"
        assert any(str(data / "scheduler-profile.yaml") in w for w in _warnings(caplog))


def test_the_new_file_wins_where_both_say_something(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old_members = write(tmp_path / "members.yaml", "probeIntervalSeconds: 1.5\nretries: 4\n")
    old_profile = write(tmp_path / "scheduler-profile.yaml", "name: old\nadjuster: {packBelow: 0.1}\n")
    new = write(tmp_path / "drods.yaml", HEAD + "members: {probeIntervalSeconds: 9}\n"
                                               "scheduler: {profile: {name: new}}\n")
    with caplog.at_level(logging.WARNING, "drods.config"):
        cfg = resolve(tmp_path, environ={}).config
    assert cfg.members.probeIntervalSeconds == 9  # the new file's
    assert cfg.members.retries == 4  # only the old file says it
    assert cfg.scheduler.profile.name == "new" and cfg.scheduler.profile.adjuster.packBelow == 0.1
    warnings = _warnings(caplog)
    assert any(str(old_members) in w and "members.probeIntervalSeconds" in w and str(new) in w for w in warnings)
    assert any(str(old_profile) in w and "scheduler.profile.name" in w for w in warnings)


def test_errors_in_old_inputs_name_the_old_file(tmp_path: Path) -> None:
    old = write(tmp_path / "monitor.yaml", "autoops: {fooBar: true}\n")
    with pytest.raises(ConfigError) as e:
        resolve(tmp_path, environ={})
    assert e.value.source == str(old) and e.value.errors == ["autoops.fooBar: unknown key"]
    old.unlink()
    write(tmp_path / "members.yaml", "probeIntervalSecs: 1\n")
    with pytest.raises(ConfigError, match="members.yaml.*probeIntervalSecs: unknown key"):
        resolve(tmp_path, environ={})


def test_dev_up_writes_a_drods_yaml_that_keeps_edits(tmp_path: Path) -> None:
    from drods.cli.dev import write_config

    path = tmp_path / "drods.yaml"
    write_config(path, 1.0, 3.0, None, spread=True)
    cfg = load_file(path)
    assert (cfg.members.probeIntervalSeconds, cfg.members.notReadyGraceSeconds) == (1.0, 3.0)
    assert cfg.members.tolerationSeconds == 30.0 and cfg.scheduler.profile.name == "dev-spread"
    assert not (tmp_path / "members.yaml").exists() and not (tmp_path / "scheduler-profile.yaml").exists()
    doc = yaml.safe_load(path.read_text())
    doc["scheduler"]["profile"]["name"] = "edited"
    doc["autoops"] = {"enabled": False}
    path.write_text(yaml.safe_dump(doc))
    write_config(path, None, None, 9.0, spread=True)  # a restart with other flags
    cfg = load_file(path)
    assert cfg.scheduler.profile.name == "edited" and not cfg.autoops.enabled
    assert (cfg.members.probeIntervalSeconds, cfg.members.tolerationSeconds) == (1.0, 9.0)
    packed = tmp_path / "packed.yaml"
    write_config(packed, None, None, None, spread=False)
    assert load_file(packed).scheduler.profile == DRODSConfiguration.default().scheduler.profile
