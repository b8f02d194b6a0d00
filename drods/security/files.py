"""Data files readable by their owner only (SEC2): the store (SQLite file, WAL, shared memory),
metric history, keys and the sims' and agents' state live in the data dir."""

from __future__ import annotations

import os
from pathlib import Path


def make_private(data_dir: Path) -> None:
    """From now on this process creates files 0600 and directories 0700; what ``data_dir`` already
    holds (a data dir from an older version) is narrowed to that too."""
    os.umask(0o077)
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    for root, dirs, files in os.walk(data_dir):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o700)
        for f in files:
            path = os.path.join(root, f)
            if not os.path.islink(path):
                os.chmod(path, 0o600)
