"""Karmada's config.karmada.io ResourceInterpreterCustomization over the API: stored and read back as
written, apart from DRO-DS's declarative kind of the same name; a script that does not compile (or
does not define its function) is a 422 ``{code, message, details}`` naming the script, and
``dryRun`` stores nothing."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api

RIC = "/apis/config.karmada.io/v1alpha1/resourceinterpretercustomizations"
OWN_RIC = "/apis/multicluster.io/v1alpha1/resourceinterpretercustomizations"


def customization(get_replicas: str) -> dict[str, Any]:
    return {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
            "metadata": {"name": "workflows"},
            "spec": {"target": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"},
                     "customizations": {
                         "replicaResource": {"luaScript": get_replicas},
                         "healthInterpretation": {"luaScript": "function InterpretHealth(observedObj)\n"
                                                               "  return observedObj.status.phase ~= 'Failed'\nend"},
                     }}}


GOOD = "local kube = require('kube')\nfunction GetReplicas(obj)\n  return obj.spec.parallelism, {}\nend"


async def test_stored_as_written_and_bad_scripts_refused(api: Api) -> None:
    r = await api.call("POST", f"{RIC}?dryRun=All", json=customization(GOOD))
    assert r.status_code == 201, r.text
    assert (await api.call("GET", f"{RIC}/workflows")).status_code == 404
    written = customization(GOOD)
    r = await api.call("POST", RIC, json=written)
    assert r.status_code == 201, r.text
    back = (await api.call("GET", f"{RIC}/workflows")).json()
    assert back["apiVersion"] == written["apiVersion"] and back["spec"] == written["spec"]
    assert (await api.call("GET", f"{OWN_RIC}/workflows")).status_code == 404  # a kind of its own

    for script, says in (("function GetReplicas(obj) return obj.spec. end", "GetReplicas: does not compile"),
                         ("function Replicas(obj) return 1 end", "does not define function GetReplicas"),
                         ("while true do end", "GetReplicas: instruction limit exceeded"),
                         ("os.exit(1)", "global 'os'")):
        bad = customization(script)
        bad["metadata"]["name"] = "broken"
        r = await api.call("POST", RIC, json=bad)
        assert r.status_code == 422, r.text
        err = r.json()
        assert {"code", "message", "details"} <= set(err), err
        assert any("replicaResource.luaScript" in c["message"] and says in c["message"]
                   for c in err["details"]["causes"]), err
        assert (await api.call("GET", f"{RIC}/broken")).status_code == 404
    # an update that breaks a script changes nothing
    broken = {**back, "spec": customization("function GetReplicas(obj) return end end")["spec"]}
    r = await api.call("PUT", f"{RIC}/workflows", json=broken)
    assert r.status_code == 422, r.text
    assert (await api.call("GET", f"{RIC}/workflows")).json()["spec"] == written["spec"]
