"""Migration benchmark: a StatefulSet with written claims moved between two ``drods sim`` members with
the VolumeCopy mover, a lag probe and a write freeze, through ``drods serve``.

Each claim starts with ``--size-gib`` of data (split over ``--claims`` claims) and is written
``--write-rate`` times a second; the sims copy at ``--bandwidth-mbps``. Measured from the plan's
status and the members' objects (never estimated):

* ``copy_s``: the longest copy pod's own time (bytes ÷ bandwidth in the sim, plus its passes);
* ``catchup_s``: the CaughtUp condition's start → done;
* ``switch_downtime_s``: the write freeze (``status.freeze.downtimeSeconds``);
* ``lost_writes``: the fenced source's counter − what the final sync left in the target, per claim,
  summed (the target's own checks agree: ``status.data.lostWrites``);
* ``status_bytes_copied``, ``status_copy_bytes_per_s``, ``checksums_equal``: what the copy Jobs
  reported into ``status.data.claims[]`` (their sum, the slowest rate, every checksum = its source's).

Prints the conditions and a final JSON line
``{size_gib, bandwidth_mbps, copy_s, catchup_s, switch_downtime_s, lost_writes}``.

    python bench/migration.py --size-gib 0.05 --bandwidth-mbps 200
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import config as k8s_config  # noqa: E402
from kubernetes.dynamic import DynamicClient  # noqa: E402

from bench.configuration import write_configuration  # noqa: E402
from bench.scratch import scratch_dir  # noqa: E402
from drods.model.timefmt import parse_rfc3339  # noqa: E402
from drods.sim.harness import SimProcess  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402

NS = "bench"
PLANS = f"/apis/multicluster.io/v1alpha1/namespaces/{NS}/migrationplans"


def statefulset(args: argparse.Namespace) -> dict[str, Any]:
    per_claim = int(args.size_gib * 2**30 / args.claims)
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS},
            "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"},
                                               "annotations": {"sim.drods.io/write-rate": str(args.write_rate)}},
                                  "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
                     "volumeClaimTemplates": [
                         {"metadata": {"name": f"vol{i}", "annotations": {"sim.drods.io/used-bytes": str(per_claim)}},
                          "spec": {"resources": {"requests": {"storage": "1Ti"}}}} for i in range(args.claims)]}}


def wait(fn: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise TimeoutError(what)


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = scratch_dir("bench-migration-")
    sim_args = ["--job-seconds", "1", "--volume-bandwidth-mbps", str(args.bandwidth_mbps)]
    sims = {n: SimProcess(n, root / "sims", sim_args).start() for n in ("mig-a", "mig-b")}
    data = root / "server"
    data.mkdir()
    write_configuration(data, members={"probeIntervalSeconds": 1, "notReadyGraceSeconds": 6})
    server = ServerProcess(data)
    server.start_timeout = 120
    try:
        server.start()
        for s in sims.values():
            s.wait_ready(120)
        http = server.client(timeout=60)
        for s in sims.values():
            http.post("/api/v1/clusters", json={"name": s.name, "endpoint": s.server,
                                                "credentials": {"kubeconfig": s.kubeconfig.read_text()}}
                      ).raise_for_status()
        http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        http.post("/apis/multicluster.io/v1alpha1/propagationpolicies", json={
            "apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "db"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "namespace": NS}],
                     "placement": {"clusterAffinity": {"clusterNames": ["mig-a"]}}}}).raise_for_status()
        http.post(f"/apis/apps/v1/namespaces/{NS}/statefulsets", json=statefulset(args)).raise_for_status()
        members = {n: DynamicClient(k8s_config.new_client_from_config(str(s.kubeconfig), persist_config=False))
                   for n, s in sims.items()}

        def claim(cluster: str, name: str) -> dict[str, Any]:
            resp = members[cluster].request("get", f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{name}",
                                            serialize=False, _request_timeout=5)
            return dict(json.loads(resp.data))

        wait(lambda: int(claim("mig-a", "vol0-db-0")["metadata"]["annotations"]["sim.drods.io/writes"]) > 0
             if _exists(members["mig-a"], "vol0-db-0") else None, 120, "the source's claims written")
        # a move goes only where the workload's placement allows it: the policy widened first (the copy stays
        # where it runs: a placement change alone moves nothing)
        http.patch("/apis/multicluster.io/v1alpha1/propagationpolicies/db",
                   json={"spec": {"placement": {"clusterAffinity": {"clusterNames": ["mig-a", "mig-b"]}}}},
                   headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
        binding = f"/apis/multicluster.io/v1alpha1/bindings/statefulset-{NS}-db"
        wait(lambda: "mig-b" in str(http.get(binding).json().get("spec", {}).get("placement")) or None, 60,
             "the binding's placement widened")
        plan = {"apiVersion": "multicluster.io/v1alpha1", "kind": "MigrationPlan", "metadata": {"name": "move"},
                "spec": {"workloadRef": {"name": "db"}, "sourceCluster": "mig-a", "targetCluster": "mig-b",
                         "trafficDrainSeconds": 0, "switch": {"freezeSeconds": 120},
                         "data": {"mover": "VolumeCopy", "image": "bench/volume-copy:1",
                                  "catchUp": {"maxLagSeconds": 1, "probe": {"image": "busybox",
                                                                            "periodSeconds": 1}}}}}
        http.post(PLANS, json=plan).raise_for_status()
        copies: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + args.timeout
        while True:
            for p in json.loads(members["mig-b"].request("get", f"/api/v1/namespaces/{NS}/pods", serialize=False,
                                                         _request_timeout=5).data)["items"]:
                rec = (p["metadata"].get("annotations") or {}).get("sim.drods.io/copy")
                if rec and (p.get("status") or {}).get("phase") == "Succeeded":
                    copies[p["metadata"]["labels"].get("job-name", "")] = json.loads(rec)
            st = http.get(f"{PLANS}/move").json().get("status") or {}
            if st.get("phase") in ("Succeeded", "RolledBack", "Failed"):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"plan still {st.get('phase')}")
            time.sleep(0.2)
        if st["phase"] != "Succeeded":
            raise RuntimeError(f"the plan ended {st['phase']}: {st.get('message')}")
        conds = {c["type"]: c for c in st["conditions"]}
        caught = conds["CaughtUp"]
        lost = 0
        for job, rec in copies.items():
            if "-final-" in job:
                name = st["data"]["claims"][int(job.split("-final-")[1].split("-")[0])]["name"]
                lost += int(claim("mig-a", name)["metadata"]["annotations"]["sim.drods.io/writes"]) - rec["goalWrites"]
        return {"size_gib": args.size_gib, "bandwidth_mbps": args.bandwidth_mbps,
                "copy_s": max(r["seconds"] for j, r in copies.items() if "-copy-" in j),
                "catchup_s": round((parse_rfc3339(caught["lastTransitionTime"]) or 0)
                                   - (parse_rfc3339(caught["startTime"]) or 0), 3),
                "switch_downtime_s": st["freeze"]["downtimeSeconds"], "lost_writes": lost,
                "status_lost_writes": st["data"].get("lostWrites"),
                # what the copy Jobs reported into status.data.claims[], and whether every checksum matched
                "status_bytes_copied": st["data"].get("bytesCopied"),
                "status_copy_bytes_per_s": min((c.get("bytesPerSecond") or 0) for c in st["data"]["claims"]),
                "checksums_equal": all(c.get("checksum") and c.get("checksum") == c.get("sourceChecksum")
                                       for c in st["data"]["claims"])}
    finally:
        server.stop(check=False)
        for s in sims.values():
            s.stop()


def _exists(member: DynamicClient, name: str) -> bool:
    try:
        member.request("get", f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{name}", _request_timeout=5)
    except Exception:  # noqa: BLE001 - absent or not yet served
        return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gib", type=float, default=0.05, help="data in the workload's claims, all together")
    ap.add_argument("--claims", type=int, default=2)
    ap.add_argument("--bandwidth-mbps", type=float, default=200.0)
    ap.add_argument("--write-rate", type=float, default=50.0, help="writes per second per claim")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    print(f"# migration: {args.claims} claims, {args.size_gib} GiB in all, {args.write_rate:g} writes/s per claim, "
          f"sims copying at {args.bandwidth_mbps:g} Mbit/s; python {platform.python_version()}, "
          f"{platform.machine()}", flush=True)
    result = run(args)
    extra = result.pop("status_lost_writes")
    print(f"# plan's own record: lostWrites {extra}", flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
