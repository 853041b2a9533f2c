"""Label and field selectors as the API server parses and matches them.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``,
``a>1``, ``a<1``, joined by commas. Field selectors: ``path=value``, ``path==value``,
``path!=value`` on dotted paths, with ``\\,``, ``\\=`` and ``\\\\`` escapes in values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector string that the API server would reject with 400 Bad Request."""


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.operator == "=":
            return has and value == self.values[0]
        if self.operator == "in":
            return has and value in self.values
        if self.operator == "!=":
            return not has or value != self.values[0]
        if self.operator == "notin":
            return not has or value not in self.values
        if self.operator == "exists":
            return has
        if self.operator == "!":
            return not has
        if not has:
            return False
        try:
            number = int(value)  # type: ignore[arg-type]
        except ValueError:
            return False
        limit = int(self.values[0])
        return number > limit if self.operator == "gt" else number < limit


_LABEL_KEY = re.compile(
    r"^([a-z0-9A-Z]([-a-z0-9A-Z.]*[a-z0-9A-Z])?/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_TOKEN = re.compile(r"\s*(\(|\)|,|!=|==|=|!|>|<|[^\s(),!=<>]+)")


def _tokens(text: str) -> list[str]:
    tokens = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if not match:
            raise SelectorError(
                f"unable to parse requirement: unexpected character at {text[pos:]!r}"
            )
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def parse_label_selector(text: str | None) -> tuple[LabelRequirement, ...]:
    """Parse a label selector; an empty selector matches everything."""
    if not text or not text.strip():
        return ()
    tokens = _tokens(text)
    requirements = []
    i = 0

    def expect_key(token: str) -> str:
        if not _LABEL_KEY.match(token) or len(token.split("/")[-1]) > 63:
            raise SelectorError(f'unable to parse requirement: invalid label key "{token}"')
        return token

    def expect_value(token: str) -> str:
        if not _LABEL_VALUE.match(token) or len(token) > 63:
            raise SelectorError(f'unable to parse requirement: invalid label value: "{token}"')
        return token

    while i < len(tokens):
        if tokens[i] == "!":
            requirements.append(LabelRequirement(expect_key(tokens[i + 1]), "!"))
            i += 2
        else:
            key = expect_key(tokens[i])
            op = tokens[i + 1] if i + 1 < len(tokens) else ","
            if op == ",":
                requirements.append(LabelRequirement(key, "exists"))
                i += 1
            elif op in ("=", "==", "!="):
                value = tokens[i + 2] if i + 2 < len(tokens) and tokens[i + 2] != "," else ""
                expect_value(value)
                requirements.append(LabelRequirement(key, "!=" if op == "!=" else "=", (value,)))
                i += 3 if value else 2
            elif op in (">", "<"):
                value = tokens[i + 2] if i + 2 < len(tokens) else ""
                if not value.lstrip("-").isdigit():
                    raise SelectorError(
                        f"unable to parse requirement: for 'gt', 'lt' operators, the value must be an integer, got {value!r}"
                    )
                requirements.append(LabelRequirement(key, "gt" if op == ">" else "lt", (value,)))
                i += 3
            elif op in ("in", "notin"):
                if i + 2 >= len(tokens) or tokens[i + 2] != "(":
                    raise SelectorError(
                        f"unable to parse requirement: found '{tokens[i + 2] if i + 2 < len(tokens) else ''}', expected: '('"
                    )
                j = i + 3
                values: list[str] = []
                while j < len(tokens) and tokens[j] != ")":
                    if tokens[j] != ",":
                        values.append(expect_value(tokens[j]))
                    j += 1
                if j >= len(tokens):
                    raise SelectorError("unable to parse requirement: found '', expected: ')'")
                requirements.append(LabelRequirement(key, op, tuple(values)))
                i = j + 1
            else:
                raise SelectorError(
                    f"unable to parse requirement: found '{op}', expected: in, notin, =, ==, !=, gt, lt"
                )
        if i < len(tokens):
            if tokens[i] != ",":
                raise SelectorError(
                    f"unable to parse requirement: found '{tokens[i]}', expected: ','"
                )
            i += 1
    return tuple(requirements)


def labels_match(
    requirements: tuple[LabelRequirement, ...], labels: Mapping[str, str] | None
) -> bool:
    labels = labels or {}
    return all(requirement.matches(labels) for requirement in requirements)


def label_selector_from_dict(selector: Mapping[str, Any] | None) -> tuple[LabelRequirement, ...]:
    """A metav1.LabelSelector ({matchLabels, matchExpressions}) as requirements."""
    if not selector:
        return ()
    requirements = [
        LabelRequirement(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or []:
        operator = operators[expression["operator"]]
        requirements.append(
            LabelRequirement(expression["key"], operator, tuple(expression.get("values") or ()))
        )
    return tuple(requirements)


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    value: str
    negated: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.path) == self.value) != self.negated


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string form of a dotted path, as the API server's field sets hold it ('' if absent)."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append("\\" + char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_field_selector(
    text: str | None, allowed: Callable[[str], bool] | None = None
) -> tuple[FieldRequirement, ...]:
    """Parse a field selector; ``allowed(path)`` rejects fields the resource does not index."""
    if not text or not text.strip():
        return ()
    requirements = []
    for term in _split_unescaped(text, ","):
        term = term.strip()
        if not term:
            continue
        for operator in ("!=", "==", "="):
            index = term.find(operator)
            if index > 0:
                path, value = term[:index].strip(), _unescape(term[index + len(operator) :])
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        if allowed is not None and not allowed(path):
            raise SelectorError(f"field label not supported: {path}")
        requirements.append(FieldRequirement(path, value, operator == "!="))
    return tuple(requirements)


def fields_match(requirements: tuple[FieldRequirement, ...], obj: Mapping[str, Any]) -> bool:
    return all(requirement.matches(obj) for requirement in requirements)
