"""Label selectors as the API server evaluates them, for the fake API and the state cache.

Two forms exist in Kubernetes and both are needed here:

* the string form of ``?labelSelector=`` (``a=b,c!=d,e in (f,g),h notin (i),j,!k``), parsed
  by :func:`parse_selector` (apimachinery ``labels.Parse``);
* the structured ``LabelSelector`` of PodDisruptionBudgets, DaemonSets and topology spread
  (``matchLabels`` plus ``matchExpressions`` with ``In, NotIn, Exists, DoesNotExist``),
  evaluated by :func:`selector_matches` (apimachinery ``LabelSelectorAsSelector``). An empty
  selector ``{}`` matches everything; a missing one (``None``) matches nothing, as policy/v1
  PodDisruptionBudgets define it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

LabelPredicate = Callable[[Mapping[str, str]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")


def _split_terms(selector: str) -> list[str]:
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        terms.append("".join(current))
    return [t.strip() for t in terms if t.strip()]


def parse_selector(selector: str | None) -> LabelPredicate:
    """A predicate over a label map for a ``labelSelector`` string; ValueError names a bad term.

    ``None`` or ``""`` selects everything.
    """
    if not selector:
        return lambda labels: True
    preds: list[LabelPredicate] = []
    for term in _split_terms(selector):
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            preds.append(_not_equals(key, value))
            continue
        if "==" in term or ("=" in term and "(" not in term):
            key, value = (s.strip() for s in re.split(r"==?", term, maxsplit=1))
            preds.append(_equals(key, value))
            continue
        m = _SET_RE.match(term)
        if not m:
            raise ValueError(f"labelSelector: cannot parse term {term!r}")
        negate, key, op, values = m.groups()
        if op:
            if negate:
                raise ValueError(f"labelSelector: cannot parse term {term!r}")
            vals = frozenset(v.strip() for v in values.split(",") if v.strip())
            preds.append(_in(key, vals, op == "in"))
        else:
            preds.append(_exists(key, not negate))

    def match(labels: Mapping[str, str]) -> bool:
        return all(p(labels) for p in preds)

    return match


def _equals(key: str, value: str) -> LabelPredicate:
    return lambda lb: lb.get(key) == value


def _not_equals(key: str, value: str) -> LabelPredicate:
    return lambda lb: lb.get(key) != value


def _in(key: str, values: frozenset[str], positive: bool) -> LabelPredicate:
    return lambda lb: (lb.get(key) in values) == positive


def _exists(key: str, positive: bool) -> LabelPredicate:
    return lambda lb: (key in lb) == positive


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether a structured ``LabelSelector`` selects ``labels``.

    ``None`` selects nothing, ``{}`` everything. Unknown operators select nothing (the API
    server would have rejected them; a controller must not act on a selector it cannot read).
    """
    if selector is None:
        return False
    lb = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if lb.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key = expr.get("key", "")
        op = expr.get("operator")
        values = expr.get("values") or []
        if op == "In":
            if lb.get(key) not in values:
                return False
        elif op == "NotIn":
            if key in lb and lb[key] in values:
                return False
        elif op == "Exists":
            if key not in lb:
                return False
        elif op == "DoesNotExist":
            if key in lb:
                return False
        else:
            return False
    return True
