"""Unit tests of the member controllers' pure parts: overrides, manifests, status, tolerations."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drods.controllers import manifests as M
from drods.controllers.failover import toleration_seconds
from drods.controllers.overrides import (
    OverrideError,
    apply_field_patch,
    apply_overrides,
    override_image,
    parse_path,
    split_image,
)
from drods.controllers.status import copy_ready, observe, template_status
from drods.members.summary import ClusterSummary
from drods.model import annotations as A
from drods.model.karmada import KarmadaOverrideSpec
from drods.model.policy import ClusterOverridePolicySpec, FieldPatch, ImageOverrider


def deploy(name: str = "web", replicas: int = 6, **pod: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop", "uid": "u1", "resourceVersion": "9", "generation": 3,
                         "labels": {"app": name}, "annotations": {A.LAST_APPLIED: "{}", "team": "a"},
                         "managedFields": [{}], "finalizers": ["x"]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.25"},
                                                          {"name": "side", "image": "docker.io/lib/envoy:v1"}],
                                           **pod}}},
            "status": {"replicas": 6}}


def test_parse_path() -> None:
    assert parse_path("spec.template.spec.containers[0].resources.limits") == [
        "spec", "template", "spec", "containers", 0, "resources", "limits"]
    assert parse_path("metadata.labels[app.kubernetes.io/name]") == ["metadata", "labels", "app.kubernetes.io/name"]
    assert parse_path("/metadata/annotations/a~1b") == ["metadata", "annotations", "a/b"]


def test_field_patch_ops() -> None:
    d = deploy()
    apply_field_patch(d, FieldPatch(path="spec.template.spec.containers[0].resources.limits",
                                    value={"nvidia.com/gpu": 2}))
    assert d["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    apply_field_patch(d, FieldPatch(path="spec.template.spec.containers[0].resources", op="merge",
                                    value={"requests": {"cpu": "1"}}))
    assert d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    apply_field_patch(d, FieldPatch(path="spec.template.spec.containers[1]", op="add", value={"name": "mid"}))
    assert [c["name"] for c in d["spec"]["template"]["spec"]["containers"]] == ["app", "mid", "side"]
    apply_field_patch(d, FieldPatch(path="spec.template.spec.containers[-]", op="add", value={"name": "end"}))
    apply_field_patch(d, FieldPatch(path="spec.template.spec.containers[1]", op="remove"))
    assert [c["name"] for c in d["spec"]["template"]["spec"]["containers"]] == ["app", "side", "end"]
    apply_field_patch(d, FieldPatch(path="metadata.labels[app.kubernetes.io/part-of]", value="shop"))
    assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "shop"
    apply_field_patch(d, FieldPatch(path="spec.nothing.here", op="remove"))  # absent: nothing to do
    with pytest.raises(OverrideError, match="out of range"):
        apply_field_patch(d, FieldPatch(path="spec.template.spec.containers[7].image", value="x"))


@pytest.mark.parametrize(("image", "component", "operator", "value", "out"), [
    ("nginx:1.25", "Registry", "replace", "mirror.example", "mirror.example/nginx:1.25"),
    ("docker.io/lib/envoy:v1", "Registry", "add", "-eu", "docker.io-eu/lib/envoy:v1"),
    ("docker.io/lib/envoy:v1", "Registry", "remove", "", "lib/envoy:v1"),
    ("nginx:1.25", "Repository", "replace", "openresty", "openresty:1.25"),
    ("nginx:1.25", "Tag", "replace", "1.27", "nginx:1.27"),
    ("nginx:1.25", "Tag", "remove", "", "nginx"),
    ("localhost:5000/app@sha256:abc", "Tag", "replace", "sha256:def", "localhost:5000/app@sha256:def"),
])
def test_image_overrider(image: str, component: str, operator: str, value: str, out: str) -> None:
    o = ImageOverrider.model_validate({"component": component, "operator": operator, "value": value})
    assert override_image(image, o) == out


def test_split_image() -> None:
    assert split_image("registry:5000/a/b:1") == ("registry:5000", "a/b", ":1")
    assert split_image("a/b") == ("", "a/b", "")


def test_overrides_select_resources_and_clusters() -> None:
    policy = ClusterOverridePolicySpec.model_validate({
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
        "overrides": [
            {"clusterSelector": {"names": ["sin"]}, "fieldPatches": [{"path": "spec.paused", "value": True}]},
            {"clusterSelector": {"labelSelector": {"matchLabels": {"tier": "edge"}}},
             "imageOverrider": [{"component": "Registry", "value": "m.example", "container": "app"}],
             "argsOverrider": [{"containerName": "app", "operator": "add", "value": ["--edge"]}],
             "labelsOverrider": [{"operator": "add", "value": {"edge": "yes"}}],
             "annotationsOverrider": [{"operator": "remove", "value": {"team": ""}}]}]})
    other = ClusterOverridePolicySpec.model_validate({
        "resourceSelectors": [{"kind": "Deployment", "name": "api"}],
        "overrides": [{"clusterSelector": {}, "fieldPatches": [{"path": "spec.replicas", "value": 0}]}]})
    sin, edge = deploy(), deploy()
    assert apply_overrides(sin, "sin", {}, [("b-other", other), ("a-web", policy)]) == ["a-web"]
    assert sin["spec"]["paused"] is True and sin["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert apply_overrides(edge, "dfw", {"tier": "edge"}, [("a-web", policy)]) == ["a-web"]
    c = edge["spec"]["template"]["spec"]["containers"]
    assert (c[0]["image"], c[1]["image"]) == ("m.example/nginx:1.25", "docker.io/lib/envoy:v1")
    assert c[0]["args"] == ["--edge"] and edge["metadata"]["labels"]["edge"] == "yes"
    assert "team" not in edge["metadata"]["annotations"] and "paused" not in edge["spec"]
    untouched = deploy()
    assert apply_overrides(untouched, "lhr", {}, [("a-web", policy)]) == [] and untouched == deploy()
    # a failing patch names the policy by its own kind: a namespaced one is an OverridePolicy
    bad = ClusterOverridePolicySpec.model_validate({
        "resourceSelectors": [{"kind": "Deployment", "name": "web"}],
        "overrides": [{"clusterSelector": {}, "fieldPatches": [{"path": "spec.template.spec.containers.9.env",
                                                                "op": "replace", "value": []}]}]})
    for name, kind in (("shop/web-env", "OverridePolicy"), ("web-env", "ClusterOverridePolicy")):
        with pytest.raises(OverrideError, match=f"^{kind} {name}: "):
            apply_overrides(deploy(), "lhr", {}, [(name, bad)])


def test_member_manifest_shares_ownership_and_hash() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "shop", "generation": 1},
          "data": {"a": "1"}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"selector": {"app": "web"}}}
    unrelated = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": "shop"},
                 "spec": {"selector": {"app": "db"}}}
    d = deploy(volumes=[{"name": "v", "configMap": {"name": "cfg"}}],
               imagePullSecrets=[{"name": "pull"}])
    lookup = {("ConfigMap", "shop", "cfg"): cm}
    deps, looked = M.dependents(d, lambda k, ns, n: lookup.get((k, ns, n)), lambda ns: [svc, unrelated])
    assert [x["metadata"]["name"] for x in deps] == ["cfg", "web"]
    assert looked == {("ConfigMap", "shop", "cfg"), ("Secret", "shop", "pull")}
    plans = M.plan("b1", "uid-1", d, [M.Target("dfw", 4, {}), M.Target("sin", 2, {})], deps, [])
    w = plans["dfw"]
    assert isinstance(w, M.ManifestSet) and w.namespace == "shop"
    assert [str(r) for r in w.refs] == ["v1/ConfigMap/shop/cfg", "v1/Service/shop/web", "apps/v1/Deployment/shop/web"]
    main = w.manifests[-1]
    assert main["spec"]["replicas"] == 4 and "status" not in main
    meta = main["metadata"]
    assert set(meta) == {"name", "namespace", "labels", "annotations"}
    assert meta["labels"] == {"app": "web", A.MANAGED_BY: A.MANAGER, A.BINDING_LABEL: "b1"}
    assert A.LAST_APPLIED not in meta["annotations"] and meta["annotations"]["team"] == "a"
    assert meta["annotations"][A.ANN_TEMPLATE_GENERATION] == "3" and meta["annotations"][A.ANN_BINDING_UID] == "uid-1"
    assert w.manifests[0]["metadata"]["annotations"][A.ANN_DEPENDENT_OF] == "apps/v1/Deployment/shop/web"
    again = M.plan("b1", "uid-1", copy.deepcopy(d), [M.Target("dfw", 4, {})], deps, [])["dfw"]
    assert isinstance(again, M.ManifestSet) and again.hash == w.hash  # deterministic: nothing re-applied for nothing
    other = plans["sin"]
    assert isinstance(other, M.ManifestSet) and other.hash != w.hash


def test_service_accounts_claims_and_ingresses_follow_their_workload() -> None:
    def obj(api_version: str, kind: str, name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "shop"},
                "spec": spec}

    sa, pvc = obj("v1", "ServiceAccount", "runner"), obj("v1", "PersistentVolumeClaim", "data")
    svc = obj("v1", "Service", "web", selector={"app": "web"})
    routed = obj("networking.k8s.io/v1", "Ingress", "front",
                 rules=[{"http": {"paths": [{"path": "/", "backend": {"service": {"name": "web"}}}]}}])
    default = obj("networking.k8s.io/v1", "Ingress", "fallback", defaultBackend={"service": {"name": "web"}})
    elsewhere = obj("networking.k8s.io/v1", "Ingress", "db", defaultBackend={"service": {"name": "db"}})
    d = deploy(serviceAccountName="runner",
               volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "w", "persistentVolumeClaim": {"claimName": "missing"}}])
    lookup = {("ServiceAccount", "shop", "runner"): sa, ("PersistentVolumeClaim", "shop", "data"): pvc}
    deps, looked = M.dependents(d, lambda k, ns, n: lookup.get((k, ns, n)), lambda ns: [svc],
                                lambda ns: [elsewhere, routed, default])
    assert [(x["kind"], x["metadata"]["name"]) for x in deps] == [
        ("PersistentVolumeClaim", "data"), ("ServiceAccount", "runner"), ("Service", "web"),
        ("Ingress", "fallback"), ("Ingress", "front")]
    assert looked == {("ServiceAccount", "shop", "runner"), ("PersistentVolumeClaim", "shop", "data"),
                      ("PersistentVolumeClaim", "shop", "missing")}
    # the pod's default ServiceAccount exists in every namespace: it is not propagated
    assert M.dependents(deploy(serviceAccountName="default"), lambda k, ns, n: None, lambda ns: [])[1] == set()


def test_job_split_and_label_values() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
           "spec": {"parallelism": 5, "completions": 10, "template": {"spec": {"containers": []}}}}
    plans = M.plan("j", "u", job, [M.Target("a", 3, {}), M.Target("b", 2, {})], [], [])
    specs = {c: w.manifests[-1]["spec"] for c, w in plans.items() if isinstance(w, M.ManifestSet)}
    assert {c: (s["parallelism"], s["completions"]) for c, s in specs.items()} == {"a": (3, 6), "b": (2, 4)}
    assert M.split_largest_remainder(7, [1, 1, 1]) == [3, 2, 2]
    long = "deployment-" + "x" * 80
    assert len(M.label_value(long)) <= 63 and M.label_value(long) != M.label_value(long + "y")


def test_override_quantities_become_strings() -> None:
    policy = ClusterOverridePolicySpec.model_validate({"overrides": [{"clusterSelector": {"names": ["sin"]},
        "fieldPatches": [{"path": "spec.template.spec.containers[0].resources.limits",
                          "value": {"nvidia.com/gpu": 2, "cpu": 1.5}}]}]})
    w = M.plan("b", "u", deploy(), [M.Target("sin", 1, {})], [], [("p", policy)])["sin"]
    assert isinstance(w, M.ManifestSet)
    limits = w.manifests[-1]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "2", "cpu": "1.5"}
    bad = ClusterOverridePolicySpec.model_validate({"overrides": [{"clusterSelector": {},
        "fieldPatches": [{"path": "spec.template.spec.containers[9].image", "value": "x"}]}]})
    assert isinstance(M.plan("b", "u", deploy(), [M.Target("sin", 1, {})], [], [("bad", bad)])["sin"], OverrideError)


def test_readiness_and_template_status() -> None:
    member: dict[str, Any] = {"kind": "Deployment", "metadata": {"generation": 2, "annotations": {A.ANN_HASH: "h"}},
              "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                         "updatedReplicas": 3, "conditions": [{"type": "Available", "status": "True"}]}}
    obs = observe(member)
    assert obs.hash == "h" and copy_ready("Deployment", 3, obs) and not copy_ready("Deployment", 4, obs)
    stale = observe({**member, "status": {**member["status"], "observedGeneration": 1}})
    assert not copy_ready("Deployment", 3, stale)
    assert copy_ready("ConfigMap", 1, None)
    entries = [{"cluster": "dfw", "replicas": 3, "applied": True, "observedReplicas": 3, "readyReplicas": 3,
                "availableReplicas": 3, "updatedReplicas": 3},
               {"cluster": "lhr", "replicas": 2, "applied": True, "observedReplicas": 2, "readyReplicas": 1,
                "availableReplicas": 1, "updatedReplicas": 2}]
    entries[0]["usage"] = {"pods": 3, "readyPods": 3}
    st = template_status("Deployment", {"replicas": 5}, 4, entries, True, {}, "2026-01-01T00:00:00Z")
    assert (st["replicas"], st["readyReplicas"], st["availableReplicas"], st["observedGeneration"]) == (5, 4, 4, 4)
    # DeploymentStatus' fields only (kubectl apply of a saved template refuses others): the per-cluster
    # rows and the measured use are the Binding's
    assert set(st) <= {"replicas", "readyReplicas", "availableReplicas", "updatedReplicas", "unavailableReplicas",
                       "conditions", "observedGeneration"}, st
    # 4 of 5 available is within the default rollout budget (25 % of 5, rounded down: 1)
    assert st["conditions"][0]["status"] == "True" and st["unavailableReplicas"] == 1


def test_template_available_follows_the_rollout_budget_not_the_apply() -> None:
    """Kubernetes keeps a Deployment Available through a rollout while enough replicas are available:
    an update being applied (``all_applied`` False) does not flip it; too few available does."""
    def status(available: int, all_applied: bool, spec: dict[str, Any] | None = None) -> dict[str, Any]:
        entries = [{"cluster": "dfw", "replicas": 4, "applied": all_applied, "observedReplicas": 4,
                    "readyReplicas": available, "availableReplicas": available, "updatedReplicas": 4}]
        st = template_status("Deployment", spec or {"replicas": 4}, 2, entries, all_applied,
                             {"observedGeneration": 1}, "2026-01-01T00:00:00Z")
        return st

    def available(st: dict[str, Any]) -> str:
        return str(st["conditions"][0]["status"])

    mid_update = status(4, all_applied=False)
    assert available(mid_update) == "True" and mid_update["observedGeneration"] == 1
    assert available(status(3, all_applied=True)) == "True"  # 25 % of 4: one may be unavailable
    assert available(status(2, all_applied=True)) == "False"
    strict = {"replicas": 4, "strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}
    assert available(status(3, all_applied=True, spec=strict)) == "False"
    assert available(status(3, all_applied=True, spec={"strategy": {"type": "Recreate"}})) == "False"
    nothing_placed = template_status("Deployment", {"replicas": 2}, 1, [], False, {}, "2026-01-01T00:00:00Z")
    assert available(nothing_placed) == "False"


def test_toleration_precedence() -> None:
    cluster = {"metadata": {"annotations": {"multicluster.io/toleration-seconds": "12"}}}
    plain: dict[str, Any] = {"spec": {}}
    assert toleration_seconds(plain, cluster, 30) == 12
    assert toleration_seconds(plain, {"metadata": {}}, 30) == 30
    tol = {"spec": {"placement": {"clusterTolerations": [
        {"key": "cluster.multicluster.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 90}]}}}
    assert toleration_seconds(tol, cluster, 30) == 90
    forever = {"spec": {"placement": {"clusterTolerations": [{"operator": "Exists"}]}}}
    assert toleration_seconds(forever, cluster, 30) is None


def test_report_from_summary_keeps_the_water_level() -> None:
    from drods.members.collector import report_from_summary
    from drods.model.member_status import MemberStatus
    from drods.monitor.report import MetricsReport, normalise

    doc = {"timestamp": "x", "source": "kubernetes",
           "cpu": {"capacity": 24.0, "allocatable": 20.0, "allocated": 8.0, "used": 5.0},
           "memory": {"capacity": 96.0, "allocatable": 90.0, "allocated": 30.0, "used": 45.0},
           "gpu": {"capacity": 0.0, "allocatable": 0.0, "allocated": 0.0, "used": 0.0},
           "pods": {"capacity": 330.0, "used": 12}, "largestNodeFree": {"cpu": 4.0, "memory": 20.0, "gpu": 0.0},
           "network": {"inMbps": 0, "outMbps": 0}, "waterLevel": 0.5}
    s = ClusterSummary(member_status=MemberStatus.read(doc), node_count=3, ready_nodes=3, pending_pods=0,
                       kubernetes_version="v1.30", region="us-east", zones=["a"], provider="aws", city="DFW")
    body = report_from_summary("dfw", s, now=1_800_000_000.0)
    status = normalise(MetricsReport.model_validate(body), 1_800_000_000.0, source="kubernetes")
    assert not isinstance(status, str) and getattr(status, "water_level", None) == pytest.approx(0.5)
    assert body["cpuAllocated"] == 8.0 and body["podsCapacity"] == 330.0 and "gpuCapacity" not in body


def test_karmada_override_policies_translate_and_namespaced_ones_win() -> None:
    def karmada(image_tag: str, **target: Any) -> KarmadaOverrideSpec:
        return KarmadaOverrideSpec.model_validate({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "overrideRules": [{"targetCluster": target, "overriders": {
                "plaintext": [{"path": "/spec/template/spec/containers/0/resources",
                               "operator": "add", "value": {"limits": {"cpu": "1"}}}],
                "imageOverrider": [{"component": "Tag", "operator": "replace", "value": image_tag}]}}]})

    team = karmada("team", clusterNames=["dfw"]).as_override_policy("shop")
    fleet = karmada("fleet").as_override_policy(None)
    d = deploy()
    applied = M.apply_overrides(d, "dfw", {}, [("shop/team", team), ("z-fleet", fleet)])
    assert applied == ["z-fleet", "shop/team"]  # cluster-wide first, the namespaced one has the last word
    app = d["spec"]["template"]["spec"]["containers"][0]
    assert app["image"] == "nginx:team" and app["resources"] == {"limits": {"cpu": "1"}}
    other = deploy()
    assert M.apply_overrides(other, "sin", {}, [("shop/team", team), ("z-fleet", fleet)]) == ["z-fleet"]
    elsewhere = deploy()
    elsewhere["metadata"]["namespace"] = "billing"
    assert M.apply_overrides(elsewhere, "dfw", {}, [("shop/team", team)]) == []

    # Karmada's implicit priority within one scope: the policy naming the workload is applied after
    # the one selecting its kind, whatever their names, so the specific one wins
    def by(selector: dict[str, Any], tag: str) -> Any:
        return KarmadaOverrideSpec.model_validate({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", **selector}],
            "overrideRules": [{"overriders": {"imageOverrider": [
                {"component": "Tag", "operator": "replace", "value": tag}]}}]}).as_override_policy("shop")
    named, labelled, kind_only = by({"name": "web"}, "named"), by({"labelSelector": {"matchLabels": {
        "app": "web"}}}, "labelled"), by({}, "kind")
    ranked = deploy()
    ranked["metadata"]["labels"] = {"app": "web"}
    order = M.apply_overrides(ranked, "dfw", {}, [("shop/a-named", named), ("shop/b-labelled", labelled),
                                                  ("shop/c-kind", kind_only)])
    assert order == ["shop/c-kind", "shop/b-labelled", "shop/a-named"]
    assert ranked["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:named"
    # an imageOverrider's predicate (Karmada: which image path it applies to) is accepted as written
    spec = KarmadaOverrideSpec.model_validate({
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
        "overrideRules": [{"overriders": {"imageOverrider": [
            {"component": "Tag", "operator": "replace", "value": "x", "predicate": {"path": "/a"}}]}}]})
    assert spec.model_dump(exclude_none=True)["overrideRules"][0]["overriders"]["imageOverrider"][0][
        "predicate"] == {"path": "/a"}


def test_a_kind_without_replicas_goes_out_as_written() -> None:
    # a `spec` added to a ConfigMap or Secret is a field their schema does not declare: a member's
    # server-side apply refuses it
    for kind, body in (("ConfigMap", {"data": {"a": "1"}}), ("Secret", {"data": {"a": "MQ=="}, "type": "Opaque"})):
        obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "namespace": "shop"}, **body}
        w = M.plan("b", "u", obj, [M.Target("dfw", 1, {})], [], [])["dfw"]
        assert isinstance(w, M.ManifestSet) and "spec" not in w.manifests[-1], w.manifests[-1]


@pytest.mark.parametrize("op, path", [
    ("replace", "/spec/template/spec/nosuch/field"),  # was skipped in silence (or the maps made)
    ("remove", "/metadata/labels/absent"),
    ("add", "/spec/nosuch/field"),  # add needs the parent
])
def test_a_karmada_plaintext_patch_on_a_path_that_is_not_there_fails_the_override(op: str, path: str) -> None:
    spec = KarmadaOverrideSpec.model_validate({"overrideRules": [{"overriders": {
        "plaintext": [{"path": path, "operator": op, "value": 1}]}}]}).as_override_policy("shop")
    d = deploy()
    with pytest.raises(OverrideError) as e:
        M.apply_overrides(d, "dfw", {}, [("shop/bad", spec)])
    assert str(e.value).startswith(f"OverridePolicy shop/bad: plaintext {op} {path}:"), str(e.value)


def test_karmada_plaintext_applies_after_the_other_overriders_as_in_karmada() -> None:
    """Karmada applies the plaintext overrider last: a replace of the image wins over imageOverrider."""
    spec = KarmadaOverrideSpec.model_validate({"overrideRules": [{"overriders": {
        "plaintext": [{"path": "/spec/template/spec/containers/0/image", "operator": "replace", "value": "busybox"},
                      {"path": "/metadata/labels/app", "operator": "remove"}],
        "imageOverrider": [{"component": "Tag", "operator": "replace", "value": "9.9"}]}}]}).as_override_policy(None)
    d = deploy()
    assert M.apply_overrides(d, "dfw", {}, [("p", spec)]) == ["p"]
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    assert "app" not in d["metadata"]["labels"]
