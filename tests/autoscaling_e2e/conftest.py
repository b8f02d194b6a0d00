"""A real control plane with the autoscaler, over each store backend (time compressed)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from drods.assembly import Component
from drods.autoscaling.controller import AutoscalerSettings
from drods.autoscaling.feedback import FeedbackSettings
from drods.monitor.service import MonitorSettings
from drods.store import Store
from tests.scheduler_e2e.conftest import Plane, serve

MONITORING = MonitorSettings.model_validate({
    "sustainedSeconds": 60.0, "rateMinIntervalSeconds": 0.0, "flushIntervalSeconds": 0.05,
    "staleCheckIntervalSeconds": 0.05, "realtimeMinIntervalSeconds": 0.0})
AUTOSCALING = AutoscalerSettings(sync_seconds=0.3, feedback=FeedbackSettings(cooldown_s=0.6))


@pytest.fixture
async def plane(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Plane]:
    store = store_factory()
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    async with serve(store, tmp_path / "data", components=frozenset({Component.AUTOSCALER}), monitoring=MONITORING,
                     autoscaling=AUTOSCALING) as p:
        yield p
