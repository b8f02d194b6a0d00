"""A plan's estimate: the bytes from the claims' requested storage, the bandwidth from C2's network
status or the clusters' declared profiles, and nothing made up when either is unknown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drods.migration.estimate import bandwidth, estimate
from drods.model.volume_claims import workload_claims

GI = 2**30


def _sts(*templates: tuple[str, str | None], shared: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "db", "image": "postgres:16"}]}
    if shared:
        pod["volumes"] = [{"name": "logs", "persistentVolumeClaim": {"claimName": shared}}]
    return {"metadata": {"name": "db"}, "spec": {"replicas": 3, "template": {"spec": pod}, "volumeClaimTemplates": [
        {"metadata": {"name": t}, "spec": {"resources": {"requests": {"storage": size}} if size else {}}}
        for t, size in templates]}}


def test_bytes_and_copy_time_from_the_claims_and_the_link() -> None:
    sts = _sts(("data", "10Gi"), ("wal", "1Gi"))
    est = estimate(sts, workload_claims(sts), 2, 100.0, "network status a → b")
    assert est is not None
    assert est["bytes"] == 2 * 11 * GI and "unknownClaims" not in est
    assert est["copySeconds"] == round(22 * GI * 8 / 100e6, 1)
    assert est["message"] == f"{22 * GI} bytes; ~{est['copySeconds']:g} s at 100 Mbps"


def test_unknown_sizes_and_bandwidth_are_said_not_guessed() -> None:
    sts = _sts(("data", None), shared="logs-db")
    est = estimate(sts, workload_claims(sts), 1, None, "no bandwidth known between a and b")
    assert est is not None
    assert est["bytes"] is None and est["unknownClaims"] == ["data-db-0", "logs-db"]
    assert "copySeconds" not in est and est["message"].startswith("size unknown; 2 claim(s) of unknown size")
    partly = _sts(("data", "1Gi"), shared="logs-db")
    est = estimate(partly, workload_claims(partly), 1, 8.0, "x")
    assert est is not None and est["bytes"] == GI and est["unknownClaims"] == ["logs-db"]
    no_data = {"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": []}}}}
    assert estimate(no_data, workload_claims(no_data), 2, 8.0, "x") is None  # nothing to move


async def test_bandwidth_from_the_network_status_then_the_declared_profiles() -> None:
    pairs: dict[tuple[str, str], Mapping[str, Any]] = {
        ("b", "a"): {"rttMs": 3.0, "reported": {"bandwidthMbps": 400}}}  # a probe measures no bandwidth

    async def read(x: str, y: str) -> Mapping[str, Any] | None:
        return pairs.get((x, y))

    clusters = {"a": {"network": {"bandwidthMbps": 1000}}, "b": {"network": {"bandwidthMbps": 200}},
                "c": {}}
    assert await bandwidth("a", "b", clusters, read) == (400.0, "network status b → a")
    pairs.clear()
    assert await bandwidth("a", "b", clusters, read) == \
        (200.0, "the narrower of the clusters' declared spec.network.bandwidthMbps")
    mbps, why = await bandwidth("a", "c", clusters, read)
    assert mbps is None and "no bandwidth known between a and c" in why
