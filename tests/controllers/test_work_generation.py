"""A Work whose spec changes A → B → A before B's apply is recorded: the status still says "applied,
hash A" from the first time, but the member holds B. The hash alone cannot tell; the generation
the apply recorded can, so the Work is applied again (found by the storm scenario of
`bench/scale.py`: the stream updated a workload, the next scenario put it back, and the copy was
left at the update with its Binding never Ready)."""

from __future__ import annotations

from typing import Any

import pytest

from drods.controllers.aggregate import work_state
from drods.controllers.execution import Execution
from drods.controllers.work_record import WorkRecord, work_record
from drods.model.work import WorkStatus

MANIFEST = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "default"}}


def work(generation: int, hash_: str, status: dict[str, Any]) -> WorkRecord:
    doc = {"metadata": {"name": "web.aws", "generation": generation},
           "spec": {"cluster": "aws", "binding": "web", "hash": hash_, "manifests": [MANIFEST]}, "status": status}
    record = work_record(doc, generation * 10)
    assert record is not None
    return record


def applied(hash_: str, generation: int | None) -> dict[str, Any]:
    status = WorkStatus(observedHash=hash_, applied=True, observedGeneration=generation or 0)
    return status.model_dump(exclude_defaults=True)


class Plan:
    """What the binding controller wants on the cluster (a ManifestSet's two fields work_state reads)."""

    def __init__(self, hash_: str) -> None:
        self.hash = hash_
        self.main = None


@pytest.mark.parametrize(("generation", "recorded", "current"), [
    (1, 1, True),  # applied as it is
    (3, 1, False),  # A → B → A: A's hash again, applied at generation 1: apply it again
    (3, None, True),  # an applier that does not say the generation (an older one): the hash decides
])
def test_the_generation_an_apply_recorded_decides_whether_the_member_holds_the_spec(
        generation: int, recorded: int | None, current: bool) -> None:
    w = work(generation, "A", applied("A", recorded))
    assert w.holds_current is current
    assert Execution._needs_action(w) is not current
    state = work_state(w, Plan("A"), pull=False, failure_threshold=3)  # type: ignore[arg-type]
    assert state.applied is current and state.error is None

