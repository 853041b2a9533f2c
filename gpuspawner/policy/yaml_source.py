"""Read YAML while remembering the line of every key and list item.

``load_with_lines`` returns the plain data and a map from a path such as
``("courses", 0, "gpu", "fraction")`` to its 1-based line, so validation errors
can point at the exact place an instructor has to edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

LineMap = dict[tuple[Any, ...], int]


class YAMLSourceError(ValueError):
    """A file that is not valid YAML, or not shaped like a catalog at all."""

    def __init__(self, path: Path, line: int | None, message: str, field: str = ""):
        self.path = path
        self.line = line
        self.message = message
        self.field = field
        """Where in the data, such as ``courses[0].title``; empty for whole-file problems."""
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")


def load_with_lines(path: Path) -> tuple[Any, LineMap]:
    """Parse ``path`` and return ``(data, lines)``; raises :class:`YAMLSourceError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise YAMLSourceError(path, None, "is not UTF-8 text; save it as UTF-8") from None
    except OSError as error:
        raise YAMLSourceError(path, None, f"cannot be read: {error.strerror}") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: LineMap = {}
        data = _build(loader, node, (), lines, path) if node is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        problem = error.problem or error.context or "cannot be parsed"
        raise YAMLSourceError(
            path, line, f"is not valid YAML ({problem}); check indentation and quoting there"
        ) from None
    except yaml.YAMLError as error:
        raise YAMLSourceError(path, None, f"is not valid YAML ({error})") from None
    finally:
        loader.dispose()
    return data, lines


def field_name(loc: tuple) -> str:
    """``("courses", 0, "gpu")`` as ``courses[0].gpu``, the way errors name a field."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _build(
    loader: yaml.SafeLoader, node: yaml.Node, path: tuple, lines: LineMap, source: Path
) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise YAMLSourceError(
                    source, key_node.start_mark.line + 1, "has a key that is not a plain name"
                )
            if key in result:
                raise YAMLSourceError(
                    source,
                    key_node.start_mark.line + 1,
                    f"repeats the key {key!r} (first at line {lines[path + (key,)]}); "
                    "each key may appear once in a block, so merge or remove one of them",
                    field_name(path + (key,)),
                )
            lines[path + (key,)] = key_node.start_mark.line + 1
            result[key] = _build(loader, value_node, path + (key,), lines, source)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            lines[path + (index,)] = item.start_mark.line + 1
            items.append(_build(loader, item, path + (index,), lines, source))
        return items
    try:
        return loader.construct_object(node, deep=True)
    except ValueError:
        # A scalar YAML resolves but cannot build, such as the date 2024-13-01: keep the
        # text, so validation reports it at its field with what is expected.
        return node.value


def line_for(lines: LineMap, loc: tuple) -> int | None:
    """The line of ``loc``, or of its closest ancestor that has one."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())
