"""Access to member clusters through the official Kubernetes client (A3, SEC4)."""
