"""A crash between creating a hook run's Job and its Binding leaves a run the next pass starts again:
the run reads "absent" until its Binding exists, so the Job must come first — over a real registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drods.api.context import ApiContext
from drods.machinery.informer import Informer
from drods.migration.controller import JOB, MigrationController
from drods.model.data_jobs import job_outcome as hook_outcome
from drods.model.detection import binding_name
from drods.model.kinds import BINDING, CLUSTER, MIGRATION_PLAN
from drods.model.migration import MigrationPlanSpec
from drods.registry.objects import decode_binding_kept, decode_stored
from drods.store.sqlite import SqliteStore

PLAN: dict[str, Any] = {"metadata": {"name": "move-db", "namespace": "shop", "uid": "1234abcd-0000"},
                        "spec": {"workloadRef": {"name": "db"}, "sourceCluster": "a", "targetCluster": "b",
                                 "hook": {"command": {"image": "busybox", "command": ["true"]}}}}
STATUS = {"sourceCluster": "a", "targetCluster": "b", "sourceReplicas": 1, "data": {"mover": "Hook", "claims": []}}


class Crash(Exception):
    pass


async def test_a_crash_between_the_job_and_its_binding_is_repaired_by_the_next_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteStore(str(tmp_path / "drods.db"))
    reg = ApiContext.build(store, tmp_path).registry
    try:
        c = MigrationController(reg, plans=Informer(store, MIGRATION_PLAN.key_prefix(), decode_stored),
                                bindings=Informer(store, BINDING.key_prefix(), decode_binding_kept),
                                clusters=Informer(store, CLUSTER.key_prefix(), decode_stored))
        spec = MigrationPlanSpec.model_validate(PLAN["spec"])
        create = reg.create

        async def crash_on_binding(kind: Any, obj: Any, namespace: str | None = None) -> Any:
            if kind is BINDING:
                raise Crash
            return await create(kind, obj, namespace)

        monkeypatch.setattr(reg, "create", crash_on_binding)
        with pytest.raises(Crash):
            await c._ensure_hook(PLAN, spec, "copy", STATUS, claims=None)  # type: ignore[arg-type]
        assert JOB is not None
        job = await reg.get(JOB, "move-db-copy-1234ab", "shop")
        bname = binding_name("Job", "shop", job["metadata"]["name"])
        # what the next pass reads: the run is absent, so it is started again
        assert hook_outcome(await reg.try_get(BINDING, bname), "b")[0] == "absent"
        monkeypatch.setattr(reg, "create", create)
        await c._ensure_hook(PLAN, spec, "copy", STATUS, claims=None)  # type: ignore[arg-type]
        assert (await reg.get(BINDING, bname))["spec"]["targetClusters"] == ["b"]
        assert (await reg.get(JOB, "move-db-copy-1234ab", "shop"))["metadata"]["uid"] == job["metadata"]["uid"]
    finally:
        await store.close()
