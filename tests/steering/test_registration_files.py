"""C4: registrations from a file named in the configuration, applied when the controller starts leading."""

from __future__ import annotations

from pathlib import Path

from drods.machinery.informer import Informer
from drods.model.kinds import SERVICE_REGISTRATION
from drods.registry.objects import ObjectRegistry, decode_stored
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.steering.controller import SteeringController, SteeringInformers
from drods.steering.settings import SteeringSettings
from drods.store import Store

DOC = """
apiVersion: multicluster.io/v1alpha1
kind: ServiceRegistration
metadata: {name: video, namespace: default}
spec:
  serviceId: video.example
  workload: {apiVersion: apps/v1, kind: Deployment, name: video, namespace: default}
  clientSites: [DFW]
  strategy: %s
---
kind: ConfigMap
---
apiVersion: multicluster.io/v1alpha1
kind: ServiceRegistration
metadata: {name: broken}
spec: {serviceId: "Not Valid", clientSites: []}
"""


async def test_registration_file_is_applied_and_reapplied(store: Store, tmp_path: Path) -> None:
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    f = tmp_path / "services.yaml"
    f.write_text(DOC % "costFirst")
    informers = SteeringInformers(*(Informer(store, "/x/", decode_stored) for _ in range(5)))
    ctl = SteeringController(registry, informers, SteeringSettings(registrationFiles=[str(f), str(tmp_path / "nope")]))
    assert await ctl.apply_files() == ["default/video"]  # the bad document and the missing file are skipped
    assert (await registry.get(SERVICE_REGISTRATION, "video", "default"))["spec"]["strategy"] == "costFirst"
    f.write_text(DOC % "resourceFirst")
    assert await ctl.apply_files() == ["default/video"]
    assert (await registry.get(SERVICE_REGISTRATION, "video", "default"))["spec"]["strategy"] == "resourceFirst"
