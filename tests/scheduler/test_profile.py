"""Profile YAML loading/validation and third-party plugins through entry points (S8)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from drods.scheduler import Profile, ProfileError, Scheduler, Snapshot, load_entry_points
from drods.scheduler.registry import filter_plugins, score_plugins
from tests.scheduler.conftest import add, task

YAML = """
name: latency-first
filters: [Readiness, ResourceFit, WaterLevelLimit]
scores:
  LeastWaterLevel: 2
  NetworkLocality: 1
  Cost: 0
pluginArgs:
  TopologyPreference: {regionScore: 50}
adjuster:
  packBelow: 0.2
  spreadAbove: 0.7
  packMultipliers: {LeastWaterLevel: 0.25}
  surgeGain: {NetworkLocality: 4}
defaults:
  waterLevelLimit: 0.9
  division: Aggregated
  seed: 42
"""


def test_load_yaml_profile(tmp_path: Path) -> None:
    p = tmp_path / "profile.yaml"
    p.write_text(YAML)
    prof = Profile.load(p)
    assert prof.name == "latency-first"
    assert [f.name for f in prof.filters] == ["Readiness", "ResourceFit", "WaterLevelLimit"]
    assert [(s.name, w) for s, w in prof.scores] == [("LeastWaterLevel", 2.0), ("NetworkLocality", 1.0)]
    # Readiness too: a cordoned cluster the workload runs on keeps its replicas and fits no more
    assert len(prof.estimators) == 3
    assert prof.adjuster.config.pack_below == 0.2
    assert prof.adjuster.adjust(0.0).weights["LeastWaterLevel"] == 0.5
    assert prof.adjuster.adjust(1.0, surge=1.0).weights["NetworkLocality"] == 5.0
    # defaults apply: limit 0.9 from the profile, Aggregated division, seeded RNG
    snap = Snapshot()
    add(snap, "a")
    add(snap, "b")
    r = Scheduler(prof).schedule(task(replicas=88), snap)
    assert r.division == "Aggregated" and r.placed == 88 and len(r.placement) == 1
    assert Profile.from_yaml(prof.to_yaml()).spec == prof.spec


def test_default_profile_and_empty_yaml() -> None:
    assert Profile.from_yaml("").spec == Profile.default().spec
    assert "WaterLevelLimit" in [f.name for f in Profile.default().filters]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("filters: [Readiness, NoSuchFilter]", "unknown filter plugin 'NoSuchFilter'"),
        ("scores: {Nope: 1}", "unknown score plugin 'Nope'"),
        ("scores: {LeastWaterLevel: -1}", "weight must be >= 0"),
        ("adjuster: {packBelow: 0.8, spreadAbove: 0.5}", "must not exceed spreadAbove"),
        ("adjuster: {surgeGain: {Missing: 1}}", "adjuster.surgeGain: unknown score plugin 'Missing'"),
        ("defaults: {waterLevelLimit: 1.5}", "defaults.waterLevelLimit"),
        ("defaults: {division: Sideways}", "defaults.division"),
        ("bogus: 1", "bogus"),
        ("[1, 2]", "must be a YAML mapping"),
        ("filters: [Readiness, Readiness]", "listed twice"),
        ("a: [", "not valid YAML"),
    ],
)
def test_profile_validation_errors(text: str, fragment: str) -> None:
    with pytest.raises(ProfileError) as ei:
        Profile.from_yaml(text)
    assert fragment in str(ei.value)


def test_profile_reports_every_error() -> None:
    with pytest.raises(ProfileError) as ei:
        Profile.from_yaml("filters: [X1]\nscores: {Y1: 1}")
    assert len(ei.value.errors) == 2


PLUGIN_SRC = '''
from __future__ import annotations

import numpy as np

from drods.scheduler.interface import PluginBase


class PreferGreen(PluginBase):
    """Third-party score: clusters labelled color=green score 100."""

    name = "PreferGreen"

    def score(self, task, snap, mask):
        return np.where(snap.label_in("color", ["green"]), 100.0, 0.0)


class NoBlue(PluginBase):
    name = "NoBlue"
    capacity_only = False

    def filter(self, task, snap, mask):
        from drods.scheduler.interface import reject
        blue = snap.label_in("color", ["blue"])
        drop = mask & blue
        return mask & ~blue, ([reject(self.name, "blue is banned", drop)] if drop.any() else [])


PLUGINS = [PreferGreen, NoBlue]
'''


@pytest.fixture
def fake_distribution(tmp_path: Path) -> Iterator[Path]:
    """A package installed only as a .dist-info with an entry point, on sys.path for this test."""
    (tmp_path / "drods_fake_plugins.py").write_text(PLUGIN_SRC)
    dist = tmp_path / "drods_fake_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: drods-fake-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""
        [drods.scheduler.plugins]
        fake = drods_fake_plugins
    """))
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("drods_fake_plugins", None)
        importlib.invalidate_caches()


def test_entry_point_plugin_is_loaded_and_used(fake_distribution: Path) -> None:
    added = load_entry_points(refresh=True)
    assert {"PreferGreen", "NoBlue"} <= set(added)
    assert "PreferGreen" in score_plugins() and "NoBlue" in filter_plugins()
    prof = Profile.from_yaml("filters: [Readiness, NoBlue, ResourceFit]\nscores: {PreferGreen: 1}")
    snap = Snapshot()
    add(snap, "red", labels={"color": "red"})
    add(snap, "green", labels={"color": "green"})
    add(snap, "blue", labels={"color": "blue"})
    r = Scheduler(prof, rng_seed=0).schedule(task(replicas=1), snap)
    assert r.placement_dict() == {"green": 1}
    assert r.reasons == {"blue": "blue is banned"}
    assert r.scores["PreferGreen"] == {"green": 100.0}
