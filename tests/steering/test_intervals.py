"""C1 per (client site, cluster) pair: the strictest need among the services using the pair."""

from __future__ import annotations

from typing import Any

from drods.steering.intervals import DEFAULT_INTERVAL, pair_interval, pair_needs, site_intervals


def reg(sites: list[str], instances: list[str], interval: float | None, phase: str | None = "Active") -> dict[str, Any]:
    spec: dict[str, Any] = {"clientSites": sites}
    if interval is not None:
        spec["statusIntervalSeconds"] = interval
    status: dict[str, Any] = {"instances": instances}
    if phase is not None:
        status["phase"] = phase
    return {"spec": spec, "status": status}


CITIES: dict[str, str | None] = {"aws-dfw": "DFW", "gcp-ord": "ORD", "az-lhr": "LHR", "bare": None}


def test_a_pair_takes_the_strictest_need_of_the_services_joining_its_ends() -> None:
    regs = [reg(["DFW", "LHR"], ["aws-dfw", "gcp-ord"], 5.0),
            reg(["DFW"], ["gcp-ord", "az-lhr"], 2.0),
            reg(["SIN"], ["az-lhr"], None)]
    needs = pair_needs(regs, CITIES)
    assert pair_interval(needs, "DFW", "gcp-ord") == 2.0  # both services use it: the strictest
    assert needs[("DFW", "gcp-ord")].services == 2
    assert pair_interval(needs, "DFW", "aws-dfw") == 5.0  # only the first
    assert pair_interval(needs, "LHR", "gcp-ord") == 5.0
    assert pair_interval(needs, "LHR", "az-lhr") == DEFAULT_INTERVAL  # LHR's service has no instance there
    assert pair_interval(needs, "DFW", "az-lhr") == 2.0
    assert pair_interval(needs, "SIN", "az-lhr") == DEFAULT_INTERVAL  # used, at the default need
    assert ("SIN", "az-lhr") in needs
    # The per-site answer is unchanged: DFW is served by a 2 s service, so DFW's sites all say 2 s.
    assert site_intervals(regs, ["DFW", "LHR", "SIN", "NRT"]) == {"DFW": 2.0, "LHR": 5.0, "SIN": 30.0, "NRT": 30.0}


def test_a_city_is_a_pair_end_like_its_clusters() -> None:
    needs = pair_needs([reg(["DFW"], ["az-lhr", "bare"], 3.0), reg(["DFW"], ["aws-dfw"], 7.0)], CITIES)
    assert pair_interval(needs, "DFW", "LHR") == 3.0
    assert pair_interval(needs, "DFW", "DFW") == 7.0
    assert pair_interval(needs, "DFW", "bare") == 3.0
    assert set(needs) == {("DFW", t) for t in ("az-lhr", "LHR", "bare", "aws-dfw", "DFW")}


def test_inactive_or_instance_less_registrations_need_no_pair() -> None:
    regs = [reg(["DFW"], ["aws-dfw"], 1.0, phase="Conflict"), reg(["DFW"], [], 1.0),
            reg(["LHR"], ["az-lhr"], 4.0, phase=None)]  # not evaluated yet: its status has no phase
    needs = pair_needs(regs, CITIES)
    assert set(needs) == {("LHR", "az-lhr"), ("LHR", "LHR")}
    assert pair_interval(needs, "DFW", "aws-dfw") == DEFAULT_INTERVAL
