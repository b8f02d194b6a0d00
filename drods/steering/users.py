"""Users learned from demand: where a service's requests come from, fed to the scheduler.

Per service, the request counts the API servers share (`demand.py`) become a rate per client site
over a decaying window (``windowSeconds``: each poll, rate ← rate·e^(−Δt/τ) + (Δcount/Δt)·(1 − e^(−Δt/τ))).
Sites under ``floor`` of the total are left out; below ``minRequestsPerSecond`` nothing is learned.
The shares are written to the service's Binding (annotation ``multicluster.io/learned-users``, with
the registration's ``sla.maxDelayMs`` as the users' latency SLO) together with a reschedule — but
only once they differ from those written before by at least ``change`` (total variation distance)
for ``settleSeconds`` without a break: a burst shorter than that re-places nothing. The scheduler
then decides whether the move pays (its ``usersMinGainMs`` and move budget).

When a Binding's registration is gone (or names another workload), what steering fed it goes too, in one
write (`FORGET`): its learned users and the clusters steering's placement feedback offered it
(``multicluster.io/placement-offers``). Nothing is re-placed: an offer only widened the names the binding
may use, so its next decision (for whatever reason) may drop them; moving replicas now would act on a
deleted registration, which says nothing about where the users are.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drods.machinery.informer import subscribed
from drods.machinery.periodic import Periodic
from drods.model.annotations import LEARNED_USERS, PLACEMENT_OFFERS, USERS_MOVED, learned_users, placement_offers
from drods.model.keys import DEMAND_PREFIX
from drods.model.steering import foreign_workload, workload_key
from drods.model.timefmt import rfc3339_ms
from drods.steering.controller import SteeringInformers
from drods.steering.settings import UserLearning
from drods.store import Store

log = logging.getLogger(__name__)

LEASE = "steering-users"
# (binding name, reason, annotations): re-place the binding from scratch with those annotations set
Reschedule = Callable[[str, str, Mapping[str, str]], Awaitable[None]]
# (binding name): drop its learned users and placement offers (`FORGET`), moving nothing (their registration is gone)
Forget = Callable[[str], Awaitable[None]]
FORGET: Mapping[str, None] = {LEARNED_USERS: None, PLACEMENT_OFFERS: None}  # the annotations `Forget` removes


@dataclass(slots=True)
class SiteRates:
    """One service's decaying request rate per client site, from cumulative counts per process."""

    rates: dict[str, float] = field(default_factory=dict)
    last: dict[tuple[str, str], int] = field(default_factory=dict)
    at: float | None = None

    def observe(self, counts: Mapping[str, Mapping[str, int]], now: float, tau: float) -> None:
        """``counts``: process → client site → cumulative requests."""
        delta: dict[str, int] = {}
        for proc, sites in counts.items():
            for site, c in sites.items():
                before = self.last.get((proc, site), 0)
                delta[site] = delta.get(site, 0) + (c - before if c >= before else c)  # c < before: restarted
                self.last[(proc, site)] = c
        if self.at is None:  # the first read only sets the baseline
            self.at = now
            return
        dt = max(now - self.at, 1e-3)
        self.at = now
        keep = math.exp(-dt / tau)
        for site in set(self.rates) | set(delta):
            self.rates[site] = self.rates.get(site, 0.0) * keep + delta.get(site, 0) / dt * (1.0 - keep)

    def shares(self, floor: float, min_rate: float) -> dict[str, float] | None:
        total = sum(self.rates.values())
        if total <= 0 or total < min_rate:
            return None
        kept = {s: r for s, r in self.rates.items() if r / total >= floor}
        ksum = sum(kept.values())
        return {s: r / ksum for s, r in sorted(kept.items())} if ksum > 0 else None


