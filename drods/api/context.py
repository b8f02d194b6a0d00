"""What every request handler needs, built once per server process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import Request
from prometheus_client import CollectorRegistry

from drods.api.audit import AuditLog
from drods.api.auth import Principal, TokenAuthority, bearer_token, load_or_create_signing_key
from drods.api.observability import ApiMetrics, InstrumentedStore
from drods.api.settings import ApiSettings
from drods.api.work_watches import WorkWatches
from drods.autoscaling.admission import one_autoscaler_per_workload
from drods.errors import ApiError
from drods.members.search_cache import SearchCache
from drods.migration.admission import data_step_declared, one_plan_per_workload
from drods.model.kinds import ALL_KINDS, Kind
from drods.registry.catalog import KindCatalog, check_definition
from drods.registry.cluster_identity import one_cluster_per_member
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.registry.taint_policies import one_policy_per_taint
from drods.security.envelope import Envelope, Keyring
from drods.steering.admission import workload_of_own_namespace
from drods.store import Store

if TYPE_CHECKING:
    from drods.controllers.rescheduler import Rescheduler
    from drods.monitor.service import MonitorService
    from drods.scheduler.profile import Profile
    from drods.schedulerd.service import SchedulerService
    from drods.steering.demand import DemandRecorder
    from drods.steering.settings import ProbeSettings


@dataclass
class ApiContext:
    """The API server's typed view of its process: what the routes may use, set by the assembly
    (`drods.assembly`) from the components this process runs; None where it runs none."""

    store: Store
    registry: ObjectRegistry
    tokens: TokenAuthority
    audit: AuditLog
    metrics: ApiMetrics
    data_dir: Path
    # The kinds this server serves (its fixed table plus the custom kinds of stored definitions); a
    # simulated member cluster has a different fixed table.
    catalog: KindCatalog = field(default_factory=lambda: KindCatalog(ALL_KINDS))
    monitor: MonitorService | None = None
    scheduler: SchedulerService | None = None
    rescheduler: Rescheduler | None = None
    # The ``api`` section of the configuration, and the scheduler profile it names (the what-if
    # routes simulate with it in a process without a scheduler).
    api: ApiSettings = field(default_factory=ApiSettings)
    profile: Profile | None = None
    # Served on /metrics beside the API's own.
    prometheus_registries: list[CollectorRegistry] = field(default_factory=list)
    # The process's readiness checks beside the store's (its manager's: caches listed, components
    # warm); None in a server without a manager.
    readiness: Callable[[], dict[str, bool]] | None = None
    # Set when the server starts to stop: long-lived responses (watches) end instead of holding it.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # requests per client site this server resolved, shared through the store (made on first use)
    demand: DemandRecorder | None = None
    # ``steering.probe``: the client sites' probe endpoints a pull member's agent measures too
    probe: ProbeSettings | None = None
    # Karmada's search cache (`drods.members.search_cache`): each API replica fills its own
    # (`drods.controllers.search`), served read-only by `drods.api.routes.search`
    search: SearchCache = field(default_factory=SearchCache)
    # the pull-mode agents' watches of their Works, through one watch of the store
    work_watches: WorkWatches = field(init=False)

    def __post_init__(self) -> None:
        self.work_watches = WorkWatches(self.registry, self.stopping)

    @property
    def kinds(self) -> tuple[Kind, ...]:
        return self.catalog.kinds()

    @classmethod
    def build(cls, store: Store, data_dir: Path, *, jwks_url: str | None = None,
              rs256_public_key: str | None = None, jwt_issuer: str | None = None,
              jwt_audience: str | None = None, kinds: tuple[Kind, ...] = ALL_KINDS) -> ApiContext:
        data_dir.mkdir(parents=True, exist_ok=True)
        metrics = ApiMetrics()
        instrumented = InstrumentedStore(store, metrics)
        secrets = SecretBox(load_or_create_key(data_dir / "encryption.key"), Envelope(Keyring.load(data_dir)))
        tokens = TokenAuthority(load_or_create_signing_key(data_dir / "jwt.key"),
                                jwks_url=jwks_url, rs256_public_key=rs256_public_key,
                                issuer=jwt_issuer, audience=jwt_audience)
        registry = ObjectRegistry(instrumented, secrets, (one_autoscaler_per_workload, one_plan_per_workload,
                                                          data_step_declared, check_definition, one_cluster_per_member,
                                                          one_policy_per_taint, workload_of_own_namespace))
        return cls(instrumented, registry, tokens, AuditLog(instrumented),
                   metrics, data_dir, KindCatalog(kinds))


def context(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.ctx
    return ctx


async def monitoring(request: Request) -> MonitorService:
    """This process's monitoring, started, for the routes that need it (503 in a process without it)."""
    monitor = context(request).monitor
    if monitor is None:
        raise ApiError(503, "UNAVAILABLE", "monitoring does not run in this process", {})
    await monitor.start()
    return monitor


async def authenticate(request: Request) -> Principal:
    """The caller: the bearer token verified once per request (remembered for the audit log). Also a
    route's dependency: an ``async`` one runs on the event loop, where FastAPI runs a plain function in
    a worker thread, a hop that cost more than the check itself."""
    cached = getattr(request.state, "principal", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    principal = await context(request).tokens.verify_async(bearer_token(request.headers.get("authorization")))
    request.state.principal = principal
    return principal
