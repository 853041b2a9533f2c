"""The product stays in modules with one job each (issue 26): no product file over 800
lines, no Python class over 500 (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 800
MAX_CLASS_LINES = 500


def product_files() -> list[Path]:
    python = [
        path
        for package in ("gpuspawner", "jupyter_to_job")
        for path in (ROOT / package).rglob("*.py")
    ]
    lab = [
        path
        for pattern in ("*.ts", "*.tsx")
        for path in (ROOT / "labextension" / "src").rglob(pattern)
        if "__tests__" not in path.parts
    ]
    return sorted(python + lab)


def test_the_product_is_where_this_test_looks() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in product_files()}
    assert "gpuspawner/spawners/kubernetes.py" in names
    assert "jupyter_to_job/executors/kubernetes.py" in names
    assert "labextension/src/index.ts" in names


def test_no_product_file_is_over_800_lines() -> None:
    too_long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in product_files()
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert too_long == {}, (
        f"Split these files by responsibility (at most {MAX_FILE_LINES} lines each): {too_long}"
    )


def test_no_class_is_over_500_lines() -> None:
    too_long = {}
    for path in product_files():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    too_long[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = lines
    assert too_long == {}, (
        f"Split these classes by responsibility (at most {MAX_CLASS_LINES} lines each): {too_long}"
    )
