"""F5 through the real kubectl: FederatedHPA and CronFederatedHPA are listed, applied from the
examples, and a second autoscaler for the same workload is refused with the owner's name."""

from __future__ import annotations

import json
from pathlib import Path

from tests.kubectl.conftest import Kubectl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "autoscaling"

SECOND = """
apiVersion: multicluster.io/v1alpha1
kind: FederatedHPA
metadata: {name: web-again, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 5
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]
"""


def test_autoscalers_are_listed_applied_and_one_per_workload(kubectl: Kubectl) -> None:
    rows = {line.split()[0]: line for line in kubectl.run("api-resources").stdout.splitlines()[1:] if line.strip()}
    assert "multicluster.io/v1alpha1" in rows["federatedhpas"] and " fhpa " in rows["federatedhpas"] + " "
    assert "true" in rows["cronfederatedhpas"].lower()  # namespaced
    try:
        for name in ("web.yaml", "federatedhpa.yaml", "cronfederatedhpa.yaml"):
            kubectl.run("apply", "-f", str(EXAMPLES / name))
        got = json.loads(kubectl.run("get", "federatedhpas", "-n", "default", "-o", "json").stdout)
        assert [i["metadata"]["name"] for i in got["items"]] == ["web"]
        assert got["items"][0]["spec"]["feedback"] == {"latencyP99Ms": 250, "maxErrorRate": 0.01}
        crons = kubectl.run("get", "cronfederatedhpas", "-n", "default").stdout
        assert "web-office-hours" in crons
        refused = kubectl.run("apply", "-f", "-", input=SECOND, check=False)
        assert refused.returncode != 0 and "already scaled by FederatedHPA 'web'" in refused.stderr, refused.stderr
    finally:
        for name in ("cronfederatedhpa.yaml", "federatedhpa.yaml", "web.yaml"):
            kubectl.run("delete", "--ignore-not-found", "-f", str(EXAMPLES / name), check=False)
