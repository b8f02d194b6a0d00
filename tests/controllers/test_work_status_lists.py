"""How often the work-status controller lists a push member: the usage of its workloads is read at
each list (no watch brings it), so a member whose workloads' kinds are all followed by watches is
still listed every ``usagePollSeconds`` — not only at the resync, which left an autoscaler reading a
use 15 s old."""

from __future__ import annotations

import asyncio
from typing import Any

from drods.controllers.settings import MemberSettings
from drods.controllers.workstatus import WorkStatusController

DEPLOYMENTS = ("apps/v1", "Deployment")
CONFIGMAPS = ("v1", "ConfigMap")


def controller(**settings: Any) -> WorkStatusController:
    return WorkStatusController(object(), MemberSettings(**settings))  # type: ignore[arg-type]


async def test_a_member_with_workloads_is_listed_every_usage_period_even_when_followed() -> None:
    c = controller(statusPollSeconds=0.5, statusResyncSeconds=15, usagePollSeconds=2)
    watch = asyncio.get_running_loop().create_future()
    c._watches["aws"] = {DEPLOYMENTS: watch, CONFIGMAPS: watch}  # type: ignore[dict-item]
    assert c.list_period("aws") == 0.5  # the watches are not up yet: polled
    c._following["aws"] = {DEPLOYMENTS}
    assert c.list_period("aws") == 0.5  # one kind still unfollowed
    c._following["aws"] = {DEPLOYMENTS, CONFIGMAPS}
    assert c.list_period("aws") == 2  # followed, but the usage is due every 2 s
    c._watches["aws"] = {CONFIGMAPS: watch}  # type: ignore[dict-item]
    assert c.list_period("aws") == 15  # no workload: the resync
    watch.cancel()


async def test_the_resync_stays_when_the_usage_period_is_longer() -> None:
    c = controller(statusResyncSeconds=15, usagePollSeconds=60)
    watch = asyncio.get_running_loop().create_future()
    c._watches["aws"] = {DEPLOYMENTS: watch}  # type: ignore[dict-item]
    c._following["aws"] = {DEPLOYMENTS}
    assert c.list_period("aws") == 15
    watch.cancel()