def distance(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Total variation distance between two distributions over sites."""
    return 0.5 * sum(abs(a.get(s, 0.0) - b.get(s, 0.0)) for s in set(a) | set(b))


def _published(binding: Mapping[str, Any]) -> dict[str, float] | None:
    doc = learned_users(binding)
    if doc is None:
        return None
    return {str(u.get("site")): float(u.get("weight") or 0.0) for u in doc["sites"] if isinstance(u, dict)}


def _names(reg: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a registration's Binding is found by: its service and its workload."""
    return (reg.get("spec") or {}).get("serviceId"), workload_key(reg)


def _describe(shares: Mapping[str, float]) -> str:
    return ", ".join(f"{s} {w:.0%}" for s, w in sorted(shares.items(), key=lambda kv: -kv[1]))


class UsersLearner:
    """The leader that turns demand into learned users on Bindings (see the module doc)."""

    def __init__(self, store: Store, reschedule: Reschedule, informers: SteeringInformers,
                 settings: UserLearning, clock: Callable[[], float] = time.time, forget: Forget | None = None) -> None:
        self.store = store
        self.reschedule = reschedule
        self.forget = forget
        self.inf = informers
        self.settings = settings
        self.clock = clock
        self.rates: dict[str, SiteRates] = {}
        self.pending: dict[str, float] = {}  # service → since when its users differ from those written
        self.registered: set[tuple[str, str]] | None = None  # (service, binding) last poll; None: not yet looked
        self.went = False  # a registration was deleted or renamed its service or workload since the last poll

    async def run(self) -> None:
        if not self.settings.enabled:
            return
        with subscribed((self.inf.registrations, self._on_registration)):
            await Periodic(LEASE, self.step, self.settings.pollSeconds, first_at_start=True,
                           restart_on_failure=True).run()

    def _on_registration(self, _key: str, old: Any, new: Any) -> None:
        """Note a registration that went: one that came and went between two polls (its Binding offered a
        cluster meanwhile) is in no poll's registered set (status writes are no reason to look)."""
        if isinstance(old, dict) and (not isinstance(new, dict) or _names(old) != _names(new)):
            self.went = True

    async def _demand(self) -> dict[str, dict[str, dict[str, int]]]:
        """service → process → client site → cumulative requests."""
        kvs, _ = await self.store.range(DEMAND_PREFIX)
        out: dict[str, dict[str, dict[str, int]]] = {}
        for kv in kvs:
            sid, _, proc = kv.key[len(DEMAND_PREFIX):].partition("/")
            try:
                counts = json.loads(kv.value).get("counts") or {}
            except ValueError:
                continue
            out.setdefault(sid, {})[proc] = {str(k): int(v) for k, v in counts.items()}
        return out

    def _services(self) -> dict[str, tuple[dict[str, Any], float | None]]:
        """serviceId → (its workload's Binding, the registration's delay threshold)."""
        by_ref: dict[tuple[str, str, str], dict[str, Any]] = {}
        if not self.inf.registrations.cache:
            return {}  # no scan of a fleet's Bindings every poll for nothing
        for b in self.inf.bindings.cache.values():
            ref = ((b or {}).get("spec") or {}).get("resource")
            if isinstance(ref, dict) and not b["metadata"].get("deletionTimestamp"):
                by_ref[(str(ref.get("kind")), str(ref.get("namespace") or "default"), str(ref.get("name")))] = b
        out: dict[str, tuple[dict[str, Any], float | None]] = {}
        for reg in self.inf.registrations.cache.values():
            if not reg or foreign_workload(reg) is not None:  # another namespace's workload is not its to steer
                continue
            spec = reg.get("spec") or {}
            _, kind, ns, name = workload_key(reg)
            b = by_ref.get((kind, ns, name))
            if b is not None and spec.get("serviceId"):
                out[str(spec["serviceId"])] = (b, (spec.get("sla") or {}).get("maxDelayMs"))
        return out

    async def step(self) -> None:
        s, now = self.settings, self.clock()
        services = self._services()
        await self._forget_orphans(services)
        for sid, counts in (await self._demand()).items():
            rates = self.rates.setdefault(sid, SiteRates())
            rates.observe(counts, now, s.windowSeconds)
            found = services.get(sid)
            shares = rates.shares(s.floor, s.minRequestsPerSecond)
            if found is None or shares is None:
                continue
            binding, slo = found
            before = _published(binding)
            if before is not None and distance(shares, before) < s.change:
                self.pending.pop(sid, None)  # back within the change: a burst that passed
                continue
            since = self.pending.setdefault(sid, now)
            if now - since < s.settleSeconds:
                continue
            await self._publish(sid, binding, shares, slo, before, now)
            self.pending.pop(sid, None)

    async def _forget_orphans(self, services: Mapping[str, tuple[dict[str, Any], float | None]]) -> None:
        """A Binding's learned users whose registration is gone (or now names another workload) are dropped,
        with its placement offers: nothing learns them any more, and their SLO would filter its clusters for
        ever. So are the offers of a Binding no registration names (one without learned users: too little
        demand). Looked for at the first poll and whenever a registration went since the last one (not a
        scan of the fleet every poll)."""
        now_registered = {(sid, str(b["metadata"]["name"])) for sid, (b, _) in services.items()}
        gone = self.registered is None or self.went or bool(self.registered - now_registered)
        self.registered, self.went = now_registered, False
        if not gone or self.forget is None:
            return
        named = {name for _, name in now_registered}
        for b in list(self.inf.bindings.cache.values()):
            doc = learned_users(b or {})
            name = str(((b or {}).get("metadata") or {}).get("name") or "")
            stale_users = doc is not None and (str(doc.get("serviceId") or ""), name) not in now_registered
            if not name or not (stale_users or (name not in named and placement_offers(b or {}))):
                continue
            try:
                await self.forget(name)
                log.info("steering: binding %s forgets the users learned for service %s and its placement offers: "
                         "its registration is gone", name, (doc or {}).get("serviceId"))
            except Exception:  # noqa: BLE001 - one binding's failure must not stop the others
                log.exception("steering: forgetting the learned users of %s failed", name)

    async def _publish(self, sid: str, binding: Mapping[str, Any], shares: Mapping[str, float], slo: float | None,
                       before: Mapping[str, float] | None, now: float) -> None:
        doc = {"sites": [{"site": k, "weight": round(v, 4)} for k, v in shares.items()], "latencySLOMs": slo,
               "learnedAt": rfc3339_ms(now), "serviceId": sid}
        was = f" (were {_describe(before)})" if before else ""
        reason = f"{USERS_MOVED}: service {sid}'s requests now come from {_describe(shares)}{was}"
        name = binding["metadata"]["name"]
        try:
            await self.reschedule(name, reason, {LEARNED_USERS: json.dumps(doc)})
            log.info("steering: %s → binding %s", reason, name)
        except Exception:  # noqa: BLE001 - one binding's failure must not stop learning for others
            log.exception("steering: writing the learned users of %s to %s failed", sid, name)
