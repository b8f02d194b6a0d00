"""A JSON patch (RFC 6902) that does not apply is refused whole, naming the operation that failed and,
for a ``test``, the value found against the one expected; the document is left as it was."""

from __future__ import annotations

import pytest

from drods.errors import BadRequest
from drods.registry.patch import JSON_PATCH, apply_patch


@pytest.mark.parametrize(("ops", "message"), [
    ([{"op": "test", "path": "/spec/replicas", "value": 2}],
     "JSON patch operation 0 (test /spec/replicas) failed: the value is 3, the patch expected 2"),
    ([{"op": "replace", "path": "/spec/replicas", "value": 5}, {"op": "test", "path": "/spec/paused", "value": True}],
     "JSON patch operation 1 (test /spec/paused) failed: the value is absent, the patch expected true"),
    ([{"op": "remove", "path": "/spec/missing"}],
     "JSON patch operation 0 (remove /spec/missing) failed: can't remove a non-existent object 'missing'"),
    ([{"op": "move", "from": "/spec/nope", "path": "/spec/x"}],
     "JSON patch operation 0 (move /spec/x from /spec/nope) failed: nothing at /spec/nope"),
    # it printed the whole object after "not found in", as a Python dict
    ([{"op": "replace", "path": "/spec/nope/x", "value": 1}],
     "JSON patch operation 0 (replace /spec/nope/x) failed: member 'nope' not found"),
])
def test_a_failed_operation_is_named_and_nothing_changes(ops: list[dict[str, object]], message: str) -> None:
    doc = {"spec": {"replicas": 3}}
    with pytest.raises(BadRequest) as e:
        apply_patch(doc, ops, JSON_PATCH)
    assert e.value.message == message and e.value.details["operation"] == len(ops) - 1
    assert doc == {"spec": {"replicas": 3}}


def test_operations_apply_in_order_on_a_copy() -> None:
    doc = {"spec": {"replicas": 3}}
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 5},
           {"op": "test", "path": "/spec/replicas", "value": 5},
           {"op": "add", "path": "/spec/paused", "value": True}]
    assert apply_patch(doc, ops, JSON_PATCH) == {"spec": {"replicas": 5, "paused": True}}
    assert doc == {"spec": {"replicas": 3}}
