"""A propagated Pod's status from its member copies: kubectl's READY, STATUS and RESTARTS stay those
of one Pod however many clusters run a copy."""

from __future__ import annotations

from typing import Any

from drods.api.table import KUBERNETES_COLUMNS
from drods.controllers.aggregate import fill_pod
from drods.controllers.pod_status import pod_status
from drods.model.work import Ref


def copy(phase: str, ready: bool, restarts: int, state: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"phase": phase, "startTime": "2026-01-01T00:00:00Z" if ready else "2026-01-02T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "main", "image": "busybox", "ready": ready, "restartCount": restarts,
                                   "state": state or {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
            "podIP": "10.0.0.1"}


def cells(status: dict[str, Any]) -> list[Any]:
    pod = {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"containers": [{"name": "main"}]}, "status": status}
    return [c.value(pod) for c in KUBERNETES_COLUMNS["Pod"][:4]]


def test_one_pod_s_counts_and_the_most_telling_state() -> None:
    both = pod_status({"east": copy("Running", True, 1), "west": copy("Running", True, 2)})
    assert cells(both) == ["p", "1/1", "Running", "3"]
    waiting = {"waiting": {"reason": "CrashLoopBackOff"}}
    bad = pod_status({"east": copy("Running", True, 0), "west": copy("Running", False, 4, waiting)})
    assert cells(bad) == ["p", "0/1", "CrashLoopBackOff", "4"]
    # PodStatus' fields only: each copy's phase and IPs are on the Binding (`aggregate.fill_pod`)
    assert bad["startTime"] == "2026-01-01T00:00:00Z" and "clusters" not in bad
    assert bad["conditions"] == [{"type": "Ready", "status": "False"}]


def test_phase_in_karmadas_order_and_pending_before_any_report() -> None:
    assert pod_status({"a": copy("Succeeded", False, 0), "b": copy("Running", True, 0)})["phase"] == "Running"
    assert pod_status({"a": copy("Pending", False, 0), "b": copy("Failed", False, 0)})["phase"] == "Failed"
    assert pod_status({}) == {"phase": "Pending"}


def test_each_copy_s_phase_and_ips_are_on_the_binding_entry() -> None:
    """The template Pod keeps to PodStatus, so the Binding's ``status.clusters[]`` entry says where the copy
    runs; a later report without them clears them (they are the copy's, not a stale one's)."""
    main = Ref("v1", "Pod", "pods", "p")
    work_status = {"manifests": [{"apiVersion": "v1", "kind": "Pod", "namespace": "pods", "name": "p",
                                  "status": {**copy("Running", True, 0), "hostIP": "192.168.0.4"}}]}
    entry: dict[str, Any] = {"cluster": "east"}
    fill_pod(entry, work_status, main)
    assert entry == {"cluster": "east", "phase": "Running", "hostIP": "192.168.0.4", "podIP": "10.0.0.1"}
    fill_pod(entry, {"manifests": []}, main)
    assert entry == {"cluster": "east"}
