"""DRO-DS scheduler (S1-S11): a pure, array-based scheduling library.

Public API::

    snap = Snapshot()
    snap.upsert_cluster(name, labels, spec, ready, status)
    sched = Scheduler(Profile.default(), rng_seed=0)
    result = sched.schedule(Task(spec, name="ns/app", current=[...]), snap)
    if result.phase == "Scheduled":
        snap.assume(result.placement, spec.resources, key="ns/app")
"""

from __future__ import annotations

from drods.scheduler.adjuster import Adjuster, AdjusterConfig, Adjustment
from drods.scheduler.divide import DivisionInput, aggregate, divide, webster
from drods.scheduler.framework import Scheduler, ScheduleResult, summarize
from drods.scheduler.profile import Profile, ProfileError, ProfileSpec
from drods.scheduler.registry import ENTRY_POINT_GROUP, load_entry_points, register
from drods.scheduler.resources import requirement_vector
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.status import parse_status
from drods.scheduler.task import Task, TaskInfo, analyse

__all__ = [
    "ENTRY_POINT_GROUP", "Adjuster", "AdjusterConfig", "Adjustment", "DivisionInput", "Profile",
    "ProfileError", "ProfileSpec", "ScheduleResult", "Scheduler",
    "Snapshot", "Task", "TaskInfo", "aggregate", "analyse", "divide", "load_entry_points",
    "parse_status", "register", "requirement_vector", "summarize", "webster",
]
