"""The sim's one controller loop: what kube-controller-manager, kube-scheduler and the kubelets of
a real cluster do, reduced to what DRO-DS observes. Level-triggered: each pass reads everything,
closes the gaps and writes only what changed; a pass runs after any change (store watch), when a
pod is due to become ready or finish, and every ``resync_seconds``.

Everything is read from one informer over the sim's store, caught up to the controller's own latest
write before each pass (so a pass sees the previous one's writes and never creates a pod twice;
anyone else's change is in the cache before it wakes a pass): listing and decoding every object on
every pass made a member's cost per copy grow with what it holds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import zlib
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any

from drods.errors import AlreadyExists, ApiError, Conflict, NotFound
from drods.machinery.informer import Informer
from drods.model.annotations import RUN_REPORT
from drods.model.kinds import Kind
from drods.model.timefmt import parse_rfc3339, rfc3339
from drods.registry.objects import decode_shared
from drods.sim import endpoints as E
from drods.sim import kinds as K
from drods.sim import workloads as W
from drods.sim.config import ANN_EXIT_CODE, ANN_RUN_SECONDS, PRELOAD_NAMESPACE, SimConfig
from drods.sim.datapass import data_pass
from drods.sim.movers import role
from drods.sim.nodes import build_nodes, node_ip, preload_pods
from drods.sim.placer import place, rooms
from drods.sim.registry import NS_FINALIZER, SimRegistry
from drods.sim.resources import Resources, condition, is_terminal, node_ready, of_list, pod_requests
from drods.sim.storage import Network, WriteClock
from drods.store import KeyValue, Store

log = logging.getLogger("drods.sim")
Obj = dict[str, Any]
# pure functions of the workload and its pods
PLANNED_FROM_PODS = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
WRITE_CONCURRENCY = 32
MAX_COALESCE_SECONDS = 0.25
DATA_TICK_SECONDS = 0.25  # how often moving bytes and written counters are brought up to date
MANAGED_OWNERS = {"Deployment": K.DEPLOYMENT, "StatefulSet": K.STATEFUL_SET, "DaemonSet": K.DAEMON_SET,
                  "Job": K.JOB, "ReplicaSet": K.REPLICA_SET}




@dataclass
class World:
    """The latest nodes and pods a pass saw; metrics and Prometheus read it without the store."""

    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    at: float = 0.0


def _key(obj: Obj) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _qos(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    any_set = False
    guaranteed = bool(containers)
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        any_set = any_set or bool(req) or bool(lim)
        for r in ("cpu", "memory"):
            if r not in lim or of_list({r: req.get(r, lim[r])}) != of_list({r: lim[r]}):
                guaranteed = False
    return "Guaranteed" if guaranteed else "Burstable" if any_set else "BestEffort"


# What a pass only ever deletes (a namespace's contents): kept as their name alone, never decoded — a
# member holding a hundred thousand ConfigMaps keeps their documents in its store, not in this cache.
NAMED_ONLY = tuple(k.key_prefix() for k in K.NAMESPACED
                   if k not in (K.POD, K.SERVICE, K.ENDPOINT_SLICE, K.PERSISTENT_VOLUME_CLAIM, *K.WORKLOADS))


def decode_read(kv: KeyValue) -> Obj | None:
    """A stored object as the controller reads it: whole, its parts equal to other objects' shared
    (a Deployment's pods repeat its template; every object of a kind repeats the shape of its
    ``managedFields``) — the controller builds new objects, never changes one it read —, or by name
    for the kinds it only deletes."""
    if kv.key.startswith(NAMED_ONLY):
        _, namespace, name = kv.key.rsplit("/", 2)  # /registry/<group>/<plural>/<namespace>/<name>
        return {"metadata": {"name": name, "namespace": namespace}}
    return decode_shared(kv)


def pod_ips(pods: Iterable[Obj]) -> dict[str, set[str]]:
    """The pod IPs each node's live pods hold."""
    out: dict[str, set[str]] = {}
    for p in pods:
        ip, node = (p.get("status") or {}).get("podIP"), (p.get("spec") or {}).get("nodeName")
        if ip and node and not is_terminal(p):
            out.setdefault(node, set()).add(ip)
    return out


