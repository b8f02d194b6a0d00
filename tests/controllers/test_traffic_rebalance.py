"""The descheduler's traffic rebalance (H1) over a real registry and store, on an injected clock: the
callee moves to the caller that arrived after it through the Rescheduler, once per cool-down."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from drods.api.context import ApiContext
from drods.controllers.rescheduler import Rescheduler
from drods.controllers.traffic_rebalance import KIND, TrafficRebalancer
from drods.model.annotations import RESCHEDULE_REASON, TRAFFIC_REBALANCED_AT
from drods.model.keys import STATUS_PREFIX, TRAFFIC_KEY
from drods.model.kinds import BINDING, CLUSTER
from drods.model.timefmt import rfc3339, rfc3339_ms
from drods.model.traffic import TrafficReport, merge_report
from drods.registry.patch import MERGE_PATCH
from drods.scheduler.profile import Profile
from drods.scheduler.rebalance import TrafficRebalancePolicy
from drods.store.sqlite import SqliteStore
from tests.monitor_e2e.conftest import Clock

DB = "deployment-shop-db"
WEB = "deployment-shop-web"


def _binding(name: str, workload: str, cluster: str, replicas: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding", "metadata": {"name": name},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop",
                                  "name": workload},
                     "replicas": replicas, "resources": {"cpu": 1, "memory": 1}, **spec},
            "status": {"phase": "Running", "placement": [{"cluster": cluster, "replicas": replicas}]}}


async def test_a_callee_moves_to_its_later_caller_once_per_cooldown(tmp_path: Path) -> None:
    ctx = ApiContext.build(SqliteStore(str(tmp_path / "drods.db")), tmp_path)
    reg, store = ctx.registry, ctx.store
    clock = Clock(t=1_800_000_000.0)
    try:
        for name, region, site, far in (("eu1", "eu", "FRA", "IAD"), ("us1", "us", "IAD", "FRA")):
            await reg.create(CLUSTER, {"metadata": {"name": name}, "spec": {
                "region": region, "zone": f"{region}-a",
                "network": {"identifier": site, "latencyMs": {site: 2.0, far: 90.0}}}})
            st = {"cpu": {"capacity": 64, "allocatable": 64, "allocated": 8},
                  "memory": {"capacity": 256, "allocatable": 256, "allocated": 32}}
            doc = {"status": st, "publishedAt": rfc3339(time.time())}  # fresh: the cluster is ready
            await store.put(STATUS_PREFIX + name, json.dumps(doc).encode())
        await reg.create(BINDING, _binding(DB, "db", "eu1", 2))
        # the caller arrived later and must stay within 20 ms of IAD: only us1
        await reg.create(BINDING, _binding(WEB, "web", "us1", 3,
                                           network={"identifier": "IAD", "maxLatencyMs": 20}))
        report = TrafficReport.model_validate({"edges": [{"from": {"namespace": "shop", "name": "web"},
                                                          "to": {"namespace": "shop", "name": "db"},
                                                          "bytesPerSecond": 5e6}]})
        await store.put(TRAFFIC_KEY, json.dumps(merge_report(None, report, clock())).encode())
        ops: list[tuple[str, str, dict[str, Any]]] = []

        async def record(kind: str, reason: str, **kw: Any) -> bool:
            ops.append((kind, reason, kw))
            return True

        def rebalancer(policy: TrafficRebalancePolicy) -> TrafficRebalancer:
            return TrafficRebalancer(store, reg, Profile.default(), policy, Rescheduler(reg, clock=clock),
                                     clock=clock, record=record)

        reb = rebalancer(TrafficRebalancePolicy(cooldownSeconds=600))
        # one report is a burst until the same edge is reported over the settle window (300 s)
        assert await reb.pass_once() == []
        clock.advance(299)
        graph = merge_report(json.loads((await store.get(TRAFFIC_KEY)).value), report, clock())  # type: ignore[union-attr]
        await store.put(TRAFFIC_KEY, json.dumps(graph).encode())
        assert await reb.pass_once() == []
        clock.advance(1)
        graph = merge_report(graph, report, clock())
        await store.put(TRAFFIC_KEY, json.dumps(graph).encode())
        moves = await reb.pass_once()
        assert [(m.binding, m.outcome) for m in moves] == [(DB, "executed")]  # web is kept by its latency need
        assert moves[0].verdict.placement == (("us1", 2),)
        db = await reg.get(BINDING, DB)
        ann = db["metadata"]["annotations"]
        assert db["spec"]["rescheduleTriggeredAt"] == rfc3339_ms(clock())
        assert ann[TRAFFIC_REBALANCED_AT] == rfc3339_ms(clock())
        assert ann[RESCHEDULE_REASON].startswith("traffic rebalance: traffic-weighted distance to its peers")
        kind, reason, kw = ops[0]
        assert kind == KIND and kw["binding"] == DB and kw["cluster"] == "us1" and reason == ann[RESCHEDULE_REASON]
        assert kw["details"]["outcome"] == "executed" and kw["details"]["trigger"]["costReduction"] == 1.0
        # the reschedule is pending: no second request
        assert await reb.pass_once() == []
        # the scheduler decided again but left it on eu1: within the cool-down nothing moves it ...
        decided = {"status": {"scheduledTime": rfc3339_ms(clock.advance(1)), "placement": db["status"]["placement"]}}
        await reg.patch(BINDING, DB, decided, MERGE_PATCH, subresource="status")
        clock.advance(300)
        assert await reb.pass_once() == []
        # ... and after it the workload may be asked to move once more
        clock.advance(400)
        assert [m.binding for m in await reb.pass_once()] == [DB]
        # switched off in the configuration: no pass
        clock.advance(1000)
        assert await rebalancer(TrafficRebalancePolicy(enabled=False)).pass_once() == []
        assert len(ops) == 2
    finally:
        await store.close()
