"""The tests are laid out like the package (issue 11, item 7).

Helpers that more than one test folder needs live in ``tests/support``; a test folder may
import its own helpers and ``tests.support``, never a ``test_*`` module (its tests would run
twice and its helpers hide in a file named for scenarios) and never another folder's modules.
The imports are read with ``ast``, so a comment or a string that merely mentions a module
does not count, while ``from . import test_x``, ``from ..k8s import helpers`` and
``pytest_plugins = [...]`` do.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SHARED_FOLDER = "support"


def module_name(path: Path, root: Path) -> str:
    """``tests/k8s/test_x.py`` -> ``tests.k8s.test_x``; a package's ``__init__`` is the package."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def python_files(root: Path) -> Iterator[Path]:
    """The test tree's Python files, without installed JavaScript packages or caches."""
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).parts
        if "node_modules" not in relative and "__pycache__" not in relative:
            yield path


def imported_modules(path: Path, name: str, modules: set[str]) -> Iterator[tuple[int, str]]:
    """(line, module) for each module of ``modules``' tree that ``path`` (module ``name``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                # ``from package import module`` imports that module; otherwise a name of source.
                submodule = f"{source}.{alias.name}"
                yield node.lineno, submodule if submodule in modules else source
        elif isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytest_plugins"
            for target in node.targets
        ):
            for element in ast.walk(node.value):
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    yield node.lineno, element.value


def folder_of(module: str) -> str:
    """The top-level test folder a module belongs to (``""`` for tests/conftest.py)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layout_violations(root: Path) -> list[str]:
    """Every import under ``root`` (a ``tests`` folder) that breaks the layout, as a sentence."""
    files = {path: module_name(path, root) for path in python_files(root)}
    modules = set(files.values())
    tests_package = root.name
    problems = []
    for path, name in files.items():
        for line, imported in imported_modules(path, name, modules):
            if imported != tests_package and not imported.startswith(tests_package + "."):
                continue
            where = f"{path.relative_to(root.parent)}:{line}"
            folder = folder_of(imported)
            if imported.rpartition(".")[2].startswith("test_"):
                problems.append(
                    f"{where} imports the test module {imported}; "
                    f"move what it needs to {tests_package}/{SHARED_FOLDER}."
                )
            elif folder not in (folder_of(name), SHARED_FOLDER) and imported != tests_package:
                problems.append(
                    f"{where} imports {imported} from the test folder "
                    f"{tests_package}/{folder}; move it to {tests_package}/{SHARED_FOLDER}."
                )
    return list(dict.fromkeys(problems))  # once per import, however many names it takes


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """A ``tests`` tree under ``root`` with the given files (and their packages)."""
    tests = root / "tests"
    for relative, text in files.items():
        path = tests / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for package in [path.parent, *path.parent.parents]:
            if package == tests.parent:
                break
            (package / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))
    return tests


def test_no_test_module_imports_a_test_module_or_another_folders_modules():
    # Given this checkout's tests; when their imports are read; then none breaks the layout
    assert layout_violations(TESTS) == []


def test_given_imports_of_test_modules_and_other_folders_then_each_is_named(tmp_path):
    # Given a tree where tests reach into test modules and other folders in every spelling
    tests = write_tree(
        tmp_path,
        {
            "k8s/test_spawner.py": "def make_spawner(): ...\ndef write_catalog(): ...\n",
            "k8s/manifests.py": "POD = {}\n",
            "k8s/test_manifests.py": "from .test_spawner import make_spawner, write_catalog\n",
            "k8s/test_more.py": "from . import test_spawner\n",
            "unit/test_a.py": "from tests.k8s.manifests import POD\n",
            "unit/test_b.py": "from ..k8s import manifests\n",
            "unit/test_c.py": "import tests.k8s.test_spawner\n",
            "support/cluster.py": "from tests.unit.test_a import POD\n",
            "conftest.py": 'pytest_plugins = ["tests.k8s.manifests"]\n',
        },
    )
    # When the layout is checked
    problems = layout_violations(tests)
    # Then each offending import is named with its file and line, and what to do
    assert problems == [
        "tests/conftest.py:1 imports tests.k8s.manifests from the test folder tests/k8s; "
        "move it to tests/support.",
        "tests/k8s/test_manifests.py:1 imports the test module tests.k8s.test_spawner; "
        "move what it needs to tests/support.",
        "tests/k8s/test_more.py:1 imports the test module tests.k8s.test_spawner; "
        "move what it needs to tests/support.",
        "tests/support/cluster.py:1 imports the test module tests.unit.test_a; "
        "move what it needs to tests/support.",
        "tests/unit/test_a.py:1 imports tests.k8s.manifests from the test folder tests/k8s; "
        "move it to tests/support.",
        "tests/unit/test_b.py:1 imports tests.k8s.manifests from the test folder tests/k8s; "
        "move it to tests/support.",
        "tests/unit/test_c.py:1 imports the test module tests.k8s.test_spawner; "
        "move what it needs to tests/support.",
    ]


def test_given_shared_helpers_and_a_folders_own_helpers_then_nothing_is_reported(tmp_path):
    # Given tests that import tests.support, their own folder's helpers and conftest
    tests = write_tree(
        tmp_path,
        {
            "support/__init__.py": "def until(check): ...\n",
            "support/cluster.py": "from . import until\nfrom .nodes import node\n",
            "support/nodes.py": "def node(): ...\n",
            "k8s/manifests.py": "POD = {}\n",
            "k8s/conftest.py": "from tests.support.cluster import node\n",
            "k8s/test_pods.py": (
                "from tests.support import until\n"
                "from tests.support.cluster import node\n"
                "from .conftest import node as again\n"
                "from .manifests import POD\n"
                "# from tests.unit.test_a import nothing: a comment is not an import\n"
            ),
            "unit/backends/scenarios.py": "A100 = 'A100'\n",
            "unit/backends/test_mig.py": "from tests.unit.backends.scenarios import A100\n",
            "conftest.py": 'pytest_plugins = ["tests.support.cluster"]\n',
        },
    )
    # When the layout is checked; then nothing breaks it
    assert layout_violations(tests) == []
