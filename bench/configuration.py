"""The configuration file a bench gives the control plane it starts (``DATA_DIR/drods.yaml``): the product's
defaults with the bench's sections laid over them (docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# failover at once however many members are down: neither held while none is Ready nor paced while most
# are NotReady (the product's defaults do both) — the failover storm some benches are built to make
FAILOVER_UNHELD: dict[str, Any] = {"holdFailoverWhileNoneReady": False, "unhealthyClusterThreshold": 1}


def write_configuration(data_dir: Path, **sections: dict[str, Any]) -> None:
    doc = {"apiVersion": "config.drods.io/v1alpha1", "kind": "DRODSConfiguration", **sections}
    (data_dir / "drods.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
