"""The package's import graph: acyclic, and the experiment tooling (Hydra, OmegaConf, W&B) kept at its edge.

The graph is read from the source with ``ast``, nothing is imported: one node per module of ``posixlab/``, an edge
``a -> b`` when ``a`` imports ``b``. Every import statement counts, wherever it is: at module level, inside a function
(a lazy import is still a dependency, it only moves the failure to call time), under ``if TYPE_CHECKING:`` or in a
``try``. ``import a.b`` and ``from a.b import c`` give an edge to ``a.b``, or to ``a.b.c`` when that is a submodule;
relative imports are resolved. Importing ``a.b`` also runs ``a/__init__.py``, but that implicit edge to the parent
package is not added: a package whose ``__init__`` re-exports its submodules would otherwise always be a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "posixlab"
ROOT = Path(__file__).resolve().parent.parent
# the only modules that may import the experiment tooling: the command line, the run tracker and the sweep status
# (``posixlab status`` reads Hydra's sweep folders; its callback runs in Hydra's jobs)
TOOLING = ("hydra", "omegaconf", "wandb")
TOOLING_ALLOWED = {"posixlab.cli", "posixlab.tracking", "posixlab.status"}


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name (a package is its ``__init__``; where both
    ``x.py`` and ``x/__init__.py`` exist, Python imports the package, and so does this)."""
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        elif ".".join(parts) in files:
            continue
        files[".".join(parts)] = path
    return files


def imported_names(module: str, path: Path) -> list[tuple[str, list[str]]]:
    """Each import statement of ``module``, anywhere in the file: (absolute module, names taken from it).

    ``import a.b`` is ``("a.b", [])``; ``from .x import y`` in ``p.q`` is ``("p.x", ["y"])``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.append((target, [alias.name for alias in node.names]))
    return found


def resolve(name: str, modules) -> str | None:
    """The module of the package that ``name`` is, or the nearest enclosing one (None: outside the package)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (no self-edges, no implicit parent-package edges)."""
    files = module_files(root, package)
    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        for target, names in imported_names(module, path):
            if names:  # from target import a, b: a submodule each where one exists, else target itself
                deps = [f"{target}.{n}" if f"{target}.{n}" in files else resolve(target, files) for n in names]
            else:
                deps = [resolve(target, files)]
            graph[module].update(d for d in deps if d is not None and d != module)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per knot of ``graph`` (a strongly connected component of more than one module, or a module that
    imports itself): the modules in import order, the first repeated at the end (``[a, b, a]``: a imports b imports
    a). Empty when the graph is acyclic."""
    cycles = []
    for component in strongly_connected(graph):
        members = set(component)
        start = component[0]
        if len(component) == 1 and start not in graph.get(start, ()):
            continue
        # the shortest way back to start, by breadth-first search inside the component
        previous: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in previous:
            reached = []
            for node in frontier:
                for child in sorted(graph.get(node, ())):
                    if child in members and child not in previous:
                        previous[child] = node
                        reached.append(child)
            frontier = reached
        path = [start]
        while path[-1] != start or len(path) == 1:
            path.append(previous[path[-1]])
        cycles.append(path[::-1])
    return cycles


def describe(cycles: list[list[str]]) -> str:
    return "\n".join("  " + " -> ".join(cycle) for cycle in cycles)


def test_find_cycles_reports_a_cycle():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a", "p.d"}, "p.d": set(), "p.e": {"p.e"}, "p.f": {"p.d"}}
    assert find_cycles(graph) == [["p.a", "p.b", "p.c", "p.a"], ["p.e", "p.e"]]
    assert find_cycles({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": set(), "p.d": {"p.a", "p.c"}}) == []


def test_import_graph_reads_imports(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.sub import thing\n")
    (package / "sub" / "__init__.py").write_text("from .leaf import thing\nfrom . import other\n")
    (package / "sub" / "leaf.py").write_text("import os\ndef f():\n    from ..top import x\nthing = 1\n")
    (package / "sub" / "other.py").write_text("import pkg.sub.leaf\nfrom pkg import top\n")
    (package / "top.py").write_text("x = 1\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": {"pkg.sub"}, "pkg.sub": {"pkg.sub.leaf", "pkg.sub.other"}, "pkg.sub.leaf": {"pkg.top"},
                     "pkg.sub.other": {"pkg.sub.leaf", "pkg.top"}, "pkg.top": set()}
    (package / "top.py").write_text("from pkg.sub.other import y\n")
    assert find_cycles(import_graph(tmp_path, "pkg")) == [["pkg.sub.leaf", "pkg.top", "pkg.sub.other",
                                                           "pkg.sub.leaf"]]


def test_import_graph_is_acyclic():
    graph = import_graph()
    assert "posixlab.runner" in graph and graph["posixlab.runner"], "the graph reader found no imports"
    cycles = find_cycles(graph)
    assert not cycles, f"import cycles in {PACKAGE} (a -> b: a imports b):\n{describe(cycles)}"


def test_experiment_tooling_stays_at_the_edge():
    """Only the command line, the run tracker and the sweep status import Hydra, OmegaConf or W&B; the library runs
    without them."""
    offenders = []
    for module, path in module_files().items():
        if module in TOOLING_ALLOWED:
            continue
        for target, _ in imported_names(module, path):
            if target.split(".")[0] in TOOLING:
                offenders.append(f"{path.relative_to(ROOT)} imports {target}")
    assert not offenders, "\n".join(offenders)
