"""``apply`` of what is already there sends no patch and says ``unchanged``, whatever a controller
writes at the same moment (a cluster's health between the read and the patch)."""

from __future__ import annotations

import json
from typing import Any

from drods.cli.client import LAST_APPLIED, apply_one
from drods.cli.remote import Resource

CLUSTER: dict[str, Any] = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster",
                           "metadata": {"name": "c-aws", "labels": {"env": "prod"}}, "spec": {"region": "us-east-1"}}


class Reply:
    def __init__(self, status_code: int, body: dict[str, Any]) -> None:
        self.status_code, self.body = status_code, body

    def json(self) -> dict[str, Any]:
        return self.body


class Server:
    """Holds one stored object; its resourceVersion moves on every write, a controller's included."""

    def __init__(self) -> None:
        self.stored: dict[str, Any] | None = None
        self.rv = 0
        self.calls: list[str] = []

    def resource_for(self, api_version: str, kind: str) -> Resource:
        return Resource("multicluster.io", "v1alpha1", kind, "clusters", False)

    def controller_writes_status(self) -> None:
        assert self.stored is not None
        self.rv += 1
        self.stored = {**self.stored, "status": {"conditions": [{"type": "Ready", "status": "False"}]},
                       "metadata": {**self.stored["metadata"], "resourceVersion": str(self.rv)}}

    def request(self, method: str, path: str, **kw: Any) -> Reply:
        self.calls.append(method)
        if method == "GET":
            if self.stored is None:
                return Reply(404, {})
            reply = Reply(200, json.loads(json.dumps(self.stored)))
            self.controller_writes_status()  # between this read and the apply's patch
            return reply
        if method == "POST":
            self.rv += 1
            self.stored = {**kw["json"], "metadata": {**kw["json"]["metadata"], "resourceVersion": str(self.rv)}}
            return Reply(201, self.stored)
        assert method == "PATCH"
        return Reply(200, self.stored or {})


def test_reapplying_the_same_object_is_unchanged_while_a_controller_writes() -> None:
    server = Server()
    assert apply_one(server, json.loads(json.dumps(CLUSTER)), None)[2] == "created"  # type: ignore[arg-type]
    _, result, outcome = apply_one(server, json.loads(json.dumps(CLUSTER)), None)  # type: ignore[arg-type]
    assert outcome == "unchanged" and server.calls == ["GET", "POST", "GET"]  # no patch sent
    assert LAST_APPLIED in result["metadata"]["annotations"]
    changed = {**CLUSTER, "spec": {"region": "us-east-2"}}
    assert apply_one(server, json.loads(json.dumps(changed)), None)[2] == "configured"  # type: ignore[arg-type]
    assert server.calls[-1] == "PATCH"
