"""The objects a pod spec names by name: its ConfigMaps, Secrets, ServiceAccount and
PersistentVolumeClaims (what must exist in a cluster before the pod can start there). Read by the
binding controller (dependents that follow a workload) and by ``kube.getPodDependencies`` of the
interpreter scripts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]


def pod_spec_references(ps: Obj) -> set[tuple[str, str]]:
    """(kind, name) of every ConfigMap, Secret, ServiceAccount and PersistentVolumeClaim ``ps`` uses."""
    cms, secrets = _config_and_secrets(ps)
    out = {("ConfigMap", n) for n in cms} | {("Secret", n) for n in secrets}
    account = ps.get("serviceAccountName") or ps.get("serviceAccount")
    if isinstance(account, str) and account and account != "default":
        out.add(("ServiceAccount", account))
    for v in ps.get("volumes") or []:
        claim = ((v or {}).get("persistentVolumeClaim") or {}).get("claimName") if isinstance(v, dict) else None
        if isinstance(claim, str) and claim:
            out.add(("PersistentVolumeClaim", claim))
    return out


def _config_and_secrets(ps: Obj) -> tuple[set[str], set[str]]:
    cms: set[str] = set()
    secrets: set[str] = set()
    for v in ps.get("volumes") or []:
        if not isinstance(v, dict):
            continue
        if (v.get("configMap") or {}).get("name"):
            cms.add(v["configMap"]["name"])
        if (v.get("secret") or {}).get("secretName"):
            secrets.add(v["secret"]["secretName"])
        for src in (v.get("projected") or {}).get("sources") or []:
            if (src.get("configMap") or {}).get("name"):
                cms.add(src["configMap"]["name"])
            if (src.get("secret") or {}).get("name"):
                secrets.add(src["secret"]["name"])
    for c in [*(ps.get("containers") or []), *(ps.get("initContainers") or [])]:
        if not isinstance(c, dict):
            continue
        for ef in c.get("envFrom") or []:
            if (ef.get("configMapRef") or {}).get("name"):
                cms.add(ef["configMapRef"]["name"])
            if (ef.get("secretRef") or {}).get("name"):
                secrets.add(ef["secretRef"]["name"])
        for env in c.get("env") or []:
            vf = (env or {}).get("valueFrom") or {}
            if (vf.get("configMapKeyRef") or {}).get("name"):
                cms.add(vf["configMapKeyRef"]["name"])
            if (vf.get("secretKeyRef") or {}).get("name"):
                secrets.add(vf["secretKeyRef"]["name"])
    for s in ps.get("imagePullSecrets") or []:
        if isinstance(s, dict) and s.get("name"):
            secrets.add(s["name"])
    return cms, secrets
