"""Federated autoscaling (SPEC F5, F6, H3): who owns a workload's total replicas, and how it moves."""
