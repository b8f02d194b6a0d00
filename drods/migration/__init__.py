"""Stateful migration plans (SPEC F3): the phase machine and its controller; docs/migration.md."""
