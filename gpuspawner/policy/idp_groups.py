"""Which JupyterHub groups a campus login brings: the identity provider's groups, mapped.

Design notes: docs/design/policy.md, "gpuspawner.policy.idp_groups".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MappedGroups:
    """The outcome of one login's mapping."""

    kept: frozenset[str]
    """The hub groups the user is a member of from now on."""
    dropped: frozenset[str]
    """Identity-provider values that mean nothing to the hub (for the log)."""


@dataclass(frozen=True)
class GroupMapping:
    """How identity-provider groups become hub groups."""

    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    keep: frozenset[str] = frozenset()
    patterns: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def build(
        cls,
        aliases: Mapping[str, str | Iterable[str]] | None = None,
        keep: Iterable[str] = (),
        patterns: Iterable[str] = (),
    ) -> GroupMapping:
        """From configuration values; raises ValueError naming a bad pattern."""
        compiled = []
        for pattern in patterns:
            try:
                compiled.append(re.compile(pattern))
            except re.error as error:
                raise ValueError(
                    f"keep_group_patterns: {pattern!r} is not a regular expression ({error})"
                ) from None
        normalised = {
            str(value): (names,) if isinstance(names, str) else tuple(str(n) for n in names)
            for value, names in (aliases or {}).items()
        }
        return cls(normalised, frozenset(keep), tuple(compiled))

    def map(self, idp_groups: Iterable[object], catalog_groups: frozenset[str]) -> MappedGroups:
        """The hub groups for a user whose token lists ``idp_groups``.

        ``catalog_groups``: the groups the catalog gives a meaning to
        (:meth:`Catalog.known_groups`). Values that are not strings are dropped.
        """
        kept: set[str] = set()
        dropped: set[str] = set()
        for value in idp_groups:
            if not isinstance(value, str) or not value:
                dropped.add(repr(value))
                continue
            aliased = self.aliases.get(value)
            if aliased is not None:
                kept.update(aliased)  # configured by name: always wanted
            elif self._wanted(value, catalog_groups):
                kept.add(value)
            else:
                dropped.add(value)
        return MappedGroups(frozenset(kept), frozenset(dropped))

    def _wanted(self, name: str, catalog_groups: frozenset[str]) -> bool:
        return (
            name in self.keep
            or name in catalog_groups
            or any(pattern.fullmatch(name) for pattern in self.patterns)
        )
