"""CustomResourceDefinitions: served dynamically (also when another replica stored the definition),
custom resources pruned and validated against the structural schema, the status subresource, and
the kind gone with its definition."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.api.conftest import Api

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GADGETS = "/apis/toys.example.com/v1/namespaces/default/gadgets"


def definition(*, status: bool = True, plural: str = "gadgets", kind: str = "Gadget") -> dict[str, Any]:
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 0, "maximum": 10},
            "colour": {"type": "string", "enum": ["red", "blue"]},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
        "status": {"type": "object", "properties": {"made": {"type": "integer"}}}}}
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    if status:
        version["subresources"] = {"status": {}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.toys.example.com"},
            "spec": {"group": "toys.example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "shortNames": ["gd"]},
                     "versions": [version]}}


def gadget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "toys.example.com/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}


async def test_a_definition_serves_its_kind_validates_and_prunes(api: Api) -> None:
    assert (await api.call("GET", GADGETS)).status_code == 404
    r = await api.call("POST", CRDS, json=definition())
    assert r.status_code == 201, r.text
    st = (await api.call("GET", f"{CRDS}/gadgets.toys.example.com")).json()["status"]
    assert {c["type"]: c["status"] for c in st["conditions"]} == {"NamesAccepted": "True", "Established": "True"}
    assert st["storedVersions"] == ["v1"] and st["acceptedNames"]["kind"] == "Gadget"
    # discovery and OpenAPI at once, on the replica that took the write
    groups = (await api.call("GET", "/apis")).json()["groups"]
    assert any(g["name"] == "toys.example.com" for g in groups)
    res = (await api.call("GET", "/apis/toys.example.com/v1")).json()["resources"]
    assert {(x["name"], x["namespaced"]) for x in res} == {("gadgets", True), ("gadgets/status", True)}
    doc = (await api.call("GET", "/openapi/v3/apis/toys.example.com/v1")).json()
    spec = doc["components"]["schemas"]["com.example.toys.v1.Gadget"]["properties"]["spec"]
    assert spec["properties"]["size"]["maximum"] == 10
    # a valid resource: unknown fields pruned, preserved ones kept
    r = await api.call("POST", GADGETS, json={**gadget("g1", size=3, colour="red", junk=1, extra={"any": [1]}),
                                              "toplevel": "x"})
    assert r.status_code == 201, r.text
    assert r.json()["spec"] == {"size": 3, "colour": "red", "extra": {"any": [1]}}
    assert "toplevel" not in r.json()
    # unless the writer asks for strict field validation (kubectl's default): then it is a 400 naming
    # each unknown field, as kube-apiserver's strict decoding answers, and nothing is stored
    junk = {**gadget("strict", size=3, junk=1, extra={"any": 1}), "toplevel": "x"}
    r = await api.call("POST", f"{GADGETS}?fieldValidation=Strict", json=junk)
    assert r.status_code == 400, r.text
    assert 'strict decoding error: unknown field "spec.junk", unknown field "toplevel"' in r.json()["message"]
    assert (await api.call("GET", f"{GADGETS}/strict")).status_code == 404
    r = await api.call("PATCH", f"{GADGETS}/g1?fieldValidation=Strict", json={"spec": {"sise": 4}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 400 and 'unknown field "spec.sise"' in r.json()["message"], r.text
    r = await api.call("POST", f"{GADGETS}?fieldValidation=Ignore", json=junk)
    assert r.status_code == 201 and r.json()["spec"] == {"size": 3, "extra": {"any": 1}}, r.text
    # invalid ones: a Kubernetes 422 naming each field, nothing stored
    r = await api.call("POST", GADGETS, json=gadget("bad", size=11, colour="green"))
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    assert {c["field"] for c in body["details"]["causes"]} == {"spec.size", "spec.colour"}
    r = await api.call("POST", GADGETS, json=gadget("bad", colour="red"))
    assert r.status_code == 422
    assert [c["field"] for c in r.json()["details"]["causes"]] == ["spec.size"]
    r = await api.call("POST", GADGETS, json=gadget("bad", size="3"))
    assert r.status_code == 422
    assert (await api.call("GET", f"{GADGETS}/bad")).status_code == 404
    # an invalid update changes nothing
    r = await api.call("PATCH", f"{GADGETS}/g1", json={"spec": {"size": -1}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422
    assert (await api.call("GET", f"{GADGETS}/g1")).json()["spec"]["size"] == 3
    # the batch path knows the custom kind too, and validates the same way
    r = await api.call("POST", "/api/v1/sync/batch", json={"objects": [gadget("g2", size=1), gadget("g3", size=99)]})
    assert r.status_code == 422 and "objects[1]" in r.json()["message"], r.text
    assert (await api.call("GET", f"{GADGETS}/g2")).status_code == 404
    r = await api.call("POST", "/api/v1/sync/batch", json={"objects": [{**gadget("g2", size=1), "junk": 1}]})
    assert r.status_code == 200, r.text
    assert "junk" not in (await api.call("GET", f"{GADGETS}/g2")).json()


async def test_status_subresource_splits_status_from_the_rest(api: Api) -> None:
    assert (await api.call("POST", CRDS, json=definition())).status_code == 201
    r = await api.call("POST", GADGETS, json={**gadget("g", size=1), "status": {"made": 5}})
    assert r.status_code == 201
    assert "status" not in r.json()  # a create never sets status behind the subresource (kube drops it)
    g = r.json()
    # the main path ignores status
    g["status"] = {"made": 7}
    g["spec"]["size"] = 2
    r = await api.call("PUT", f"{GADGETS}/g", json=g)
    assert r.status_code == 200, r.text
    assert (r.json()["spec"]["size"], r.json().get("status")) == (2, None)
    assert r.json()["metadata"]["generation"] == 2
    # /status writes only status (and is validated)
    g = r.json()
    g["status"] = {"made": 7}
    g["spec"]["size"] = 9
    r = await api.call("PUT", f"{GADGETS}/g/status", json=g)
    assert r.status_code == 200, r.text
    assert (r.json()["spec"]["size"], r.json()["status"], r.json()["metadata"]["generation"]) == (2, {"made": 7}, 2)
    r = await api.call("PATCH", f"{GADGETS}/g/status", json={"status": {"made": "many"}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422


async def test_without_status_subresource_status_is_written_with_the_object(api: Api) -> None:
    assert (await api.call("POST", CRDS, json=definition(status=False))).status_code == 201
    r = await api.call("POST", GADGETS, json={**gadget("g", size=1), "status": {"made": 5}})
    assert r.status_code == 201
    assert r.json()["status"] == {"made": 5}
    assert (await api.call("GET", f"{GADGETS}/g/status")).status_code == 404


async def test_a_definition_stored_elsewhere_is_served_and_its_deletion_stops_it(api: Api) -> None:
    """Another replica's write reaches this one through the store watch."""
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    crd = definition(plural="widgets", kind="Widget")
    crd["metadata"].update(uid="u", generation=1, creationTimestamp="2026-01-01T00:00:00Z")
    await ctx.store.put("/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.toys.example.com",
                        json.dumps(crd).encode())
    widgets = "/apis/toys.example.com/v1/namespaces/default/widgets"
    async with asyncio.timeout(5):  # wait on the condition with a deadline
        for _ in iter(int, 1):
            if (await api.call("GET", widgets)).status_code == 200:
                break
            await asyncio.sleep(0.02)
    w = {**gadget("w", size=1), "kind": "Widget"}
    assert (await api.call("POST", widgets, json=w)).status_code == 201
    assert (await api.call("DELETE", f"{CRDS}/widgets.toys.example.com")).status_code == 200
    r = await api.call("GET", widgets)
    assert r.status_code == 404 and r.json()["kind"] == "Status"
    res = (await api.call("GET", "/apis")).json()["groups"]
    assert not any(g["name"] == "toys.example.com" for g in res)
    # the resources went with it: a new definition of the kind starts empty
    assert (await api.call("POST", CRDS, json=definition(plural="widgets", kind="Widget"))).status_code == 201
    assert (await api.call("GET", widgets)).json()["items"] == []


