"""``drods whatif -f``: what each kind of file becomes as the request body."""

from __future__ import annotations

from typing import Any

import pytest

from drods.cli.remote import CliError
from drods.cli.whatif import request_body

SPEC = {"replicas": 4, "resources": {"cpu": 1}, "placement": {"clusterAffinity": {"clusterNames": ["a"]}}}
DAEMONS = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "ops"}}
CLUSTER_POLICY = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
                  "metadata": {"name": "all"}, "spec": {"resourceSelectors": [{"apiVersion": "apps/v1",
                                                                               "kind": "DaemonSet"}]}}


def test_a_binding_as_kubectl_prints_it_is_its_spec_under_its_name() -> None:
    printed = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
               "metadata": {"name": "train", "resourceVersion": "12"}, "spec": SPEC, "status": {"phase": "Scheduled"}}
    assert request_body([printed]) == {"binding": {**SPEC, "name": "train"}}
    assert request_body([SPEC]) == {"binding": SPEC}


def test_any_workload_kind_with_any_placement_policy_kind() -> None:
    assert request_body([DAEMONS, CLUSTER_POLICY]) == {"workload": DAEMONS, "policy": CLUSTER_POLICY}


def test_two_workloads_are_refused() -> None:
    with pytest.raises(CliError) as e:
        request_body([DAEMONS, {**DAEMONS, "metadata": {"name": "other"}}])
    assert e.value.code == "MALFORMED_FILE"


def test_a_deployment_and_a_policy_in_two_files(tmp_path: Any, monkeypatch: Any) -> None:
    """docs/whatif.md: ``drods whatif -f deploy.yaml -f policy.yaml`` tries that policy on that Deployment."""
    from types import SimpleNamespace

    import yaml
    from typer.testing import CliRunner

    import drods.cli.whatif as cli_whatif
    from drods.cli.main import app

    sent: list[dict[str, Any]] = []

    def request(method: str, path: str, json: dict[str, Any]) -> Any:
        sent.append(json)
        return SimpleNamespace(json=lambda: {"phase": "Scheduled", "placement": []})

    monkeypatch.setattr(cli_whatif, "connect", lambda *a, **k: SimpleNamespace(request=request))
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}}
    (tmp_path / "deploy.yaml").write_text(yaml.safe_dump(deploy))
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(CLUSTER_POLICY))
    r = CliRunner().invoke(app, ["whatif", "-f", str(tmp_path / "deploy.yaml"), "-f", str(tmp_path / "policy.yaml"),
                                 "--server", "https://x", "--token", "t", "-o", "json"])
    assert r.exit_code == 0, r.output
    assert sent == [{"workload": deploy, "policy": CLUSTER_POLICY, "changes": []}]
