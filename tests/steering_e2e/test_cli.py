"""C4 by the CLI: ``drods apply -f`` registers a service, ``drods get`` lists it; a bad one is refused
with the field that is wrong."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Drods, cli_server, drods  # noqa: F401 - the fixtures

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "steering" / "registration.yaml"


def test_apply_and_get_a_registration(drods: Drods, tmp_path: Path) -> None:  # noqa: F811
    done = drods("apply", "-f", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    listed = drods("get", "serviceregistrations")
    assert listed.returncode == 0 and "video" in listed.stdout and "video.example" in listed.stdout, listed.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("strategy: experienceFirst", "strategy: fastest"))
    refused = drods("apply", "-f", str(bad))
    assert refused.returncode != 0 and "spec.strategy" in refused.stdout + refused.stderr
