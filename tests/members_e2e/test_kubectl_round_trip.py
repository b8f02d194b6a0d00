"""A user saves a propagated Deployment with kubectl and applies the file back: kubectl's client-side
apply (a strategic merge patch built against the typed ``apps/v1`` struct) refuses any status field
``DeploymentStatus`` does not name, so the template's status keeps to Kubernetes' schema and the
per-cluster view is on the Binding (``status.clusters[]``, ``status.usage``), as Karmada keeps it on
the ResourceBinding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import Env, karmada_policy, wait_for

NAME = "roundtrip"
BINDING = f"deployment-default-{NAME}"
DEPLOYMENT = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {NAME}, namespace: default}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: {NAME}}}}}
  template:
    metadata: {{labels: {{app: {NAME}}}}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
"""


def test_a_saved_propagated_deployment_applies_back(env: Env, kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", "-", input=karmada_policy(NAME, "aws-dfw"))
    kubectl.run("apply", "-f", "-", input=DEPLOYMENT)
    try:
        def aggregated() -> dict[str, Any] | None:
            got = yaml.safe_load(kubectl.run("get", "deploy", NAME, "-o", "yaml").stdout)
            return got if (got.get("status") or {}).get("readyReplicas") == 2 else None

        saved = wait_for(aggregated, 30, "the template's status aggregated from aws-dfw (2 ready)")
        # only DeploymentStatus' own fields: the per-cluster rows and the measured use are the Binding's
        assert set(saved["status"]) <= {"observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                                        "availableReplicas", "unavailableReplicas", "conditions",
                                        "collisionCount"}, saved["status"]
        path = tmp_path / "deploy.yaml"
        path.write_text(yaml.safe_dump(saved))
        done = kubectl.run("apply", "-f", str(path), check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() in (f"deployment.apps/{NAME} unchanged", f"deployment.apps/{NAME} configured"), \
            done.stdout
        # where each copy runs and how it is doing, where a Karmada user reads it (kubectl, the Binding)
        binding = yaml.safe_load(kubectl.run("get", "bindings.multicluster.io", BINDING, "-o", "yaml").stdout)
        rows = binding["status"]["clusters"]
        assert [(r["cluster"], r["city"], r["replicas"], r["applied"], r["readyReplicas"]) for r in rows] == \
            [("aws-dfw", "DFW", 2, True, 2)], rows
        # and `kubectl get deploy` still prints the CLUSTERS column, read from the Binding
        table = [line.split() for line in kubectl.run("get", "deploy", NAME).stdout.splitlines()]
        assert table[0][:5] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "CLUSTERS"], table
        assert table[1][:5] == [NAME, "2/2", "2", "2", "aws-dfw:2"], table
    finally:
        kubectl.run("delete", "-f", "-", input=DEPLOYMENT, check=False)
        kubectl.run("delete", "-f", "-", input=karmada_policy(NAME, "aws-dfw"), check=False)
