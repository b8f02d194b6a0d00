"""``drods whatif -f``: what each kind of file becomes as the request body."""

from __future__ import annotations

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
