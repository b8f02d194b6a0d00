"""One configuration for every DRO-DS process: ``drods.yaml`` (``config.drods.io/v1alpha1``,
kind ``DRODSConfiguration``), with the sections ``api``, ``scheduler`` (and its profile),
``monitoring``, ``members`` and ``autoops`` — see docs/configuration.md.

A process reads it once at start (`resolve`) and hands each component its typed section
(`drods.assembly.ComponentSettings.from_config`); no component reads a file of its own.
"""

from __future__ import annotations

from drods.config.errors import ConfigError
from drods.config.load import CONFIG_ENV, CONFIG_FILE, Resolved, default_yaml, load_file, parse, resolve
from drods.config.model import API_VERSION, KIND, DRODSConfiguration, SchedulerConfig

__all__ = ["API_VERSION", "CONFIG_ENV", "CONFIG_FILE", "KIND", "ConfigError", "DRODSConfiguration", "Resolved",
           "SchedulerConfig", "default_yaml", "load_file", "parse", "resolve"]
