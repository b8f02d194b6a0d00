"""``drods cluster taint``: a cluster's taints in ``kubectl taint``'s words (kubectl taints only nodes:
``kubectl taint clusters m1 …`` says "only node types are supported" — walkthrough AQ)."""

from __future__ import annotations

import json

import pytest

from drods.cli.remote import CliError
from drods.cli.taints import TaintChange, apply_changes, parse_taint
from tests.cli.conftest import Drods

NOW = "2026-12-06T10:00:00Z"


def test_taints_are_read_as_kubectl_writes_them() -> None:
    assert parse_taint("maint=yes:NoExecute") == TaintChange("maint", "yes", "NoExecute")
    assert parse_taint("example.com/gpu:NoSchedule") == TaintChange("example.com/gpu", "", "NoSchedule")
    assert parse_taint("maint:NoExecute-") == TaintChange("maint", "", "NoExecute", remove=True)
    assert parse_taint("maint-") == TaintChange("maint", "", None, remove=True)
    for bad, says in (("maint=yes", "give an effect"), ("maint=yes:Sometimes", "not one of"),
                      ("-x:NoSchedule", "not a valid key"), ("maint=yes:NoSchedule-", "not a value"),
                      ("k=v al:NoSchedule", "not a valid value")):
        with pytest.raises(CliError, match=says):
            parse_taint(bad)


def test_adding_overwriting_and_removing() -> None:
    had = [{"key": "cluster.multicluster.io/not-ready", "effect": "NoExecute", "timeAdded": "earlier"}]
    new, done = apply_changes(had, [parse_taint("maint=yes:NoSchedule")], overwrite=False, now=NOW)
    assert new == [*had, {"key": "maint", "value": "yes", "effect": "NoSchedule", "timeAdded": NOW}]
    assert done == ["tainted maint=yes:NoSchedule"]
    with pytest.raises(CliError, match="already has a taint"):
        apply_changes(new, [parse_taint("maint=no:NoSchedule")], overwrite=False, now=NOW)
    changed, _ = apply_changes(new, [parse_taint("maint=no:NoSchedule")], overwrite=True, now=NOW)
    assert [t.get("value") for t in changed if t["key"] == "maint"] == ["no"]
    gone, done = apply_changes(changed, [parse_taint("maint-")], overwrite=False, now=NOW)
    assert gone == had and done == ["untainted maint"]
    with pytest.raises(CliError, match="not found"):
        apply_changes(had, [parse_taint("maint:NoSchedule-")], overwrite=False, now=NOW)


def test_cluster_taint_end_to_end(drods: Drods) -> None:
    assert drods("cluster", "register", "c-taint", "--endpoint", "https://t.example").returncode == 0
    try:
        done = drods("cluster", "taint", "c-taint", "maint=yes:NoExecute", "gpu:NoSchedule")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["cluster/c-taint tainted maint=yes:NoExecute",
                                            "cluster/c-taint tainted gpu:NoSchedule"]
        obj = json.loads(drods("get", "clusters", "c-taint", "-o", "json").stdout)
        taints = obj.get("spec", obj).get("taints")
        assert [(t["key"], t.get("value", ""), t["effect"]) for t in taints] == [
            ("maint", "yes", "NoExecute"), ("gpu", "", "NoSchedule")], taints
        again = drods("cluster", "taint", "c-taint", "maint=no:NoExecute")
        assert again.returncode == 1 and "ALREADY_EXISTS" in again.stderr  # nothing written
        assert drods("cluster", "taint", "c-taint", "maint-").returncode == 0
        obj = json.loads(drods("get", "clusters", "c-taint", "-o", "json").stdout)
        assert [t["key"] for t in obj.get("spec", obj).get("taints")] == ["gpu"]
        viewer = drods("cluster", "taint", "c-taint", "x:NoSchedule", role="viewer")
        assert viewer.returncode == 1 and "HTTP 403" in viewer.stderr
        missing = drods("cluster", "taint", "nope", "x:NoSchedule")
        assert missing.returncode == 1 and "not found" in missing.stderr.lower()
    finally:
        drods("cluster", "remove", "c-taint")
