"""Which configuration a process runs with, and reading it.

The file is ``--config FILE``, else ``$DRODS_CONFIG``, else ``<data dir>/drods.yaml`` when it exists,
else none (every default). The old inputs (`drods.config.deprecated`) are mapped onto it, each
with a warning naming it; where the file and an old input both set a knob, the file wins (a
section's keys, and ``scheduler.profile``'s, are taken from the file first, then the old input).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from drods.config.deprecated import OldInput, old_inputs, read_mapping
from drods.config.errors import ConfigError, validation_errors
from drods.config.model import API_VERSION, KIND, DRODSConfiguration
from drods.scheduler.profile import Profile, ProfileError

log = logging.getLogger("drods.config")

CONFIG_ENV = "DRODS_CONFIG"
CONFIG_FILE = "drods.yaml"


@dataclass(frozen=True, slots=True)
class Resolved:
    config: DRODSConfiguration
    path: Path | None  # the configuration file read (None: defaults and old inputs only)
    deprecated: tuple[str, ...]  # the old inputs mapped onto it


def parse(doc: Mapping[str, Any], source: str) -> DRODSConfiguration:
    """Validate a whole document, its scheduler profile's plugin names included."""
    try:
        config = DRODSConfiguration.model_validate(dict(doc))
    except ValidationError as e:
        raise ConfigError(source, validation_errors(e)) from e
    try:
        Profile.from_spec(config.scheduler.profile)
    except ProfileError as e:
        raise ConfigError(source, [f"scheduler.profile.{err}" for err in e.errors]) from e
    return config


def load_file(path: Path) -> DRODSConfiguration:
    return parse(read_mapping(path, str(path)), str(path))


def default_yaml() -> str:
    """The whole file with every default (valid YAML that loads back to the defaults)."""
    body = yaml.safe_dump(DRODSConfiguration.default().model_dump(mode="json"), sort_keys=False)
    return "# DRO-DS configuration, every knob at its default; see docs/configuration.md\n" + body


def config_path(data_dir: Path, path: Path | None, environ: Mapping[str, str]) -> tuple[Path | None, str]:
    """The configuration file to read and how it was chosen; a named file must exist."""
    if path is not None:
        chosen, how = path, f"--config {path}"
    elif environ.get(CONFIG_ENV):
        chosen, how = Path(environ[CONFIG_ENV]), f"${CONFIG_ENV} ({environ[CONFIG_ENV]})"
    else:
        default = data_dir / CONFIG_FILE
        return (default, str(default)) if default.exists() else (None, "defaults")
    if not chosen.is_file():
        raise ConfigError(how, ["no such file"])
    return chosen, how


def resolve(data_dir: Path, path: Path | None = None, *, profile: Path | None = None,
            environ: Mapping[str, str] | None = None) -> Resolved:
    """The configuration of a process started with ``--data-dir data_dir [--config path]
    [--profile profile]`` (see the module docstring)."""
    env = os.environ if environ is None else environ
    chosen, how = config_path(data_dir, path, env)
    log.info("configuration from %s", how)
    new = read_mapping(chosen, str(chosen)) if chosen is not None else {"apiVersion": API_VERSION, "kind": KIND}
    source = str(chosen) if chosen is not None else "the built-in defaults"
    olds = old_inputs(data_dir, profile, env)
    merged = _merge(new, olds, source)
    config = parse(merged, source)
    return Resolved(config, chosen, tuple(dict.fromkeys(o.source for o in olds)))


def _merge(new: dict[str, Any], olds: list[OldInput], source: str) -> dict[str, Any]:
    doc = dict(new)
    for old in olds:
        where = ".".join(old.section)
        log.warning("deprecated configuration input %s: read as %s of %s; move its settings there "
                    "(docs/configuration.md)", old.source, where, CONFIG_FILE)
        parent = doc
        for key in old.section[:-1]:
            value = parent.get(key, {})
            if not isinstance(value, Mapping):
                break  # not a mapping in the file: its validation says so
            parent[key] = dict(value)
            parent = parent[key]
        else:
            given = parent.get(old.section[-1], {})
            if not isinstance(given, Mapping):
                continue
            both = sorted(set(given) & set(old.doc))
            parent[old.section[-1]] = {**old.doc, **given}
            if both:
                log.warning("%s and %s both set %s; %s wins", old.source, source,
                            ", ".join(f"{where}.{k}" for k in both), source)
    return doc
