"""What the steering objects' writes refuse up front (422, nothing changed): a ServiceRegistration naming
an evaluation function nobody registered, and a network measurement that is not a finite number."""

from __future__ import annotations

import json
import math

import pytest

from tests.api.conftest import Api

REGS = "/apis/multicluster.io/v1alpha1/namespaces/default/serviceregistrations"
MERGE = {"content-type": "application/merge-patch+json"}


def registration(name: str, **spec: object) -> dict[str, object]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "ServiceRegistration",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"serviceId": f"{name}.example", "clientSites": ["LHR"],
                     "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}, **spec}}


def _refused_on_evaluation(r: object) -> None:
    status = r.json()  # type: ignore[attr-defined]
    assert r.status_code == 422, r.text  # type: ignore[attr-defined]
    assert status["kind"] == "Status" and status["reason"] == "Invalid", status
    assert "unknown evaluation function 'nosuch'; known: " in status["message"] and "e2eDelay" in status["message"]
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.evaluation"], status


async def test_an_unknown_evaluation_function_is_refused_on_create(api: Api) -> None:
    """It was stored (201), went Invalid, and its ServiceRoute was deleted."""
    _refused_on_evaluation(await api.call("POST", REGS, json=registration("shop", evaluation="nosuch")))
    assert (await api.call("GET", f"{REGS}/shop")).status_code == 404
    r = await api.call("POST", REGS, json=registration("shop", evaluation="weightedDelay"))
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("write", ["patch", "put", "apply"])
async def test_an_unknown_evaluation_function_is_refused_on_update(api: Api, write: str) -> None:
    assert (await api.call("POST", REGS, json=registration("shop"))).status_code == 201
    before = (await api.call("GET", f"{REGS}/shop")).json()
    if write == "patch":
        r = await api.call("PATCH", f"{REGS}/shop", json={"spec": {"evaluation": "nosuch"}}, headers=MERGE)
    elif write == "put":
        r = await api.call("PUT", f"{REGS}/shop", json=registration("shop", evaluation="nosuch"))
    else:
        r = await api.call("PATCH", f"{REGS}/shop?fieldManager=t&force=true",
                           content=json.dumps(registration("shop", evaluation="nosuch")),
                           headers={"content-type": "application/apply-patch+yaml"})
    _refused_on_evaluation(r)
    after = (await api.call("GET", f"{REGS}/shop")).json()
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"].get("evaluation", "e2eDelay") == "e2eDelay"


async def test_a_stored_unknown_function_may_be_kept_while_other_fields_change(api: Api) -> None:
    """Written before admission refused it (or its plugin is gone): a label or finalizer can still be
    written — only naming an unknown function anew is refused."""
    from drods.model.kinds import SERVICE_REGISTRATION

    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    await ctx.registry.store.put(SERVICE_REGISTRATION.key("old", "default"),
                                 json.dumps(registration("old", evaluation="gone")).encode())
    r = await api.call("PATCH", f"{REGS}/old", json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    assert r.status_code == 200, r.text
    r = await api.call("PATCH", f"{REGS}/old", json={"spec": {"evaluation": "nosuch"}}, headers=MERGE)
    assert r.status_code == 422 and "spec.evaluation" in r.text, r.text


@pytest.mark.parametrize("metric, value", [("delayMs", math.nan), ("delayMs", -math.inf), ("jitterMs", math.nan),
                                           ("lossPercent", math.inf), ("bandwidthMbps", math.nan)])
async def test_a_network_measurement_must_be_a_finite_number(api: Api, metric: str, value: float) -> None:
    """NaN was refused as not "greater than or equal to 0"."""
    body = json.dumps({"measurements": [{"from": "LHR", "to": "azure-lhr", metric: value}]})
    r = await api.call("PUT", "/api/v1/network/status", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["code"] == "VALIDATION_FAILED", err
    assert err["details"]["fields"] == [{"field": f"measurements[0].{metric}",
                                         "message": f"must be a finite number, not {value}"}], err
