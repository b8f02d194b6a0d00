"""The configuration inputs that came before ``drods.yaml``, read as parts of it.

Each old input maps onto one place of the new file, and its use is logged as a warning naming it:

=====================================================  =========================================
old input                                              section of ``drods.yaml``
=====================================================  =========================================
``<data dir>/members.yaml``                            ``members``
``<data dir>/monitor.yaml`` (its ``autoops:``)         ``monitoring`` (``autoops``)
``--profile FILE``, else ``$DRODS_SCHEDULER_PROFILE``,  ``scheduler.profile``
else ``<data dir>/scheduler-profile.yaml``
=====================================================  =========================================

Each is validated against its section on its own, so an error names the old file and its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from drods.config.errors import ConfigError, validation_errors
from drods.controllers.settings import MemberSettings
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.service import MonitorSettings
from drods.scheduler.profile import ProfileSpec

MEMBERS_FILE = "members.yaml"
MONITOR_FILE = "monitor.yaml"
PROFILE_FILE = "scheduler-profile.yaml"
PROFILE_ENV = "DRODS_SCHEDULER_PROFILE"


@dataclass(frozen=True, slots=True)
class OldInput:
    """One old input's settings and where they land in the new file."""

    source: str  # what warnings and errors name
    section: tuple[str, ...]  # ("members",), ("autoops",), ("scheduler", "profile"), …
    doc: dict[str, Any]


def read_mapping(path: Path, source: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping (empty: {})."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(source, [f"cannot be read: {e.strerror or e}"]) from e
    except yaml.YAMLError as e:
        raise ConfigError(source, [f"not valid YAML: {e}"]) from e
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(source, ["must be a YAML mapping"])
    return dict(data)


def _checked(model: type[BaseModel], doc: dict[str, Any], source: str, prefix: str = "") -> dict[str, Any]:
    try:
        model.model_validate(doc)
    except ValidationError as e:
        raise ConfigError(source, validation_errors(e, prefix)) from e
    return doc


def old_inputs(data_dir: Path, profile: Path | None, environ: Mapping[str, str]) -> list[OldInput]:
    """The old inputs present, each validated against its section."""
    found: list[OldInput] = []
    members = data_dir / MEMBERS_FILE
    if members.exists():
        src = str(members)
        found.append(OldInput(src, ("members",), _checked(MemberSettings, read_mapping(members, src), src)))
    monitor = data_dir / MONITOR_FILE
    if monitor.exists():
        src = str(monitor)
        doc = read_mapping(monitor, src)
        autoops = doc.pop("autoops", None)
        found.append(OldInput(src, ("monitoring",), _checked(MonitorSettings, doc, src)))
        if autoops is not None:
            if not isinstance(autoops, Mapping):
                raise ConfigError(src, ["autoops: must be a mapping"])
            found.append(OldInput(src, ("autoops",), _checked(AutoOpsPolicy, dict(autoops), src, "autoops.")))
    env = environ.get(PROFILE_ENV)
    if profile is not None:
        path, src = profile, f"--profile {profile}"
    elif env:
        path, src = Path(env), f"${PROFILE_ENV} ({env})"
    else:
        path, src = data_dir / PROFILE_FILE, str(data_dir / PROFILE_FILE)
        if not path.exists():
            return found
    found.append(OldInput(src, ("scheduler", "profile"), _checked(ProfileSpec, read_mapping(path, src), src)))
    return found
