"""The package's layout: subpackages by purpose, and no module that imports, directly or through others, a
module that imports it back (an import circle makes the order of first imports matter)."""
import ast
import pathlib

from conftest import REPO

PACKAGE = REPO / "hvd_dqn"


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: pathlib.Path, modules: set) -> set:
    """The hvd_dqn modules `path` imports anywhere in its body (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & modules


def import_graph() -> dict:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules) - {name} for name, path in paths.items()}


def circles(graph: dict) -> list:
    """Every import circle, each as the list of modules around it (depth-first search)."""
    found, state = [], {}

    def visit(module, trail):
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                found.append(trail[trail.index(imported):] + [imported])
            elif imported not in state:
                visit(imported, trail + [imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_subpackages_by_purpose_each_say_what_they_hold():
    subpackages = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))
    assert subpackages == ["agent", "logdir", "reference", "replay", "run", "tools"]
    for name in subpackages:
        assert ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())), \
            f"hvd_dqn/{name}/__init__.py says nothing of what it holds"


MAX_MODULE_LINES = 400  # a module longer than this holds more than one idea; split it by purpose


def test_no_module_is_longer_than_400_lines():
    lengths = {str(path.relative_to(REPO)): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {path: length for path, length in lengths.items() if length > MAX_MODULE_LINES} == {}
