"""Every file in examples/migration is valid by the registry's rules, and the hook a StatefulSet
declares there is a valid MigrationPlan hook."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from drods.model.annotations import MIGRATION_HOOK
from drods.model.kinds import by_kind
from drods.model.migration import DataStep, MigrationHook
from drods.registry.objects import ObjectRegistry

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "migration"


@pytest.mark.parametrize("path", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_example_is_valid(path: str) -> None:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / path).read_text()) if d]
    assert docs
    registry = ObjectRegistry.__new__(ObjectRegistry)  # validation needs no store
    for doc in docs:
        kind = by_kind(doc["apiVersion"], doc["kind"])
        assert kind is not None, doc["kind"]
        registry.validate(kind, doc)
        hook = ((doc.get("metadata") or {}).get("annotations") or {}).get(MIGRATION_HOOK)
        if hook:
            declared = yaml.safe_load(hook)
            (DataStep if "mover" in declared else MigrationHook).model_validate(declared)


def test_the_postgres_hook_writes_into_the_statefulsets_volume() -> None:
    """The hook of postgres.yaml, as a drain would run it: its Job mounts the StatefulSet's data claim
    where the postgres container keeps PGDATA, so the base backup lands in the volume."""
    from drods.migration.hooks import hook_job
    from drods.model.migration import MigrationPlanSpec, declared_hook, plan_object
    from drods.model.volume_claims import workload_claims

    sts = next(d for d in yaml.safe_load_all((EXAMPLES / "postgres.yaml").read_text()) if d["kind"] == "StatefulSet")
    plan = plan_object("StatefulSet", "shop", "orders-db", "aws-dfw", "gcp-sin", declared_hook(sts), "Drain", "")
    spec = MigrationPlanSpec.model_validate(plan["spec"])
    assert spec.data_step() is not None and spec.data_step().catchUp is not None  # type: ignore[union-attr]
    plan["metadata"]["uid"] = "abcdef123456"
    job = hook_job(plan, spec, "copy", "aws-dfw", "gcp-sin", workload_claims(sts), 1)
    pod = job["spec"]["template"]["spec"]
    claim = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    mounts = {m["mountPath"]: claim[m["name"]] for m in pod["containers"][0]["volumeMounts"]}
    pgdata = next(e["value"] for e in pod["containers"][0]["env"] if e["name"] == "PGDATA")
    home = max((p for p in mounts if pgdata.startswith(p + "/")), key=len)
    assert mounts[home] == "data-orders-db-0"
