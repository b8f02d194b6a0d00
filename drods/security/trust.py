"""What a client of the control plane trusts: a CA file it was given, else the CA that ``drods
serve`` made in the data dir (``DATA_DIR/tls/ca.crt``), on top of the system's CAs."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

SERVER_TLS_DIR = "tls"


def data_dir_ca(data_dir: Path | None = None) -> Path:
    """The control plane's own CA certificate in ``data_dir`` (default: $DRODS_DATA_DIR or ~/.drods)."""
    root = data_dir or Path(os.environ.get("DRODS_DATA_DIR") or Path.home() / ".drods")
    return root / SERVER_TLS_DIR / "ca.crt"


def client_context(ca_file: str | Path | None = None, data_dir: Path | None = None) -> ssl.SSLContext:
    """System CAs plus ``ca_file`` — or, without one, the data dir's CA when there is one."""
    ctx = ssl.create_default_context()
    extra = Path(ca_file) if ca_file else data_dir_ca(data_dir)
    if ca_file or extra.is_file():
        ctx.load_verify_locations(cafile=str(extra))
    return ctx
