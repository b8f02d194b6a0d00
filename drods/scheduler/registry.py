"""Plugin registry (S8): built-ins register by name; third parties via the ``drods.scheduler.plugins``
entry point group, so an operator adds a plugin by installing a package, never by editing the core.

An entry point may name a plugin class, a module exposing ``PLUGINS``, or an iterable of classes.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "drods.scheduler.plugins"

_filters: dict[str, type] = {}
_scores: dict[str, type] = {}
_loaded_entry_points: set[str] = set()


class RegistryError(ValueError):
    """A plugin could not be registered or found."""


def _kind(cls: type) -> str:
    has_f = callable(getattr(cls, "filter", None))
    has_s = callable(getattr(cls, "score", None))
    if has_f == has_s:
        raise RegistryError(f"plugin {cls!r} must implement exactly one of filter() or score()")
    return "filter" if has_f else "score"


def register(cls: type, *, replace: bool = False) -> type:
    """Register a plugin class under ``cls.name``; usable as a class decorator."""
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name:
        raise RegistryError(f"plugin {cls!r} has no name")
    table = _filters if _kind(cls) == "filter" else _scores
    if name in table and table[name] is not cls and not replace:
        raise RegistryError(f"plugin name {name!r} already registered by {table[name]!r}")
    table[name] = cls
    return cls


def filter_plugins() -> dict[str, type]:
    _ensure_builtins()
    return dict(_filters)


def score_plugins() -> dict[str, type]:
    _ensure_builtins()
    return dict(_scores)


def _ensure_builtins() -> None:
    import drods.scheduler.plugins  # noqa: F401  (registers built-ins on import)


def _classes(obj: Any) -> Iterable[type]:
    if isinstance(obj, type):
        return [obj]
    if isinstance(obj, ModuleType):
        return list(getattr(obj, "PLUGINS", []))
    if isinstance(obj, Iterable):
        return [c for c in obj if isinstance(c, type)]
    return []


def load_entry_points(group: str = ENTRY_POINT_GROUP, *, refresh: bool = False) -> list[str]:
    """Load third-party plugins from installed distributions; returns the names registered now."""
    _ensure_builtins()
    added: list[str] = []
    for ep in importlib.metadata.entry_points(group=group):
        ident = f"{ep.name}={ep.value}"
        if ident in _loaded_entry_points and not refresh:
            continue
        try:
            obj = ep.load()
        except Exception:  # a broken third-party package must not take the scheduler down
            log.exception("cannot load scheduler plugin entry point %s", ident)
            continue
        for cls in _classes(obj):
            try:
                register(cls, replace=refresh)
            except RegistryError:
                log.exception("cannot register scheduler plugin from %s", ident)
                continue
            added.append(cls.name)  # type: ignore[attr-defined]
        _loaded_entry_points.add(ident)
    return added
