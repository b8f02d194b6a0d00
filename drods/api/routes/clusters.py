"""API1 ``/api/v1/clusters`` and API2 ``/api/v1/propagationpolicies``: flat views of two kinds."""

from __future__ import annotations

import json
from typing import Any

from drods.api.context import ApiContext
from drods.api.routes.flat import flat_router
from drods.api.schemas import ClusterRegistration, PropagationPolicyBody
from drods.model.keys import status_key
from drods.model.kinds import CLUSTER, PROPAGATION_POLICY


async def _with_live_status(ctx: ApiContext, flat: dict[str, Any]) -> None:
    kv = await ctx.store.get(status_key(flat["name"]))
    if kv is not None:
        flat["status"]["resources"] = json.loads(kv.value).get("status")


clusters = flat_router(CLUSTER, "/api/v1/clusters", ClusterRegistration,
                       conflict_code="CLUSTER_ALREADY_EXISTS", conflict_detail="clusterName",
                       decorate=_with_live_status)
propagation_policies = flat_router(PROPAGATION_POLICY, "/api/v1/propagationpolicies", PropagationPolicyBody,
                                   conflict_code="POLICY_CONFLICT", conflict_detail="policyName")