async def test_bad_definitions_are_refused(api: Api) -> None:
    wrong_name = definition()
    wrong_name["metadata"]["name"] = "gadgets.other.example.com"
    r = await api.call("POST", CRDS, json=wrong_name)
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "metadata.name"
    no_schema = definition()
    del no_schema["spec"]["versions"][0]["schema"]
    assert (await api.call("POST", CRDS, json=no_schema)).status_code == 422
    built_in = definition(plural="deployments", kind="Deployment")
    built_in["spec"]["group"] = "apps"
    built_in["metadata"]["name"] = "deployments.apps"
    assert (await api.call("POST", CRDS, json=built_in)).status_code == 422
    assert (await api.call("GET", CRDS)).json()["items"] == []


async def test_core_list_path_errors_are_kubernetes_status(api: Api) -> None:
    r = await api.call("GET", "/api/v1/services?fieldSelector=spec.type%3DNodePort")
    assert r.status_code == 400, r.text
    assert r.json()["kind"] == "Status"
    r = await api.client.get("/api/v1/services", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401 and r.json()["kind"] == "Status"


async def test_a_status_schema_with_required_fields_does_not_refuse_the_objects_own_updates(api: Api) -> None:
    """Karmada's guestbook sample: a CRD whose status requires fields. The server made an empty status on
    create and then refused every update of the object (status.active: Required value); kube-apiserver
    drops status on create, so an object has none until its status subresource writes one."""
    crd = definition(plural="guestbooks", kind="Guestbook")
    crd["spec"]["names"]["shortNames"] = ["gb"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["status"] = {"type": "object", "required": ["active", "standby"],
                                      "properties": {"active": {"type": "string"}, "standby": {"type": "string"}}}
    assert (await api.call("POST", CRDS, json=crd)).status_code == 201
    books = "/apis/toys.example.com/v1/namespaces/default/guestbooks"
    r = await api.call("POST", books, json={"apiVersion": "toys.example.com/v1", "kind": "Guestbook",
                                            "metadata": {"name": "gb"}, "spec": {"size": 2}})
    assert r.status_code == 201, r.text
    gb = r.json()
    gb["spec"]["size"] = 4
    r = await api.call("PUT", f"{books}/gb", json=gb)
    assert r.status_code == 200 and r.json()["spec"]["size"] == 4, r.text
    # the status subresource still validates what it is given
    r = await api.call("PATCH", f"{books}/gb/status", json={"status": {"active": "a"}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422 and "standby" in r.text, r.text
    r = await api.call("PATCH", f"{books}/gb/status", json={"status": {"active": "a", "standby": "b"}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    r = await api.call("PATCH", f"{books}/gb", json={"spec": {"size": 5}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["status"] == {"active": "a", "standby": "b"}, r.text


async def test_a_version_objects_may_be_stored_in_is_not_dropped(api: Api) -> None:
    """kube-apiserver's rule: every ``status.storedVersions`` entry stays in ``spec.versions`` until the
    status says no object is stored in it (objects written as a dropped version were served as another
    with fields its schema lacks, and their Works kept applying the dropped version)."""
    crd = definition(plural="widgets", kind="Widget")
    crd["metadata"]["name"] = "widgets.toys.example.com"
    v1 = crd["spec"]["versions"][0]
    v2 = {**v1, "name": "v2", "storage": False}
    r = await api.call("POST", CRDS, json=crd)
    assert r.status_code == 201, r.text
    path = f"{CRDS}/widgets.toys.example.com"
    for versions in ([v1, v2], [{**v1, "storage": False}, {**v2, "storage": True}]):  # v2 becomes the storage one
        current = (await api.call("GET", path)).json()
        r = await api.call("PUT", path, json={**current, "spec": {**current["spec"], "versions": versions}})
        assert r.status_code == 200, r.text
    assert (await api.call("GET", path)).json()["status"]["storedVersions"] == ["v1", "v2"]
    current = (await api.call("GET", path)).json()
    only_v2 = {**current, "spec": {**current["spec"], "versions": [{**v2, "storage": True}]}}
    r = await api.call("PUT", path, json=only_v2)
    assert r.status_code == 422, r.text
    assert 'status.storedVersions[0]: Invalid value: "v1": must appear in spec.versions' in r.json()["message"]
    assert [v["name"] for v in (await api.call("GET", path)).json()["spec"]["versions"]] == ["v1", "v2"]
    # the operator's step once no object is stored as v1: the status says so, then v1 may go
    r = await api.call("PATCH", f"{path}/status", json={"status": {"storedVersions": ["v2"]}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    current = (await api.call("GET", path)).json()
    r = await api.call("PUT", path, json={**only_v2, "metadata": current["metadata"]})
    assert r.status_code == 200, r.text
    assert r.json()["status"]["storedVersions"] == ["v2"]
