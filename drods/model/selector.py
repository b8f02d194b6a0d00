"""Label selectors, Kubernetes semantics (matchLabels AND matchExpressions), and a Service's selector
over a pod template's labels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.model.meta import check_label_key, check_label_value


class LabelSelectorRequirement(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        return requirement_matches(labels, self.key, self.operator, self.values)


def requirement_matches(labels: Mapping[str, str], key: str, operator: str, values: Sequence[str]) -> bool:
    """One matchExpressions entry against a label set (a missing label fails In, passes NotIn)."""
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    return key not in labels


class LabelSelector(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    matchLabels: dict[str, str] = Field(default_factory=dict)
    matchExpressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.matchLabels.items()) and all(
            r.matches(labels) for r in self.matchExpressions
        )


def parse_selector(text: str) -> LabelSelector:
    """Parse the query-string form ``a=b,c!=d,e in (x,y),f notin (z),g,!h``."""
    reqs: list[LabelSelectorRequirement] = []
    match_labels: dict[str, str] = {}
    parts: list[str] = []
    depth, cur = 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    for raw in (p.strip() for p in parts):
        if not raw:
            continue
        lowered = raw.replace("\t", " ")
        if " notin " in lowered or " in " in lowered:
            negated = " notin " in lowered
            key, _, rest = lowered.partition(" notin " if negated else " in ")
            rest = rest.strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise ValueError(f"invalid selector term {raw!r}: values must be in parentheses")
            values = [v.strip() for v in rest[1:-1].split(",") if v.strip()]
            reqs.append(LabelSelectorRequirement(key=key.strip(), operator="NotIn" if negated else "In",
                                                 values=values))
        elif "!=" in raw:
            key, _, value = raw.partition("!=")
            reqs.append(LabelSelectorRequirement(key=key.strip(), operator="NotIn", values=[value.strip()]))
        elif "=" in raw:
            key, _, value = raw.replace("==", "=").partition("=")
            match_labels[key.strip()] = value.strip()
        elif raw.startswith("!"):
            reqs.append(LabelSelectorRequirement(key=raw[1:].strip(), operator="DoesNotExist"))
        else:
            reqs.append(LabelSelectorRequirement(key=raw, operator="Exists"))
    # as the Kubernetes API server parses one: a key or value no label could have is an error, not
    # a selector that matches nothing (`a===b`, `=b`, `a b c`)
    for key in match_labels:
        check_label_key(key)
    for value in match_labels.values():
        check_label_value(value)
    for r in reqs:
        check_label_key(r.key)
        for value in r.values:
            check_label_value(value)
    return LabelSelector(matchLabels=match_labels, matchExpressions=reqs)


def selects(service: Mapping[str, Any], template: Mapping[str, Any], pod: Mapping[str, Any] | None = None) -> bool:
    """A Service whose (non-empty) selector matches the pod template's labels."""
    selector = (service.get("spec") or {}).get("selector") or {}
    if not selector:
        return False
    tmpl = pod if pod is not None else ((template.get("spec") or {}).get("template") or {})
    labels = (tmpl.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())
