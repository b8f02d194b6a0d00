"""``kubectl get componentstatuses`` / ``cs`` and a core ``Binding`` created with kubectl, as against
kube-apiserver: discovery lists them, the columns are kube-apiserver's, a bound Pod has its node."""

from __future__ import annotations

import json

from tests.kubectl.conftest import Kubectl

POD = """
apiVersion: v1
kind: Pod
metadata: {name: to-bind, namespace: default}
spec:
  containers: [{name: c, image: nginx}]
"""
BINDING = json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "to-bind", "namespace": "default"},
                      "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"}})


def test_kubectl_lists_component_statuses_and_binds_a_pod(kubectl: Kubectl) -> None:
    out = kubectl.run("get", "componentstatuses").stdout
    assert out.split()[:4] == ["NAME", "STATUS", "MESSAGE", "ERROR"], out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert rows["store"] == "Healthy" and rows["scheduler"] == "Healthy", out  # the shared server runs both
    assert kubectl.run("get", "cs", "scheduler", "-o", "json").stdout.count('"Healthy"') == 1
    resources = kubectl.run("api-resources", "--api-group=").stdout
    assert any(line.split()[:2] == ["componentstatuses", "cs"] for line in resources.splitlines()), resources
    # `kubectl get bindings` stays DRO-DS's own bindings.multicluster.io
    assert "the server doesn't have a resource type" not in kubectl.run("get", "bindings", check=False).stderr

    kubectl.run("apply", "-f", "-", input=POD)
    path = "/api/v1/namespaces/default/pods/to-bind/binding"
    kubectl.run("create", "--raw", path, "-f", "-", input=BINDING)
    pod = json.loads(kubectl.run("get", "pod", "to-bind", "-o", "json").stdout)
    assert pod["spec"]["nodeName"] == "node-7"
    again = kubectl.run("create", "--raw", path, "-f", "-", input=BINDING, check=False)
    assert again.returncode != 0 and "already assigned" in again.stderr, again.stderr
    kubectl.run("delete", "pod", "to-bind")
