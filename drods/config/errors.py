"""A configuration that cannot be used, with every problem found and where."""

from __future__ import annotations

from pydantic import ValidationError


class ConfigError(ValueError):
    """``source`` (a file, a flag, an environment variable) is invalid; ``errors`` are
    ``path: message`` lines, the path in the file's keys (``monitoring.fooBar: unknown key``)."""

    def __init__(self, source: str, errors: list[str]) -> None:
        super().__init__(f"invalid configuration in {source}: " + "; ".join(errors))
        self.source = source
        self.errors = errors


def validation_errors(e: ValidationError, prefix: str = "") -> list[str]:
    """pydantic's errors as ``path: message`` lines; an unknown key says so."""
    out: list[str] = []
    for err in e.errors():
        path = prefix + ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required"
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
        out.append(f"{path.rstrip('.') or '<root>'}: {msg}")
    return out
