"""A ServiceRegistration compiled for evaluation (SRM + SSC, SPEC C4, C5)."""

from __future__ import annotations

from collections.abc import Sequence

from drods.model.steering import ServiceRegistrationSpec
from drods.steering.engine import ServicePlan


def compile_plan(spec: ServiceRegistrationSpec, instances: Sequence[str]) -> ServicePlan:
    """``instances``: the clusters holding a copy of the registration's workload."""
    return ServicePlan(
        service_id=spec.serviceId, strategy=spec.strategy, output=spec.output, evaluation=spec.evaluation,
        sensitive=tuple(spec.sensitiveAttributes), sla=spec.sla, service_time_ms=spec.processing.serviceTimeMs,
        cores=spec.processing.instanceCores, normalisation=spec.normalisation, clients=tuple(spec.clientSites),
        instances=tuple(sorted(instances)), balanced_size=spec.balancedInstances,
        affinity_seconds=spec.flowAffinity.timeoutSeconds,
    )
