"""Every file in examples/migration is valid by the registry's rules, and the hook a StatefulSet
declares there is a valid MigrationPlan hook."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from drods.model.annotations import MIGRATION_HOOK
from drods.model.kinds import by_kind
from drods.model.migration import MigrationHook
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
            MigrationHook.model_validate(yaml.safe_load(hook))
