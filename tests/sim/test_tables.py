"""The printing rules behind ``kubectl get`` on a sim, for states a short e2e run never reaches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from drods.api.table import KUBERNETES_COLUMNS, PrintedKind, human_duration, to_table
from drods.model.kinds import WORKLOAD_KINDS, Kind
from drods.sim import kinds as K

Obj = dict[str, Any]


def ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def row(kind: Kind, obj: Obj, *, wide: bool = False) -> dict[str, Any]:
    obj = {"metadata": {"name": "x", "creationTimestamp": ago(30)}, **obj}
    table = to_table(kind, [obj], 1)
    return {c["name"]: cell for c, cell in zip(table["columnDefinitions"], table["rows"][0]["cells"], strict=True)
            if wide or c["priority"] == 0}


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-0.5, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (330, "5m30s"), (600, "10m"),
    (179 * 60, "179m"), (3 * 3600 + 5 * 60, "3h5m"), (8 * 3600, "8h"), (47 * 3600, "47h"), (50 * 3600, "2d2h"),
    (9 * 86400, "9d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y")])
def test_ages_read_like_kubectl(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_pod_status_follows_the_container_states() -> None:
    statuses = [{"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": False, "restartCount": 5, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"finishedAt": ago(150)}}}]
    crash = {"spec": {"containers": [{"name": "a"}, {"name": "b"}]},
             "status": {"phase": "Running", "containerStatuses": statuses}}
    assert row(K.POD, crash) == {"Name": "x", "Ready": "1/2", "Status": "CrashLoopBackOff",
                                 "Restarts": "5 (2m30s ago)", "Age": "30s"}
    init = {"spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "state": {"running": {}}}]}}
    assert row(K.POD, init)["Status"] == "Init:0/1"
    deleting = {"metadata": {"name": "x", "deletionTimestamp": ago(1)}, "spec": {"containers": [{"name": "a"}]},
                "status": {"phase": "Running"}}
    assert row(K.POD, deleting)["Status"] == "Terminating"
    gated = {"spec": {"readinessGates": [{"conditionType": "g"}]}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}, {"type": "g", "status": "True"}]}}
    cells = row(K.POD, gated, wide=True)
    assert (cells["Status"], cells["Readiness Gates"], cells["IP"], cells["Node"]) == (
        "SchedulingGated", "1/1", "<none>", "<none>")


def test_nodes_jobs_services() -> None:
    node = {"metadata": {"name": "x", "labels": {"node-role.kubernetes.io/control-plane": "",
                                                 "kubernetes.io/role": "edge"}},
            "spec": {"unschedulable": True}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert row(K.NODE, node) | {"Age": ""} == {"Name": "x", "Status": "NotReady,SchedulingDisabled",
                                               "Roles": "control-plane,edge", "Age": "", "Version": ""}
    job = {"spec": {"parallelism": 3}, "status": {"succeeded": 1, "startTime": ago(200),
                                                  "conditions": [{"type": "Failed", "status": "True"}]}}
    assert (row(K.JOB, job)["Status"], row(K.JOB, job)["Completions"], row(K.JOB, job)["Duration"]) == (
        "Failed", "1/1 of 3", "3m20s")
    lb = {"spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.7"], "ports": [{"port": 53, "protocol": "UDP"}],
                   "selector": {"b": "2", "a": "1"}},
          "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb.example"}]}}}
    assert row(K.SERVICE, lb, wide=True) | {"Age": ""} == {
        "Name": "x", "Type": "LoadBalancer", "Cluster-IP": "10.96.0.7", "External-IP": "1.2.3.4,lb.example",
        "Port(s)": "53/UDP", "Age": "", "Selector": "a=1,b=2"}
    assert row(K.SERVICE, {"spec": {"type": "ExternalName", "externalName": "db.example"}})["External-IP"] == \
        "db.example"


def test_a_kind_prints_by_the_servers_kind_table() -> None:
    """The control plane's Deployment keeps its multicluster columns; the sim's prints as a member."""
    control_plane = next(k for k in WORKLOAD_KINDS if k.kind == "Deployment")
    assert control_plane == Kind("apps", "v1", "Deployment", "deployments", True, short_names=("deploy",),
                                 categories=("all",))
    assert [c["name"] for c in to_table(control_plane, [], 1)["columnDefinitions"]] == [
        "Name", "Ready", "Up-to-date", "Available", "Clusters", "Age", "CPU(used/req)", "Memory(used/req)",
        "Pods(ready)"]  # the measured use (status.usage) with -o wide
    assert [c["name"] for c in to_table(K.DEPLOYMENT, [], 1)["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Ready", "Up-to-date", "Available", "Age"]
    assert isinstance(K.DEPLOYMENT, PrintedKind) and control_plane != K.DEPLOYMENT
    # every kind kube-apiserver's columns are known for (a sim serves ReplicaSets, though a Deployment makes none)
    assert {k.kind for k in K.SIM_KINDS if isinstance(k, PrintedKind)} == set(KUBERNETES_COLUMNS)
    assert [c["name"] for c in to_table(K.REPLICA_SET, [], 1)["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Desired", "Current", "Ready", "Age"]


def test_events_lead_with_when_not_name() -> None:
    event = {"type": "Warning", "reason": "FailedScheduling", "message": " 0/2 nodes available \n",
             "involvedObject": {"kind": "Pod", "name": "web-1"}, "source": {"component": "default-scheduler"},
             "firstTimestamp": ago(600), "lastTimestamp": ago(65), "count": 4}
    assert row(K.EVENT, event, wide=True) == {
        "Last Seen": "65s", "Type": "Warning", "Reason": "FailedScheduling", "Object": "pod/web-1", "Subobject": "",
        "Source": "default-scheduler", "Message": "0/2 nodes available", "First Seen": "10m", "Count": 4, "Name": "x"}


def test_ingresses_and_cronjobs_print_kubectls_columns() -> None:
    ing = {"spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example"]}],
                    "rules": [{"host": "a.example"}, {"host": "b.example"}]},
           "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}
    assert row(K.INGRESS, ing) | {"Age": ""} == {"Name": "x", "Class": "nginx", "Hosts": "a.example,b.example",
                                                 "Address": "1.2.3.4", "Ports": "80, 443", "Age": ""}
    cj = {"spec": {"schedule": "*/5 * * * *"}, "status": {"active": [{"name": "j1"}]}}
    assert row(K.CRON_JOB, cj) | {"Age": ""} == {"Name": "x", "Schedule": "*/5 * * * *", "Timezone": "<none>",
                                                "Suspend": "False", "Active": 1, "Last Schedule": "<none>", "Age": ""}
