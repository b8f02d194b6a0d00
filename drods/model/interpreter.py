"""The resource interpreter: where a kind keeps its replicas and its pod template (Karmada's
ResourceInterpreterCustomization idea, declared as data, never code in the object).

The detector reads a template through its kind's interpretation: a kind with a replica path is
divided across clusters like a Deployment; a kind without one goes whole to every selected cluster
(Duplicated). Built-ins cover the workload kinds; every other kind is interpreted as having neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Interpretation:
    """Dotted paths into the object; None where the kind has no such thing."""

    replicas: str | None = None
    pod_template: str | None = None

    @property
    def divisible(self) -> bool:
        return self.replicas is not None

    def replicas_of(self, obj: Mapping[str, Any]) -> int:
        """The replica count (1 when the path is absent or not a count; 1 for a kind without replicas)."""
        v = read_path(obj, self.replicas) if self.replicas else None
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 1

    def pod_template_of(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        t = read_path(obj, self.pod_template) if self.pod_template else None
        return t if isinstance(t, Mapping) else None


NONE = Interpretation()

# (apiVersion, kind) → interpretation; the same facts Karmada's built-in interpreter knows.
BUILT_IN: dict[tuple[str, str], Interpretation] = {
    ("apps/v1", "Deployment"): Interpretation("spec.replicas", "spec.template"),
    ("apps/v1", "StatefulSet"): Interpretation("spec.replicas", "spec.template"),
    ("apps/v1", "ReplicaSet"): Interpretation("spec.replicas", "spec.template"),
    ("batch/v1", "Job"): Interpretation("spec.parallelism", "spec.template"),
    ("apps/v1", "DaemonSet"): Interpretation(None, "spec.template"),
    ("batch/v1", "CronJob"): Interpretation(None, "spec.jobTemplate.spec.template"),
}


def interpretation(api_version: str, kind: str) -> Interpretation:
    return BUILT_IN.get((api_version, kind), NONE)


def read_path(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur
