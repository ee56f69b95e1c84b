"""The SDK's modules import one another one way only, as the Rust crates'
modules do (`tools/layers`): every import counts, those under
`TYPE_CHECKING` and inside functions too."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "sandwit_plugin"


def imports_of(path: Path) -> set[str]:
    """The package's modules that `path` imports, by module name."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:  # `from . import x`
                names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sandwit_plugin."):
            names.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sandwit_plugin."):
                    names.add(alias.name.split(".")[1])
    return names


def graph(package: Path) -> dict[str, set[str]]:
    modules = {path.stem: path for path in package.glob("*.py") if path.stem != "__init__"}
    return {name: imports_of(path) & modules.keys() - {name} for name, path in modules.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle among `edges`' modules, as the modules around it, if any."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return None
        for other in sorted(edges[name]):
            found = visit(other, path + [name])
            if found:
                return found
        done.add(name)
        return None

    for name in sorted(edges):
        found = visit(name, [])
        if found:
            return found
    return None


def test_the_sdks_modules_have_no_cycle():
    edges = graph(PACKAGE)
    assert "_http" in edges and "_host" in edges["_http"], edges  # the graph is read
    assert cycle(edges) is None, " -> ".join(cycle(edges) or [])


def test_a_cycle_is_found(tmp_path):
    (tmp_path / "_a.py").write_text("from ._b import x\n")
    (tmp_path / "_b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import y\n"
    )
    (tmp_path / "_c.py").write_text("from . import _a\n")
    assert cycle(graph(tmp_path)) == ["_a", "_b", "_a"]
