"""Read YAML while remembering the line of every key and list item.

Design notes: docs/design/policy.md, "gpuspawner.policy.yaml_source".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

LineMap = dict[tuple[Any, ...], int]

MAX_FILE_BYTES = 4 * 1024 * 1024
"""The largest catalog file read (4 MiB; a catalog of a thousand courses is far smaller)."""
MAX_DEPTH = 32
"""How deeply blocks and lists may nest (a catalog needs about six levels)."""
MAX_ALIAS_VALUES = 20_000
"""How many values aliases (``*name``) may repeat in one file, counted once per use."""

MERGE_TAG = "tag:yaml.org,2002:merge"

_Collection = TypeVar("_Collection", yaml.SequenceNode, yaml.MappingNode)

# libyaml's parser when PyYAML was built with it (most wheels are); the events, and so
# the lines, are the same as those of the pure-Python parser.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YAMLSourceError(ValueError):
    """A file that is not valid YAML, or not shaped like a catalog at all."""

    def __init__(self, path: Path, line: int | None, message: str, field: str = ""):
        self.path = path
        self.line = line
        self.message = message
        self.field = field
        """Where in the data, such as ``courses[0].title``; empty for whole-file problems."""
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


def load_with_lines(path: Path) -> tuple[Any, LineMap]:
    """Parse ``path`` and return ``(data, lines)``; raises :class:`YAMLSourceError`."""
    text = _read(path)
    loader = _Loader(text)
    try:
        node = _Composer(loader, path).single_node()
        builder = _Builder(loader, path)
        data = builder.build(node, ()) if node is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        problem = error.problem or error.context or "cannot be parsed"
        raise YAMLSourceError(
            path, line, f"is not valid YAML ({problem}); check indentation and quoting there"
        ) from None
    except yaml.YAMLError as error:
        raise YAMLSourceError(path, None, f"is not valid YAML ({error})") from None
    except RecursionError:
        # The limits above should make this unreachable; still no traceback for a user.
        raise YAMLSourceError(
            path,
            None,
            "nests blocks, lists or aliases too deeply to be read; a catalog needs about six "
            "levels, so flatten it",
        ) from None
    finally:
        loader.dispose()
    return data, builder.lines


def field_name(loc: tuple) -> str:
    """``("courses", 0, "gpu")`` as ``courses[0].gpu``, the way errors name a field."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def line_for(lines: LineMap, loc: tuple) -> int | None:
    """The line of ``loc``, or of its closest ancestor that has one."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def _read(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            # Read one byte past the limit rather than trusting the size on disk (a pipe
            # or a file still being written has none).
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise YAMLSourceError(path, None, f"cannot be read: {error.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise YAMLSourceError(
            path,
            None,
            f"is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB, far more than a catalog "
            "needs; check that this is the right file, or split it into several files in a "
            "catalog folder",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise YAMLSourceError(path, None, "is not UTF-8 text; save it as UTF-8") from None


# -- parsing: nodes with their lines, aliases kept as references -----------------------


@dataclass(frozen=True)
class _Alias:
    """A use of ``*name``: the anchored node, and where the alias itself is written."""

    name: str
    node: yaml.Node
    start_mark: Any


Ref = yaml.Node | _Alias


def _target(ref: Ref) -> yaml.Node:
    return ref.node if isinstance(ref, _Alias) else ref


def _line(ref: Ref) -> int:
    return int(ref.start_mark.line) + 1


class _Composer:
    """PyYAML's composer, bounded: nesting is limited, and an alias is kept as an
    :class:`_Alias` (so errors can name its line) and refused when it points at a block
    still open around it, which would make the value endless."""

    def __init__(self, events: Any, source: Path):
        self.events = events
        self.source = source
        self.anchors: dict[str, yaml.Node] = {}
        self.open_anchors: set[str] = set()
        self.path: list[Any] = []

    def _error(self, event: Any, message: str) -> YAMLSourceError:
        """The problem ``message`` at ``event``'s line, under the path being read."""
        return YAMLSourceError(
            self.source, int(event.start_mark.line) + 1, message, field_name(tuple(self.path))
        )

    def single_node(self) -> Ref | None:
        events = self.events
        events.get_event()  # stream start
        node = None
        if not events.check_event(yaml.StreamEndEvent):
            events.get_event()  # document start
            node = self.node(0)
            events.get_event()  # document end
        if not events.check_event(yaml.StreamEndEvent):
            event = events.get_event()
            raise YAMLSourceError(
                self.source,
                int(event.start_mark.line) + 1,
                "starts a second YAML document (after a --- line); keep one catalog per "
                "file, or put the second one in a file of its own in a catalog folder",
            )
        events.get_event()  # stream end
        return node

    def node(self, depth: int) -> Ref:
        events = self.events
        if events.check_event(yaml.AliasEvent):
            event = events.get_event()
            name = event.anchor
            if name in self.open_anchors:
                raise self._error(
                    event,
                    f"the alias *{name} refers to the block &{name} that contains it, so its "
                    "value would never end; replace the alias with the values it should repeat",
                )
            if name not in self.anchors:
                raise self._error(
                    event,
                    f"uses the alias *{name}, but no block above it is anchored &{name}; "
                    "anchor the block to repeat (such as schedule: &{name}) before using it",
                )
            return _Alias(name, self.anchors[name], event.start_mark)
        event = events.peek_event()
        if depth > MAX_DEPTH:
            raise _too_deep(self.source, _line(event), tuple(self.path))
        anchor = event.anchor
        if anchor is not None and anchor in self.anchors:
            raise self._error(
                event,
                f"defines the anchor &{anchor} a second time (first at line "
                f"{_line(self.anchors[anchor])}); give each anchor its own name",
            )
        if events.check_event(yaml.ScalarEvent):
            event = events.get_event()
            scalar = yaml.ScalarNode(
                self._tag(yaml.ScalarNode, event.tag, event.value, event.implicit),
                event.value,
                event.start_mark,
                event.end_mark,
                style=event.style,
            )
            if anchor is not None:
                self.anchors[anchor] = scalar
            return scalar
        if anchor is not None:
            self.open_anchors.add(anchor)
        try:
            if events.check_event(yaml.SequenceStartEvent):
                return self._sequence(anchor, depth)
            return self._mapping(anchor, depth)
        finally:
            if anchor is not None:
                self.open_anchors.discard(anchor)

    def _open(self, kind: type[_Collection], anchor: str | None) -> _Collection:
        """A sequence or mapping node from its start event, known by ``anchor`` from now on."""
        start = self.events.get_event()
        node = kind(
            self._tag(kind, start.tag, None, start.implicit),
            [],
            start.start_mark,
            None,
            flow_style=start.flow_style,
        )
        if anchor is not None:
            self.anchors[anchor] = node
        return node

    def _sequence(self, anchor: str | None, depth: int) -> yaml.SequenceNode:
        events = self.events
        node = self._open(yaml.SequenceNode, anchor)
        while not events.check_event(yaml.SequenceEndEvent):
            self.path.append(len(node.value))
            node.value.append(self.node(depth + 1))
            self.path.pop()
        node.end_mark = events.get_event().end_mark
        return node

    def _mapping(self, anchor: str | None, depth: int) -> yaml.MappingNode:
        events = self.events
        node = self._open(yaml.MappingNode, anchor)
        while not events.check_event(yaml.MappingEndEvent):
            key = self.node(depth + 1)
            target = _target(key)
            self.path.append(target.value if isinstance(target, yaml.ScalarNode) else "?")
            value = self.node(depth + 1)
            self.path.pop()
            node.value.append((key, value))
        node.end_mark = events.get_event().end_mark
        return node

    def _tag(self, kind: type, tag: str | None, value: str | None, implicit: Any) -> str:
        if tag is None or tag == "!":
            return str(self.events.resolve(kind, value, implicit))
        return tag


