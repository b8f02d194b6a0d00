"""Secret key files: created once with mode 0600, or taken from an environment variable so that
several API replicas can share them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def load_or_create(path: Path, env_var: str, generate: Callable[[], bytes]) -> bytes:
    env = os.environ.get(env_var)
    if env:
        return env.encode()
    if path.exists():
        return path.read_bytes().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = generate()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first: use theirs
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key