def pod_address(node_index: int, uid: str, taken: set[str]) -> str:
    """A pod IP from the node's /24 that no live pod of the node holds, added to ``taken``: a node's
    IPAM never gives one address to two pods (drawn from the uid's hash alone, any two pods of a node
    shared one once in 250 pairs, and a Service's endpoints then counted one address). A node running
    more than 250 pods shares addresses."""
    prefix = f"10.{244 + node_index // 256 % 12}.{node_index % 256}."
    start = zlib.crc32(uid.encode()) % 250
    for k in range(250):
        ip = f"{prefix}{(start + k) % 250 + 2}"
        if ip not in taken:
            taken.add(ip)
            return ip
    return f"{prefix}{start + 2}"


class SimController:
    def __init__(self, registry: SimRegistry, store: Store, cfg: SimConfig) -> None:
        self.registry = registry
        self.store = store
        self.cfg = cfg
        self.world = World()
        self._wake = asyncio.Event()
        self._retry = False
        self._node_index: dict[str, int] = {}
        self.passes = 0
        self.objects = Informer(store, "/registry/", decode_read)
        self.objects.on_change(self._changed)
        self._seen = asyncio.Event()  # the informer moved (what `_caught_up` waits on)
        self._written = 0  # the store revision of this controller's latest write
        self._informer: asyncio.Task[None] | None = None
        self.network = Network(cfg.state_dir / "volumes", cfg.name)  # claims seen by the other sims
        self.write_clock = WriteClock()
        # (kind, uid) -> the inputs a settled workload was last planned on: a pass skips it while they
        # hold, so a pass costs what changed, not every workload the member holds
        self._settled: dict[tuple[str, str], tuple[Any, ...]] = {}
        # (uid, resourceVersion) -> a bound pod's requests: the rooms of a pass that binds pods
        # subtract every pod's, most of them unchanged since the last pass
        self._requests: dict[tuple[str, str], Resources] = {}

    def _changed(self, _key: str, _old: Any, _new: Any) -> None:
        self._wake.set()
        self._seen.set()

    def _list(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        """What ``registry.list`` answers, from the informer (key order, as the store lists)."""
        prefix = kind.key_prefix(namespace if kind.namespaced else None)
        return [self.objects.cache[k] for k in sorted(k for k in self.objects.cache if k.startswith(prefix))]

    async def _caught_up(self) -> None:
        """Until the informer has seen this controller's own last writes (others' changes are in the
        cache before they wake a pass); bounded, a pass on a late cache is only redone."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                while self.objects.revision < self._written:
                    self._seen.clear()
                    await self._seen.wait()

    async def start_informer(self) -> None:
        """Fill the informer (after `bootstrap`, before the first pass); `run` starts it if needed."""
        if self._informer is None:
            self._informer = asyncio.create_task(self.objects.run(), name="sim-informer")
        await self.objects.wait_synced()

    # ---- start ---------------------------------------------------------------------------------

    async def bootstrap(self) -> None:
        """Namespaces, nodes and preload pods the sim starts with (kept if the store has them)."""
        for ns in (*SYSTEM_NAMESPACES, *((PRELOAD_NAMESPACE,) if self.cfg.preload > 0 else ())):
            if await self.registry.try_get(K.NAMESPACE, ns) is None:
                await self.registry.create(K.NAMESPACE, {"metadata": {"name": ns}})
        nodes = build_nodes(self.cfg)
        wanted = {n["metadata"]["name"] for n in nodes}
        existing, _ = await self.registry.list(K.NODE)
        for old in existing:  # a restart with fewer nodes: the sim's own extra nodes go
            if old["metadata"]["name"] not in wanted and old["metadata"].get("labels", {}).get("type") == "drods-sim":
                await self.registry.delete(K.NODE, old["metadata"]["name"])
        for node in nodes:
            current = await self.registry.try_get(K.NODE, node["metadata"]["name"])
            if current is None:
                await self.registry.create(K.NODE, node)
            else:  # a restart with other flags: the node takes its new shape, keeps its identity
                meta = {**current["metadata"], "labels": node["metadata"]["labels"]}
                await self.registry.put_object(K.NODE, {**current, "metadata": meta, "spec": node["spec"],
                                                        "status": node["status"]})
        for pod in preload_pods(self.cfg, nodes):
            if await self.registry.try_get(K.POD, pod["metadata"]["name"], PRELOAD_NAMESPACE) is None:
                await self.registry.create(K.POD, pod)

    async def run(self) -> None:
        """Reconcile until cancelled; a failed pass is logged and retried, never fatal."""
        await self.start_informer()
        try:
            while True:
                self._wake.clear()
                next_due: float | None = None
                began = time.monotonic()
                try:
                    next_due = await self.reconcile_once()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("sim reconcile pass failed; retrying")
                    self._retry = True
                took = time.monotonic() - began
                delay = self.cfg.resync_seconds
                if next_due is not None:
                    delay = min(delay, max(0.0, next_due - time.time()))
                if self._retry:
                    delay = min(delay, 0.2)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                # coalesce a burst of changes into one pass: at least twice the last pass's time, so
                # passes over a member holding many workloads take at most a third of the loop
                await asyncio.sleep(min(max(0.01, 2 * took), MAX_COALESCE_SECONDS))
        finally:
            watcher, self._informer = self._informer, None
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher

    # ---- one pass ------------------------------------------------------------------------------

    async def reconcile_once(self) -> float | None:
        """One level-triggered pass; returns when the next time-driven change is due (or None)."""
        self._retry = False
        self.passes += 1
        now = time.time()
        stamp = rfc3339(now)
        await self._caught_up()
        nodes = self._list(K.NODE)
        pods_list = self._list(K.POD)
        namespaces = self._list(K.NAMESPACE)
        workloads = {kind.kind: self._list(kind) for kind in K.WORKLOADS}
        self._node_index = {n["metadata"]["name"]: i for i, n in enumerate(sorted(
            nodes, key=lambda n: n["metadata"]["name"]))}
        pods: dict[tuple[str, str], Obj] = {_key(p): p for p in pods_list}

        await self._namespaces(namespaces, workloads, pods)
        await self._garbage_collect(workloads, pods)
        await self._workloads(workloads, pods, nodes, stamp)
        data_due = await self._storage(workloads, pods, now, stamp)
        next_due = await self._kubelet(pods, nodes, now)
        if data_due is not None:
            next_due = data_due if next_due is None else min(next_due, data_due)
        await self._schedule(pods, nodes, now)
        await self._statuses(workloads, pods, nodes, stamp)
        await self._endpoint_slices(pods)
        self.world = World(nodes, list(pods.values()), now)
        return next_due

    async def _namespaces(self, namespaces: list[Obj], workloads: dict[str, list[Obj]],
                          pods: dict[tuple[str, str], Obj]) -> None:
        """Deleting a namespace deletes everything in it, then the namespace itself (M3)."""
        for ns in namespaces:
            meta = ns["metadata"]
            if NS_FINALIZER not in meta.get("finalizers", []) and not meta.get("deletionTimestamp"):
                ns2 = {**ns, "metadata": {**meta, "finalizers": [*meta.get("finalizers", []), NS_FINALIZER]}}
                await self._guard(self.registry.put_object(K.NAMESPACE, ns2, resource_version=meta["resourceVersion"]))
                continue
            if not meta.get("deletionTimestamp"):
                continue
            name = meta["name"]
            if (ns.get("status") or {}).get("phase") != "Terminating":
                await self._guard(self.registry.update_status(K.NAMESPACE, name, {"phase": "Terminating"}))
            left = 0
            for kind in K.NAMESPACED:
                items = self._list(kind, name)
                left += len(items)
                await self._gather(self._delete(kind, o) for o in items)
            for key in [k for k in pods if k[0] == name]:
                pods.pop(key)
            for kind_name in workloads:
                workloads[kind_name] = [o for o in workloads[kind_name] if o["metadata"].get("namespace") != name]
            if left == 0:
                await self._guard(self.registry.remove_finalizer(K.NAMESPACE, name, NS_FINALIZER))
            else:
                self._retry = True

    async def _garbage_collect(self, workloads: dict[str, list[Obj]], pods: dict[tuple[str, str], Obj]) -> None:
        """Pods whose controlling owner is gone (or going) are deleted: deletion cascades."""
        alive = {(kind, o["metadata"]["uid"]) for kind, objs in workloads.items() for o in objs
                 if not o["metadata"].get("deletionTimestamp")}
        orphans = []
        for key, pod in pods.items():
            for ref in pod["metadata"].get("ownerReferences") or []:
                managed = ref.get("controller") and ref.get("kind") in MANAGED_OWNERS
                if managed and (ref["kind"], ref.get("uid")) not in alive:
                    orphans.append(key)
                    break
        await self._gather(self._delete(K.POD, pods.pop(key)) for key in orphans)

    async def _workloads(self, workloads: dict[str, list[Obj]], pods: dict[tuple[str, str], Obj],
                         nodes: list[Obj], stamp: str) -> None:
        owned = self._owned(pods)
        eligible_cache: dict[str, list[str]] = {}
        for kind_name, objs in workloads.items():
            for obj in objs:
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                mine = owned.get(obj["metadata"]["uid"], [])
                if self._is_settled(kind_name, obj, mine):
                    continue
                plan = self._plan(kind_name, obj, mine, nodes, stamp, eligible_cache)
                for pod in plan.delete:
                    pods.pop(_key(pod), None)
                await self._gather(self._delete(K.POD, p) for p in plan.delete)
                created = await self._gather(self._create(K.POD, p) for p in plan.create)
                for pod in created:
                    if pod is not None:
                        pods[_key(pod)] = pod

    def _plan(self, kind_name: str, obj: Obj, mine: list[Obj], nodes: list[Obj], stamp: str,
              eligible_cache: dict[str, list[str]]) -> W.Plan:
        if kind_name == "Deployment":
            return W.plan_deployment(obj, mine, stamp)
        if kind_name == "StatefulSet":
            return W.plan_statefulset(obj, mine, stamp)
        if kind_name == "Job":
            return W.plan_job(obj, mine, stamp)
        if kind_name == "ReplicaSet":
            return W.plan_replicaset(obj, mine)
        template = {"spec": ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}}
        from drods.sim.placer import selector_matches, taints_tolerated

        eligible = [n["metadata"]["name"] for n in sorted(nodes, key=lambda n: n["metadata"]["name"])
                    if node_ready(n) and selector_matches(template, n) and taints_tolerated(template, n)]
        return W.plan_daemonset(obj, mine, eligible)

    @staticmethod
    def _inputs(kind_name: str, obj: Obj, mine: list[Obj]) -> tuple[Any, ...] | None:
        """What a plan of ``obj`` is a function of, for the kinds planned from the workload and its pods
        alone (a DaemonSet's also reads the nodes, a Job's the clock: always planned)."""
        if kind_name not in PLANNED_FROM_PODS:
            return None
        return (obj["metadata"].get("resourceVersion"),
                tuple(sorted((p["metadata"]["name"], p["metadata"].get("resourceVersion")) for p in mine)))

    def _is_settled(self, kind_name: str, obj: Obj, mine: list[Obj]) -> bool:
        inputs = self._inputs(kind_name, obj, mine)
        return inputs is not None and self._settled.get((kind_name, obj["metadata"]["uid"])) == inputs

    @staticmethod
    def _owned(pods: dict[tuple[str, str], Obj]) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for pod in pods.values():
            for ref in pod["metadata"].get("ownerReferences") or []:
                if ref.get("controller"):
                    out.setdefault(ref.get("uid", ""), []).append(pod)
        return out

    async def _kubelet(self, pods: dict[tuple[str, str], Obj], nodes: list[Obj], now: float) -> float | None:
        """Bound pods start, become ready after ``startup_seconds`` and, if they run to completion,
        succeed after their run time. Returns when the next such change is due."""
        node_names = {n["metadata"]["name"] for n in nodes}
        due: list[float] = []
        writes = []
        ips = pod_ips(pods.values())
        for key, pod in pods.items():
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or is_terminal(pod) or pod["metadata"].get("deletionTimestamp"):
                continue
            status = pod.get("status") or {}
            if node not in node_names:
                continue
            if status.get("phase") != "Running":
                started = now
                new_status = self._running_status(pod, node, started, ready=self.cfg.startup_seconds <= 0,
                                                  taken=ips.setdefault(node, set()))
            else:
                started = parse_rfc3339(status.get("startTime")) or now
                new_status = status
                ready_at = started + self.cfg.startup_seconds
                if not W.is_ready(pod):
                    if now >= ready_at:
                        new_status = self._running_status(pod, node, started, ready=True, ready_since=now)
                    else:
                        due.append(ready_at)
            run_for = self._run_seconds(pod)
            if run_for is not None:
                done_at = started + run_for
                if now >= done_at:
                    new_status = self._finished_status(pod, new_status, now, self._exit_code(pod))
                else:
                    due.append(done_at)
            if new_status is not status:
                updated = {**pod, "status": new_status}
                pods[key] = updated
                writes.append(self._put(K.POD, updated))
        for result in await self._gather(writes):
            if result is not None:
                pods[_key(result)] = result
        return min(due) if due else None

    async def _storage(self, workloads: dict[str, list[Obj]], pods: dict[tuple[str, str], Obj], now: float,
                       stamp: str) -> float | None:
        """Claims, writes and data movers (`drods.sim.datapass`); a moving copy is looked at again soon."""
        out = data_pass(workloads["StatefulSet"], list(pods.values()), self._list(K.PERSISTENT_VOLUME_CLAIM),
                        self.network, self.write_clock, now, stamp, self.cfg.volume_bandwidth_mbps * 1e6 / 8)
        await self._gather(self._report(pod, report) for pod, report in out.reports)  # before the Job completes
        changed = [self._put(K.POD, p) for p in out.pods]
        changed += [self._put(K.POD, {**p, "status": self._finished_status(p, p.get("status") or {}, now, code,
                                                                             message)})
                    for p, code, message in out.finished]
        for result in await self._gather([*changed, *(self._create(K.PERSISTENT_VOLUME_CLAIM, c) for c in out.create),
                                          *(self._put(K.PERSISTENT_VOLUME_CLAIM, c) for c in out.update)]):
            if result is not None and result.get("kind") == "Pod":
                pods[_key(result)] = result
        # a Hook's copy follows its source for as long as the plan's runs are there (`movers.hook_step`)
        if any(role(p) == "hook" or role(p) is not None and (p.get("status") or {}).get("phase") == "Running"
               for p in pods.values()) or self.write_clock.since:
            return now + DATA_TICK_SECONDS  # bytes move and counters advance with time, not with store changes
        return None

    async def _report(self, pod: Obj, report: Obj) -> Obj | None:
        """A mover's report on its Job (``multicluster.io/run-report``), as the transport writes it from inside."""
        owner = next((r.get("name") for r in pod["metadata"].get("ownerReferences") or [] if r.get("kind") == "Job"),
                     None)
        job = self.objects.cache.get(K.JOB.key(str(owner), str(pod["metadata"].get("namespace") or "default"))) \
            if owner else None
        if job is None:
            return None
        ann = {**(job["metadata"].get("annotations") or {}), RUN_REPORT: json.dumps(report, separators=(",", ":"))}
        return await self._put(K.JOB, {**job, "metadata": {**job["metadata"], "annotations": ann}})

    def _run_seconds(self, pod: Obj) -> float | None:
        if role(pod) in ("copy", "dataset"):
            return None  # ends when its bytes are moved (`_storage`)
        spec = pod.get("spec") or {}
        ann = pod["metadata"].get("annotations") or {}
        owner_kinds = {r.get("kind") for r in pod["metadata"].get("ownerReferences") or []}
        if spec.get("restartPolicy", "Always") == "Always":
            return None
        if ANN_RUN_SECONDS in ann:
            try:
                return float(ann[ANN_RUN_SECONDS])
            except ValueError:
                return None
        return self.cfg.job_seconds if "Job" in owner_kinds else None

    def _running_status(self, pod: Obj, node: str, started: float, *, ready: bool,
                        ready_since: float | None = None, taken: set[str] | None = None) -> Obj:
        """``taken``: the pod IPs the node's other live pods hold (the new one is added to it)."""
        since = rfc3339(started)
        ready_time = rfc3339(ready_since) if ready_since is not None else since
        index = self._node_index.get(node, 0)
        host_ip = node_ip(index)
        pod_ip = (pod.get("status") or {}).get("podIP") or pod_address(index, pod["metadata"]["uid"], taken or set())

        def cond(type_: str, ok: bool, at: str) -> Obj:
            return {"type": type_, "status": "True" if ok else "False", "lastProbeTime": None,
                    "lastTransitionTime": at}

        containers = (pod.get("spec") or {}).get("containers") or []
        return {
            "phase": "Running",
            "conditions": [cond("PodReadyToStartContainers", True, since), cond("Initialized", True, since),
                           cond("Ready", ready, ready_time), cond("ContainersReady", ready, ready_time),
                           cond("PodScheduled", True, since)],
            "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "startTime": since, "qosClass": _qos(pod),
            "containerStatuses": [{
                "name": c.get("name", f"c{i}"), "image": c.get("image", ""), "imageID": "",
                "containerID": f"drods-sim://{pod['metadata']['uid'][:8]}-{i}", "ready": ready, "started": True,
                "restartCount": 0, "state": {"running": {"startedAt": since}},
            } for i, c in enumerate(containers)],
        }

    @staticmethod
    def _exit_code(pod: Obj) -> int:
        """The annotation ``sim.drods.io/exit-code`` (a run-to-completion pod's exit status), else 0."""
        raw = (pod["metadata"].get("annotations") or {}).get(ANN_EXIT_CODE)
        try:
            return int(raw) if raw is not None else 0
        except ValueError:
            return 0

    @staticmethod
    def _finished_status(pod: Obj, status: Obj, now: float, exit_code: int = 0, message: str = "") -> Obj:
        """Succeeded on exit code 0, Failed (reason Error) otherwise, as the kubelet reports them; a
        ``message`` is the container's termination message (what it wrote to its terminationMessagePath)."""
        at = rfc3339(now)
        started = status.get("startTime", at)
        reason = "Completed" if exit_code == 0 else "Error"
        conds = [{**c, "status": "False", "reason": "PodCompleted" if exit_code == 0 else "PodFailed",
                  "lastTransitionTime": at}
                 if c.get("type") in ("Ready", "ContainersReady") else c for c in status.get("conditions") or []]
        return {**status, "phase": "Succeeded" if exit_code == 0 else "Failed", "conditions": conds,
                "containerStatuses": [
                    {**cs, "ready": False, "started": False,
                     "state": {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": started,
                                              "finishedAt": at, **({"message": message} if message else {})}}}
                    for cs in status.get("containerStatuses") or []]}

    async def _schedule(self, pods: dict[tuple[str, str], Obj], nodes: list[Obj], now: float) -> None:
        """Bind pending pods first-fit; those that fit nowhere get PodScheduled=False and stay Pending."""
        pending = sorted((p for p in pods.values() if not (p.get("spec") or {}).get("nodeName")
                          and not is_terminal(p) and not p["metadata"].get("deletionTimestamp")),
                         key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        if not pending:
            return
        known, self._requests = self._requests, {}

        def requests(pod: Obj) -> Resources:
            meta = pod["metadata"]
            key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
            r = known.get(key) if all(key) else None
            if r is None:
                r = pod_requests(pod)
            if all(key):
                self._requests[key] = r
            return r

        room = rooms(nodes, list(pods.values()), requests)
        ips = pod_ips(pods.values())
        writes = []
        for pod in pending:
            node, reason = place(pod, room)
            if node is not None:
                bound = {**pod, "spec": {**pod["spec"], "nodeName": node},
                         "status": self._running_status(pod, node, now, ready=self.cfg.startup_seconds <= 0,
                                                        taken=ips.setdefault(node, set()))}
                writes.append(self._put(K.POD, bound))
                continue
            status = {"phase": "Pending", "qosClass": _qos(pod), "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": reason,
                "lastProbeTime": None, "lastTransitionTime": rfc3339(now)}]}
            old = condition(pod, "PodScheduled")
            if old is None or old.get("message") != reason or old.get("status") != "False":
                writes.append(self._put(K.POD, {**pod, "status": status}))
        for result in await self._gather(writes):
            if result is not None:
                pods[_key(result)] = result

    async def _statuses(self, workloads: dict[str, list[Obj]], pods: dict[tuple[str, str], Obj],
                        nodes: list[Obj], stamp: str) -> None:
        owned = self._owned(pods)
        writes = []
        live: set[tuple[str, str]] = set()
        for kind_name, objs in workloads.items():
            kind = MANAGED_OWNERS[kind_name]
            for obj in objs:
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                key, mine = (kind_name, obj["metadata"]["uid"]), owned.get(obj["metadata"]["uid"], [])
                live.add(key)
                if self._is_settled(kind_name, obj, mine):
                    continue
                plan = self._plan(kind_name, obj, mine, nodes, stamp, {})
                if plan.status is not None and plan.status != (obj.get("status") or {}):
                    meta = obj["metadata"]
                    writes.append(self.registry.update_status(kind, meta["name"], plan.status, meta.get("namespace"),
                                                              resource_version=int(meta["resourceVersion"])))
                    self._settled.pop(key, None)
                elif not plan.create and not plan.delete and (inputs := self._inputs(kind_name, obj, mine)):
                    self._settled[key] = inputs
                else:
                    self._settled.pop(key, None)
        for gone in self._settled.keys() - live:
            del self._settled[gone]
        await self._gather(self._guard(w) for w in writes)

    async def _endpoint_slices(self, pods: dict[tuple[str, str], Obj]) -> None:
        """Each Service with a selector has its EndpointSlice of the pods it selects (`drods.sim.endpoints`)."""
        services = self._list(K.SERVICE)
        slices = self._list(K.ENDPOINT_SLICE)
        current = {_key(o): o for o in slices if E.managed(o)}
        wanted: dict[tuple[str, str], Obj] = {}
        for svc in services:
            if svc["metadata"].get("deletionTimestamp"):
                continue
            want = E.endpoint_slice(svc, pods.values())
            if want is not None:
                wanted[_key(want)] = want
        writes: list[Awaitable[Any]] = []
        for key, want in wanted.items():
            have = current.get(key)
            if have is None:
                writes.append(self._create(K.ENDPOINT_SLICE, want))
            elif not E.same_content(want, have):
                meta = {**have["metadata"], "labels": want["metadata"]["labels"]}
                writes.append(self._put(K.ENDPOINT_SLICE, {**have, **{k: want[k] for k in
                                                                     ("addressType", "endpoints", "ports")},
                                                           "metadata": meta}))
        writes += [self._delete(K.ENDPOINT_SLICE, o) for key, o in current.items() if key not in wanted]
        await self._gather(writes)

    # ---- writes ----------------------------------------------------------------------------------

    async def _guard(self, aw: Awaitable[Any]) -> Any:
        """A write that lost a race (409) or hit a vanished object (404) is retried by the next pass."""
        try:
            result = await aw
        except (NotFound, Conflict, AlreadyExists):
            self._retry = True
            return None
        except ApiError as e:
            log.warning("sim write failed: %s", e.message)
            self._retry = True
            return None
        rv = (result.get("metadata") or {}).get("resourceVersion") if isinstance(result, dict) else None
        if rv is not None:
            self._written = max(self._written, int(rv))
        return result

    async def _create(self, kind: Kind, obj: Obj) -> Obj | None:
        result: Obj | None = await self._guard(self.registry.create(kind, obj))
        return result

    async def _delete(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]
        try:
            await self.registry.delete(kind, meta["name"], meta.get("namespace"))
        except NotFound:
            pass
        except ApiError:
            self._retry = True

    async def _put(self, kind: Kind, obj: Obj) -> Obj | None:
        result: Obj | None = await self._guard(
            self.registry.put_object(kind, obj, resource_version=obj["metadata"].get("resourceVersion")))
        return result

    @staticmethod
    async def _gather(aws: Iterable[Awaitable[Any]]) -> list[Any]:
        """Run writes concurrently (the store batches them into group commits), a bounded number at a time."""
        items = list(aws)
        out: list[Any] = []
        for i in range(0, len(items), WRITE_CONCURRENCY):
            out += await asyncio.gather(*items[i:i + WRITE_CONCURRENCY])
        return out
