"""`drods.api.access.RULES` rendered as the table in ``docs/security.md``, so the document says what
the code enforces (a test checks it is current). Run ``python -m drods.api.access_doc docs/security.md``
(``scripts/security-table``) after changing a rule: the table between the markers is replaced, the
rest of the file is kept."""

from __future__ import annotations

import sys
from pathlib import Path

from drods.api.access import RULES, Rule
from drods.api.auth import ALLOWED, Role

BEGIN = "<!-- access table: generated from drods/api/access.py by scripts/security-table; do not edit -->"
END = "<!-- end of access table -->"

# The callers of the table's columns: a role, whether its token is limited to namespaces.
CALLERS: tuple[tuple[str, Role | None, bool], ...] = (
    ("admin", Role.ADMIN, False), ("operator", Role.OPERATOR, False), ("viewer", Role.VIEWER, False),
    ("cluster-agent", Role.CLUSTER_AGENT, False), ("namespaced operator", Role.OPERATOR, True),
    ("namespaced viewer", Role.VIEWER, True), ("no token", None, False),
)
YES, NO, OWN_CLUSTER, OWN_NAMESPACES = "yes", "—", "own cluster", "own namespaces"


def answer(rule: Rule, role: Role | None, namespaced: bool) -> str:
    """What the table grants one caller: yes, no (—), or yes within its own cluster or namespaces."""
    if rule.public:
        return YES
    if role is None:
        return NO
    if rule.action is None:
        return YES
    if rule.action not in ALLOWED[role]:
        return NO
    if namespaced:
        if not rule.namespaced:
            return NO
        return f"{OWN_NAMESPACES} (`?namespace=`)" if rule.query_namespace else OWN_NAMESPACES
    return OWN_CLUSTER if role is Role.CLUSTER_AGENT and rule.own_cluster else YES


def table() -> str:
    head = ["method", "path", *(c[0] for c in CALLERS), "dryRun=All"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (method, path), rule in RULES.items():
        cells = [answer(rule, role, ns) for _, role, ns in CALLERS]
        lines.append(f"| {method} | `{path}` | " + " | ".join(cells) + f" | {rule.dry_run.value} |")
    return "\n".join(lines)


def rendered(document: str) -> str:
    """``document`` with its generated table replaced (appended when it has none yet)."""
    block = f"{BEGIN}\n\n{table()}\n\n{END}"
    if BEGIN in document and END in document:
        before, _, rest = document.partition(BEGIN)
        return before + block + rest.partition(END)[2]
    return document.rstrip("\n") + ("\n\n" if document.strip() else "") + block + "\n"


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "docs/security.md")
    path.write_text(rendered(path.read_text() if path.exists() else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
