"""A member's pods, listed once and then followed by a watch (Karmada's pod informer, with its
transform): what the resource summary and the workloads' usage read of them, and nothing more.

Both readers used to list every pod of the member — the summary every ``summaryIntervalSeconds``,
the usage every ``usagePollSeconds``. At 30,000 pods over 100 members that was ~230 MB of JSON a
summary round for the control plane to read and parse (a fifth of the time it held the GIL, sampled
late in a cold start of 30,000 workloads) and for the members to write, for numbers that change
only when a pod does. Followed, a pod costs its events; each is kept pruned to the fields the
readers use (`pruned`), its parts shared with the other pods' equal ones (its status, its spec on the
same node with the same resources: 1.1 KB a pod where it took 2.6).

While it is not following (not started, listing, or its watch broke and waits to list again) the
readers list as before (`MemberClient.pods`), so a member without watches is still summarised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from drods.members.reflector import Reflector
from drods.model import jsondoc
from drods.model.sharing import SharedPool

Obj = dict[str, Any]

WATCH_SECONDS = 60.0  # one watch request's length; then it is made again from where it stopped
RETRY_SECONDS = 5.0  # after a failure, listing again waits this long
# the pods' equal parts, every member's (their own pool: each workload's labels are parts seen once, which
# would empty the pool the Bindings' informer shares its parts through)
POD_PARTS: SharedPool[bytes, Any] = SharedPool(1 << 12)


class PodSource(Protocol):
    """The calls the cache makes on its member (`drods.members.client.MemberClient`)."""

    name: str

    def list_pods_versioned(self) -> Awaitable[tuple[list[Obj], str]]: ...

    def watch_pods(self, resource_version: str, seconds: float,
                   deliver: Callable[[str, Obj], None]) -> Awaitable[str]: ...


def _resources(containers: Any) -> list[Obj]:
    return [{"resources": c.get("resources") or {}} for c in containers or [] if isinstance(c, dict)]


def pruned(pod: Obj) -> Obj:
    """``pod`` with only what `drods.members.summary` and `drods.members.workload_usage` read: its
    name, namespace, labels and deletion, node, containers' resources, overhead, phase and Ready
    condition (~0.5 KB of a ~8 KB pod)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    out_meta = {k: meta[k] for k in ("name", "namespace", "labels", "deletionTimestamp") if k in meta}
    out_spec: Obj = {"containers": _resources(spec.get("containers"))}
    if spec.get("initContainers"):
        out_spec["initContainers"] = _resources(spec.get("initContainers"))
    for k in ("nodeName", "overhead"):
        if spec.get(k):
            out_spec[k] = spec[k]
    ready = [c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"]
    out_status: Obj = {"phase": status.get("phase")}
    if ready:
        out_status["conditions"] = [{"type": "Ready", "status": ready[0].get("status")}]
    return {"metadata": out_meta, "spec": out_spec, "status": out_status}


def _key(pod: Obj) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class PodCache:
    """The pods of one member, pruned, kept current by list and watch on the event loop that started it."""

    def __init__(self, source: PodSource, *, expired: Callable[[BaseException], bool] = lambda _e: False,
                 watch_seconds: float = WATCH_SECONDS, retry_seconds: float = RETRY_SECONDS) -> None:
        """``expired``: whether a watch's failure says the member no longer has its history (410):
        then it lists again at once, after any other failure ``retry_seconds`` later."""
        self.source = source
        self._pods: dict[str, dict[str, Obj]] = {}  # namespace → name → pod
        self._reflector = Reflector[Obj](
            name=f"{source.name} pods", list_call=source.list_pods_versioned, watch_call=source.watch_pods,
            replace=self._replace, apply=self._apply, transform=pruned, expired=expired,
            watch_seconds=watch_seconds, retry_seconds=retry_seconds)
        self.lists = 0  # listings made (the first and each after a broken watch)

    @property
    def following(self) -> bool:
        """Listed, and the watch goes on from that listing, on the running loop."""
        return self._reflector.following

    @property
    def running(self) -> bool:
        return self._reflector.running

    def start(self) -> None:
        """Follow on the running loop (again, if it stopped or was started on another loop)."""
        if not self._reflector.running:
            self._reflector.start()

    async def stop(self) -> None:
        await self._reflector.stop()

    def pods(self, namespace: str | None = None) -> list[Obj]:
        """The pods held (of ``namespace``, or all), pruned; shared documents: read, don't change."""
        if namespace is None:
            return [p for pods in self._pods.values() for p in pods.values()]
        return list(self._pods.get(namespace, {}).values())

    def _replace(self, pods: list[Obj]) -> None:
        self.lists += 1
        self._pods = {}
        for p in pods:
            self._apply("ADDED", p)

    def _apply(self, event: str, pod: Obj) -> None:
        ns, name = _key(pod)
        if event == "DELETED":
            held = self._pods.get(ns)
            if held is not None:
                held.pop(name, None)
                if not held:
                    del self._pods[ns]
        elif event in ("ADDED", "MODIFIED"):
            self._pods.setdefault(ns, {})[name] = jsondoc.shared_parts(pod, POD_PARTS, own_members=False)
