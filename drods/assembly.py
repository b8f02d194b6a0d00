"""Which components a process runs, and what each is built from (A2, A3, A6).

`assemble` builds one `ControlPlane`: the manager (store, registry, shared informers, leader
elections, restarts) with the chosen components registered on it, and the API server's typed
context. ``drods serve`` runs every component; ``drods apiserver``, ``drods scheduler`` and
``drods controllers`` run subsets against one store (etcd), and single-active components elect a
leader per lease:

========================  =======================  ============================================
component                 runs                     lease
========================  =======================  ============================================
API + monitoring ingest   every replica            —
monitoring maintenance    every replica            — (idempotent)
scheduler                 every replica (warm)     ``scheduler`` (decisions, fenced)
resource detector         leader                   ``resource-detector``
namespace controller      leader                   ``namespace-controller`` (with the detector)
member controllers        leader                   ``member-controllers``
search cache (Karmada)    every API replica        ``search-cache`` (its registries' status)
monitoring collectors     leader                   ``monitor-collectors``
descheduler (auto-ops)    leader                   ``descheduler`` (with the H1 traffic rebalance)
autoscaler                leader                   ``autoscaler``
migration plans (F3)      leader                   ``migration``
traffic steering (CATS)   leader                   ``steering``
service directory (F8)    leader                   ``service-directory``
MultiClusterServices      leader                   ``multicluster-services``
MultiClusterIngresses     leader                   ``multicluster-ingresses``
store compactor           every replica            — (compaction is idempotent)
========================  =======================  ============================================
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from drods.api.audit import ComponentAudit
from drods.api.auth import TokenAuthority
from drods.api.context import ApiContext
from drods.api.settings import ApiSettings
from drods.autoscaling.controller import LEASE as AUTOSCALER_LEASE
from drods.autoscaling.controller import Autoscaler, AutoscalerSettings
from drods.config.model import DRODSConfiguration
from drods.controllers.cache_planner import LEASE as CACHE_PLANNER_LEASE
from drods.controllers.cache_planner import CachePlanner, CachePlannerSettings
from drods.controllers.compactor import Compactor
from drods.controllers.descheduler import Descheduler
from drods.controllers.detector import ResourceDetector
from drods.controllers.fleet import MemberInformers
from drods.controllers.manager import LEASE as MEMBERS_LEASE
from drods.controllers.manager import MemberControllers
from drods.controllers.namespaces import LEASE as NAMESPACES_LEASE
from drods.controllers.namespaces import NamespaceController
from drods.controllers.rescheduler import Rescheduler, trigger
from drods.controllers.search import LEASE as SEARCH_LEASE
from drods.controllers.search import SearchCacheController, SearchStatusTerm
from drods.controllers.settings import MemberSettings
from drods.controllers.traffic_rebalance import TrafficRebalancer
from drods.machinery.manager import Leadership, Manager
from drods.machinery.tasks import stop_tasks
from drods.members.clients import MemberClients
from drods.migration.controller import LEASE as MIGRATION_LEASE
from drods.migration.controller import MigrationController
from drods.model.interpreter import Interpreter
from drods.model.keys import CLUSTER_CUTOFFS_PREFIX, TOKENS_PREFIX
from drods.model.kinds import (
    BINDING,
    CLUSTER,
    CUSTOM_RESOURCE_DEFINITION,
    INTERPRETER_CUSTOMIZATION_KINDS,
    RESOURCE_REGISTRY,
)
from drods.model.migration import MigrationSettings
from drods.model.reschedule import RescheduleHook
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.collectors import Collector
from drods.monitor.components import MonitorCollectors, MonitorMaintenance
from drods.monitor.service import MonitorService, MonitorSettings
from drods.monitor.subscriptions import subscriptions_of
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.registry.patch import MERGE_PATCH
from drods.scheduler.profile import Profile
from drods.schedulerd.service import SchedulerService, SchedulerSettings
from drods.security.at_rest import EncryptionConfig
from drods.security.envelope import Envelope, Keyring
from drods.security.tokens import cutoffs, decode_cutoff, decode_record, revocations
from drods.steering.controller import LEASE as STEERING_LEASE
from drods.steering.controller import SteeringController, SteeringInformers
from drods.steering.directory import LEASE as DIRECTORY_LEASE
from drods.steering.directory import DirectoryController, DirectoryInformers
from drods.steering.multicluster_ingress import LEASE as MCI_LEASE
from drods.steering.multicluster_ingress import MciInformers, MultiClusterIngressController
from drods.steering.multicluster_service import LEASE as MCS_LEASE
from drods.steering.multicluster_service import McsInformers, MultiClusterServiceController
from drods.steering.probing import LEASE as PROBE_LEASE
from drods.steering.probing import NetworkProber
from drods.steering.settings import SteeringSettings
from drods.steering.users import FORGET, UsersLearner
from drods.steering.users import LEASE as USERS_LEASE
from drods.store import Store
from drods.store.encrypted import EncryptingStore

log = logging.getLogger(__name__)


class Component(enum.Enum):
    API = "api"
    SCHEDULER = "scheduler"
    DETECTOR = "detector"
    MEMBERS = "members"
    COLLECTORS = "collectors"
    DESCHEDULER = "descheduler"
    COMPACTOR = "compactor"
    AUTOSCALER = "autoscaler"
    STEERING = "steering"
    CACHE_PLANNER = "cache-planner"
    MIGRATION = "migration"


SERVE = frozenset(Component)
APISERVER = frozenset({Component.API})
SCHEDULER = frozenset({Component.SCHEDULER})
CONTROLLERS = frozenset({Component.DETECTOR, Component.MEMBERS, Component.COLLECTORS, Component.DESCHEDULER,
                         Component.COMPACTOR, Component.AUTOSCALER, Component.STEERING, Component.CACHE_PLANNER,
                         Component.MIGRATION})
# Monitoring is built where something feeds or reads it.
_NEEDS_MONITOR = frozenset({Component.API, Component.MEMBERS, Component.COLLECTORS, Component.DESCHEDULER})


@dataclass
class ComponentSettings:
    """What the components are built from: the sections of the configuration file (`drods.config`,
    see `from_config`) plus what only tests and the process itself set. Nothing here reads a file."""

    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    profile: Profile | None = None  # None: the default profile
    monitoring: MonitorSettings | None = None  # None: the defaults
    members: MemberSettings | None = None  # None: the defaults
    autoops: AutoOpsPolicy | None = None  # None: the defaults
    api: ApiSettings = field(default_factory=ApiSettings)
    steering: SteeringSettings | None = None  # None: the defaults
    clock: Callable[[], float] = time.time  # monitoring's and the descheduler's clock (tests move it)
    collectors: list[Collector] = field(default_factory=list)  # beside the built-in Prometheus one
    identity: str | None = None  # name in every leader election of this process
    # What carries out the descheduler's requests (None: a Rescheduler over its fenced registry).
    reschedule_hook: RescheduleHook | None = None
    lease_ttl: int = 10
    autoscaling: AutoscalerSettings = field(default_factory=AutoscalerSettings)
    datasets: CachePlannerSettings = field(default_factory=CachePlannerSettings)
    migration: MigrationSettings = field(default_factory=MigrationSettings)  # the default mover of a drain
    encryption: EncryptionConfig = field(default_factory=EncryptionConfig)  # the kinds sealed at rest

    def rescheduler(self, registry: ObjectRegistry) -> Rescheduler:
        return Rescheduler(registry, volume_copy_image=self.migration.volumeCopyImage,
                           freeze_seconds=self.migration.freezeSeconds)

    @classmethod
    def from_config(cls, config: DRODSConfiguration, *, identity: str | None = None,
                    lease_ttl: int = 10) -> ComponentSettings:
        """Each component's section of a validated configuration, with the process's identity and
        lease TTL (command-line flags)."""
        return cls(scheduler=config.scheduler.settings(identity=identity, lease_ttl=lease_ttl),
                   profile=Profile.from_spec(config.scheduler.profile), monitoring=config.monitoring,
                   members=config.members, autoops=config.autoops, api=config.api, steering=config.steering,
                   autoscaling=config.autoscaling.settings(), datasets=config.datasets,
                   migration=config.migration,
                   encryption=config.encryption, identity=identity, lease_ttl=lease_ttl)


@dataclass
class ControlPlane:
    """One process's components: built by `assemble`, run with `running`."""

    manager: Manager
    context: ApiContext
    components: frozenset[Component]
    monitor: MonitorService | None = None
    scheduler: SchedulerService | None = None
    # The member controllers of the current leadership term, while this process leads it.
    members: MemberControllers | None = None
    # The steering controller of the current leadership term, while this process leads it.
    steering: SteeringController | None = None

    @property
    def store(self) -> Store:
        return self.context.store

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Start the manager and monitoring (whose caches are the manager's informers); on exit stop
        them, then close the store."""
        subs = subscriptions_of(self.monitor) if self.monitor is not None else None
        task = asyncio.create_task(self.manager.run(), name="manager")
        if self.monitor is not None and subs is not None:
            try:
                await self.monitor.start()
                await subs.acquire()
            except Exception as e:  # noqa: BLE001 - routes retry start(); the process must come up
                log.warning("monitoring did not start: %s", str(e) or type(e).__name__)  # (a timeout says nothing)
        try:
            yield
        finally:
            await stop_tasks([task])
            if self.monitor is not None and subs is not None:
                await subs.release()
                await self.monitor.close()
            await self.context.store.close()


def follow_revocations(manager: Manager, tokens: TokenAuthority) -> None:
    """Keep ``tokens.revoked`` equal to the revoked IDs in the store (`drods token revoke`), and its agent
    cutoffs to the deleted Clusters'."""

    manager.informer(TOKENS_PREFIX, decode_record).on_change(revocations(tokens))
    manager.informer(CLUSTER_CUTOFFS_PREFIX, decode_cutoff).on_change(cutoffs(tokens))


def encrypted_store(store: Store, data_dir: Path, encryption: EncryptionConfig | None = None) -> EncryptingStore:
    """``store`` as every component of a control-plane process sees it: the kinds ``encryption``
    names (default: `drods.security.at_rest.DEFAULT_RESOURCES`) sealed at rest with the data dir's
    keyring."""
    if isinstance(store, EncryptingStore):
        return store
    return EncryptingStore(store, Envelope(Keyring.load(data_dir)), (encryption or EncryptionConfig()).prefixes())


def assemble(store: Store, data_dir: Path, components: Iterable[Component] = SERVE, *,
             settings: ComponentSettings | None = None, jwks_url: str | None = None,
             rs256_public_key: str | None = None) -> ControlPlane:
    """Build the chosen components over ``store``; nothing runs until `ControlPlane.running`."""
    s = settings or ComponentSettings()
    plane, interpreter = _foundation(store, data_dir, frozenset(components), s, jwks_url, rs256_public_key)
    chosen, manager, ctx = plane.components, plane.manager, plane.context
    profile = s.profile or Profile.default()
    monitor: MonitorService | None = None
    if chosen & _NEEDS_MONITOR:
        monitor = plane.monitor = ctx.monitor = MonitorService(
            ctx.store, data_dir, s.monitoring or MonitorSettings(), autoops=s.autoops or AutoOpsPolicy(),
            clock=s.clock, informers=manager.informers)
        ctx.prometheus_registries.append(monitor.metrics.registry)
        manager.add("monitor-maintenance", MonitorMaintenance(monitor))
    if Component.SCHEDULER in chosen:
        scheduler = plane.scheduler = ctx.scheduler = SchedulerService(
            ctx.store, profile=profile, settings=s.scheduler, informers=manager.informers)
        ctx.prometheus_registries.append(scheduler.metrics.registry)
        scheduler.register(manager)
    if Component.DETECTOR in chosen:
        informers = ResourceDetector.informers(manager)
        workers = (s.members or MemberSettings()).detectorWorkers
        manager.add_leader("resource-detector", lambda lead: ResourceDetector(
            lead.registry, **informers, catalog=ctx.catalog, interpreter=interpreter, workers=workers))
        # a deleted namespace's templates go, so the detector's Bindings and the members' copies go
        namespace_informers = NamespaceController.informers(manager)
        manager.add_leader(NAMESPACES_LEASE, lambda lead: NamespaceController(
            lead.registry, **namespace_informers, catalog=ctx.catalog))
    if Component.API in chosen:
        _search_cache(plane, s)
    if monitor is not None:
        _operations(plane, s, monitor, interpreter, profile)
    if Component.STEERING in chosen:
        _steering(plane, s)
    _autonomy(plane, s, monitor, profile)
    return plane


def _foundation(store: Store, data_dir: Path, chosen: frozenset[Component], s: ComponentSettings,
                jwks_url: str | None, rs256_public_key: str | None) -> tuple[ControlPlane, Interpreter]:
    """The API context, the manager and what every process learns from the store (custom kinds,
    interpreter customizations, token revocations), with the component audit."""
    store = encrypted_store(store, data_dir, s.encryption)
    ctx = ApiContext.build(store, data_dir, jwks_url=jwks_url or s.api.jwksUrl, rs256_public_key=rs256_public_key,
                           jwt_issuer=s.api.jwtIssuer, jwt_audience=s.api.jwtAudience)
    ctx.api = s.api
    ctx.profile = s.profile or Profile.default()
    ctx.probe = (s.steering or SteeringSettings()).probe
    manager = Manager(ctx.store, ctx.registry, identity=s.identity or s.scheduler.identity, lease_ttl=s.lease_ttl)
    follow_revocations(manager, ctx.tokens)
    manager.informer(CUSTOM_RESOURCE_DEFINITION.key_prefix(), decode_stored).on_change(ctx.catalog.learn)
    interpreter = Interpreter()
    for kind in INTERPRETER_CUSTOMIZATION_KINDS:  # DRO-DS's declarative and Karmada's Lua customizations
        manager.informer(kind.key_prefix(), decode_stored).on_change(interpreter.learn)
    ctx.readiness = manager.readiness
    ctx.prometheus_registries.append(manager.metrics.registry)
    component_audit = ComponentAudit(ctx.audit, replica=manager.identity)
    manager.audit_sink = component_audit.submit
    manager.add("component-audit", component_audit)
    ctx.rescheduler = s.rescheduler(ctx.registry)
    return ControlPlane(manager, ctx, chosen), interpreter


def _search_cache(plane: ControlPlane, s: ComponentSettings) -> None:
    """Karmada's search cache in every replica that serves the API (each answers searches from its
    own); the registries' status is written by the one leading ``search-cache``."""
    manager, ctx = plane.manager, plane.context
    search = SearchCacheController(ctx.registry, manager.informer(CLUSTER.key_prefix(), decode_stored),
                                   manager.informer(RESOURCE_REGISTRY.key_prefix(), decode_stored), ctx.search,
                                   (s.members or MemberSettings()).member_options())
    manager.add("search-cache-replica", search)
    manager.add_leader(SEARCH_LEASE, lambda lead: SearchStatusTerm(search, lead.registry))


def _operations(plane: ControlPlane, s: ComponentSettings, monitor: MonitorService, interpreter: Interpreter,
                profile: Profile) -> None:
    """The member controllers, the collectors and the descheduler: what acts on members and monitoring."""
    chosen, manager, ctx = plane.components, plane.manager, plane.context
    autoops = s.autoops or AutoOpsPolicy()
    if Component.MEMBERS in chosen:
        members_settings = s.members or MemberSettings()
        member_informers = MemberInformers.of(manager, ctx.catalog, interpreter)

        def member_controllers(lead: Leadership) -> MemberControllers:
            plane.members = MemberControllers(lead, member_informers, members_settings, monitor,
                                              s.rescheduler(lead.registry))
            return plane.members

        manager.add_leader(MEMBERS_LEASE, member_controllers)
    if Component.COLLECTORS in chosen:
        manager.add_leader("monitor-collectors",
                           lambda lead: MonitorCollectors(monitor, s.collectors, store=lead.store))
    if Component.DESCHEDULER in chosen:
        hook = s.reschedule_hook
        bindings = manager.informer(BINDING.key_prefix(), decode_binding_kept)

        def descheduler(lead: Leadership) -> Descheduler:
            resched = hook or s.rescheduler(lead.registry)
            traffic = TrafficRebalancer(lead.store, lead.registry, profile, autoops.trafficRebalance, resched,
                                        clock=s.clock, min_availability=autoops.minAvailability,
                                        enabled=autoops.enabled, record=monitor.operations.append)
            return Descheduler(lead.store, lead.registry, monitor, resched, bindings, autoops, traffic=traffic)

        manager.add_leader("descheduler", descheduler)


def _steering(plane: ControlPlane, s: ComponentSettings) -> None:
    """CATS steering and the multi-cluster service directory."""
    manager = plane.manager
    steering_settings = s.steering or SteeringSettings()
    steering_informers = SteeringInformers.of(manager)

    def steering(lead: Leadership) -> SteeringController:
        plane.steering = SteeringController(lead.registry, steering_informers, steering_settings,
                                            s.rescheduler(lead.registry), clock=s.clock)
        return plane.steering

    manager.add_leader(STEERING_LEASE, steering)

    def users_learner(lead: Leadership) -> UsersLearner:
        async def reschedule(name: str, reason: str, annotations: Mapping[str, str]) -> None:
            await trigger(lead.registry, name, reason, s.clock, annotations=annotations)

        async def forget(name: str) -> None:
            await lead.registry.patch(BINDING, name, {"metadata": {"annotations": dict(FORGET)}}, MERGE_PATCH)

        return UsersLearner(lead.store, reschedule, steering_informers, steering_settings.users, clock=s.clock,
                            forget=forget)

    manager.add_leader(USERS_LEASE, users_learner)
    if steering_settings.probe.enabled:
        manager.add_leader(PROBE_LEASE, lambda lead: NetworkProber(lead.store, steering_informers.clusters,
                                                                   steering_settings.probe, clock=s.clock))
    directory_informers = DirectoryInformers.of(manager)
    member_options = (s.members or MemberSettings()).member_options()

    def service_directory(lead: Leadership) -> DirectoryController:
        return DirectoryController(lead.registry, directory_informers,
                                   clients=MemberClients(lead.registry, member_options),
                                   endpoint_poll_seconds=steering_settings.endpointPollSeconds)

    manager.add_leader(DIRECTORY_LEASE, service_directory)
    mci_informers = MciInformers.of(manager)
    manager.add_leader(MCI_LEASE, lambda lead: MultiClusterIngressController(lead.registry, mci_informers))
    mcs_informers = McsInformers.of(manager)
    manager.add_leader(MCS_LEASE, lambda lead: MultiClusterServiceController(lead.registry, mcs_informers,
                                                                             clock=s.clock))


def _autonomy(plane: ControlPlane, s: ComponentSettings, monitor: MonitorService | None, profile: Profile) -> None:
    """The autoscaler, migration plans, the store compactor and the cache planner."""
    chosen, manager, ctx = plane.components, plane.manager, plane.context
    if Component.AUTOSCALER in chosen:
        autoscaler_informers = Autoscaler.informers(manager)
        forecaster = monitor.forecaster if monitor is not None else None

        def forecast(cluster: str, seconds: float) -> float | None:
            return forecaster.modelled_water_level_in(cluster, seconds / 60.0) if forecaster else None

        manager.add_leader(AUTOSCALER_LEASE, lambda lead: Autoscaler(
            lead.registry, lead.store, **autoscaler_informers, settings=s.autoscaling, clock=s.clock,
            forecast=forecast))
    if Component.MIGRATION in chosen:
        migration_informers = MigrationController.informers(manager)
        manager.add_leader(MIGRATION_LEASE, lambda lead: MigrationController(
            lead.registry, **migration_informers, rescheduler=s.rescheduler(lead.registry), store=lead.store,
            profile=profile, clock=s.clock))
    if Component.COMPACTOR in chosen:
        manager.add("compactor", Compactor(ctx.store))
    if Component.CACHE_PLANNER in chosen:
        manager.add_leader(CACHE_PLANNER_LEASE, lambda lead: CachePlanner(lead.store, lead.registry, s.datasets,
                                                                          clock=s.clock))
