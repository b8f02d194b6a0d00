"""Kubernetes object semantics over the store: CRUD, patch, finalizers, watch, the kind catalog and
sealed secret fields."""
