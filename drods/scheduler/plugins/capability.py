"""Capability filter (S3/S4, F1): required capabilities, GPU model and storage tier must be offered;
a minimum relative GPU performance needs a GPU that fast (of the named model, from ``spec.gpus``).
How many GPUs of a model and GiB of a tier are free is GpuStorageFit's (consumed capacity)."""

from __future__ import annotations

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
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
        return mask, out
