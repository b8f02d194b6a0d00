"""Capability filter (S3/S4, F1): required capabilities, GPU model and storage tier must be offered;
a minimum relative GPU performance needs a GPU that fast (of the named model, from ``spec.gpus``);
a storage tier with a stated capacity must hold one replica's storage."""

from __future__ import annotations

from drods.scheduler.interface import BoolArr, FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class Capability(PluginBase):
    name = "Capability"

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        out: list[Rejection] = []
        needs = [("capability", c, f"missing capability {c}") for c in task.capabilities]
        if task.gpu_model:
            needs.append(("gpuModel", task.gpu_model, f"no GPU model {task.gpu_model}"))
        if task.storage_tier:
            needs.append(("storageTier", task.storage_tier, f"no storage tier {task.storage_tier}"))
        for fld, value, reason in needs:
            ok = snap.set_mask(fld, value)
            drop = mask & ~ok
            if drop.any():
                out.append(reject(self.name, reason, drop))
                mask = mask & ok
        if task.min_gpu_perf is not None:
            perf = snap.gpu_performance(task.gpu_model)
            ok = perf >= task.min_gpu_perf  # NaN (no performance stated) fails
            drop = mask & ~ok
            if drop.any():
                out.append(reject(self.name, f"no GPU with relative performance >= {task.min_gpu_perf:g}", drop))
                mask = mask & ok
        if task.storage_tier and task.storage_gib > 0:
            cap = snap.tier_capacity(task.storage_tier)
            small = cap < task.storage_gib  # NaN (capacity not stated) passes
            drop = mask & small
            if drop.any():
                out.append(reject(self.name, f"storage tier {task.storage_tier} below {task.storage_gib:g} GiB",
                                  drop))
                mask = mask & ~small
        return mask, out
