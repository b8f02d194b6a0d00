"""A bench's scratch directory: its stores hold keys and certificates, and a run's data reaches hundreds of
MiB, so it goes when the bench exits, however it exits short of a kill."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_dir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path