def _too_deep(source: Path, line: int, path: tuple) -> YAMLSourceError:
    return YAMLSourceError(
        source,
        line,
        f"nests blocks and lists more than {MAX_DEPTH} levels deep, and a catalog needs "
        "about six; check the indentation, brackets and aliases there",
        field_name(path),
    )


# -- building: plain data and the line of every path -----------------------------------


class _Builder:
    """Turns nodes into plain data, counting the values that aliases repeat."""

    def __init__(self, constructor: Any, source: Path):
        self.constructor = constructor
        self.source = source
        self.lines: LineMap = {}
        self.alias_values = 0
        """Values built, or merge keys copied, while expanding an alias."""
        self.expanding: list[tuple[_Alias, tuple]] = []
        """The aliases being expanded, outermost first, with their paths."""
        self._pairs_of: dict[int, list[tuple[Any, int, Ref]]] = {}

    def build(self, ref: Ref, path: tuple) -> Any:
        if len(path) > MAX_DEPTH:
            # Through aliases, the too-deep value is written elsewhere: name the line of
            # the alias that leads there.
            raise _too_deep(
                self.source, _line(self.expanding[0][0] if self.expanding else ref), path
            )
        self.lines.setdefault(path, _line(ref))
        alias = ref if isinstance(ref, _Alias) else None
        if alias is not None:
            self.expanding.append((alias, path))
        try:
            self._spend(1)
            node = _target(ref)
            if isinstance(node, yaml.MappingNode):
                result: dict[Any, Any] = {}
                for key, line, value in self._pairs(node, path):
                    self.lines[path + (key,)] = line
                    result[key] = self.build(value, path + (key,))
                return result
            if isinstance(node, yaml.SequenceNode):
                items = []
                for index, item in enumerate(node.value):
                    self.lines[path + (index,)] = _line(item)
                    items.append(self.build(item, path + (index,)))
                return items
            return self._scalar(node)
        finally:
            if alias is not None:
                self.expanding.pop()

    def _spend(self, count: int) -> None:
        if not self.expanding:
            return
        self.alias_values += count
        if self.alias_values > MAX_ALIAS_VALUES:
            alias, path = self.expanding[0]
            raise YAMLSourceError(
                self.source,
                _line(alias),
                f"the alias *{alias.name} makes the file repeat more than {MAX_ALIAS_VALUES:,} "
                "values (each use of an alias repeats everything it refers to, so aliases "
                "inside aliases multiply); the file looks like an alias bomb and was not "
                "loaded. Write the values out, or use fewer aliases inside aliases",
                field_name(path),
            )

    def _scalar(self, node: yaml.Node) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except ValueError:
            # A scalar YAML resolves but cannot build, such as the date 2024-13-01: keep
            # the text, so validation reports it at its field with what is expected.
            return node.value

    def _pairs(
        self, node: yaml.MappingNode, path: tuple, merges_deep: int = 0
    ) -> list[tuple[Any, int, Ref]]:
        """``(key, line, value)`` of a mapping with its merge keys (``<<: *defaults``)
        applied: its own keys first, then merged keys it does not set itself, the first
        merged block winning, as YAML defines. Computed once per mapping."""
        known = self._pairs_of.get(id(node))
        if known is not None:
            return known
        own: dict[Any, tuple[int, Ref]] = {}
        merges: list[Ref] = []
        for key_ref, value_ref in node.value:
            key_node = _target(key_ref)
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == MERGE_TAG:
                merges.append(value_ref)
                continue
            key, line = self._key(key_ref, path), _line(key_ref)
            if key in own:
                raise YAMLSourceError(
                    self.source,
                    line,
                    f"repeats the key {key!r} (first at line {own[key][0]}); "
                    "each key may appear once in a block, so merge or remove one of them",
                    field_name(path + (key,)),
                )
            own[key] = (line, value_ref)
        for merge in merges:
            for source, source_node in self._merge_sources(merge, path):
                alias = source if isinstance(source, _Alias) else None
                if alias is not None:
                    self.expanding.append((alias, path))
                try:
                    if merges_deep >= MAX_DEPTH:
                        # A block merging a block merging a block...: bounded like nesting
                        # (blocks whose merged keys are all overridden are never built, so
                        # such a chain can be longer than the file is deep).
                        outermost = self.expanding[0][0] if self.expanding else source
                        raise _too_deep(self.source, _line(outermost), path)
                    merged = self._pairs(source_node, path, merges_deep + 1)
                    self._spend(len(merged))
                    for key, line, value in merged:
                        own.setdefault(key, (line, value))
                finally:
                    if alias is not None:
                        self.expanding.pop()
        pairs = [(key, line, value) for key, (line, value) in own.items()]
        self._pairs_of[id(node)] = pairs
        return pairs

    def _merge_sources(self, merge: Ref, path: tuple) -> list[tuple[Ref, yaml.MappingNode]]:
        target = _target(merge)
        sources = target.value if isinstance(target, yaml.SequenceNode) else [merge]
        found = []
        for source in sources:
            node = _target(source)
            if not isinstance(node, yaml.MappingNode):
                raise YAMLSourceError(
                    self.source,
                    _line(source),
                    "the merge key << takes a block of fields or a list of them, such as "
                    "<<: *defaults; anchor a block with &defaults and merge that",
                    field_name(path),
                )
            found.append((source, node))
        return found

    def _key(self, ref: Ref, path: tuple) -> Any:
        node = _target(ref)
        if isinstance(node, yaml.ScalarNode):
            key = self._scalar(node)
            if key is None or isinstance(key, str | int | float | bool):
                return key
        raise YAMLSourceError(
            self.source,
            _line(ref),
            "has a key that is not a plain name; write keys as words such as title:",
            field_name(path),
        )
