"""The package's layering (docs/ARCHITECTURE.md, "Layers"): the import graph of jaxenc/, read
with `ast` (every import, also those inside functions), has no cycle, every module belongs to
one of the declared layers, and a module imports only its own layer and the layers below it.
Around the library: nothing in jaxenc/ imports the benchmarks (bench/) or the reports
(reports/), the import graph of the whole repository has no cycle, and no module changes the
import path: every package imports as a package from the repository root."""

import ast
import graphlib
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "jaxenc"
# the top-level packages of the repository: the library, its commands and what is built on it
TOP_LEVEL = ("jaxenc", "train", "eval", "bench", "reports")
# the packages built on the library, which it never imports
ABOVE_THE_LIBRARY = ("bench", "reports")
# a statement that changes the import path
PATH_CHANGE = re.compile(r"\bsys\.path\s*(?:\.\s*(?:insert|append|extend)\s*\("
                         r"|\[[^]]*\]\s*=|\+?=(?!=))")

# Lowest first. "P.*" names package P and every module in it, a plain name one module; a module
# belongs to the layer of its most specific (longest) entry.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("jaxenc", "jaxenc.errors", "jaxenc.files", "jaxenc.cli", "jaxenc.export_format",
              "jaxenc.export_arrays", "jaxenc.export_checks", "jaxenc.standalone")),
    ("records", ("jaxenc.records", "jaxenc.text_io")),
    ("structures", ("jaxenc.structures.*",)),
    ("data", ("jaxenc.data.*",)),
    ("layers", ("jaxenc.layers.*",)),
    ("models", ("jaxenc.models.*",)),
    ("tasks", ("jaxenc.tasks.*",)),
    ("training", ("jaxenc.training.*", "jaxenc.configs")),
    ("encoding", ("jaxenc.encoding", "jaxenc.encode_batching", "jaxenc.exporting",
                  "jaxenc.loading", "jaxenc.prediction")),
    ("applications", ("jaxenc.evaluation.*", "jaxenc.showcase", "jaxenc.throughput", "jaxenc.viz")),
)
# Commands (what `python -m` or a console script runs) compose every layer: they may import any
# module, and no module imports them.
ENTRY_POINTS = ("jaxenc.__main__", "jaxenc.training.main")


def modules(roots: tuple[str, ...] = ("jaxenc",)) -> dict[str, Path]:
    """{dotted module name: file} of every module under the top-level folders `roots` (a
    package by its own name)."""
    found = {}
    for path in sorted(path for root in roots for path in (REPO / root).rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported module of `known`, line) of every import statement in `path`; `from P import
    name` counts as module P.name where that is a module, else as P."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                     for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # `import jaxenc.a.b` of a module, or an attribute
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name, node.lineno


def import_graph(roots: tuple[str, ...] = ("jaxenc",)) -> dict[str, dict[str, int]]:
    """{module: {imported module: first line}} of the modules under `roots`."""
    known = modules(roots)
    graph: dict[str, dict[str, int]] = {}
    for module, path in known.items():
        graph[module] = {}
        for target, line in imports(module, path, known):
            graph[module].setdefault(target, line)
    return graph


def layer_of(module: str) -> int | None:
    """The index in LAYERS of `module`'s layer, None when no entry names it."""
    matches = []
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            package = entry.removesuffix(".*")
            if module == package or (entry.endswith(".*") and module.startswith(package + ".")):
                matches.append((len(package), index))
    return max(matches)[1] if matches else None


def test_every_module_belongs_to_one_layer_or_is_an_entry_point():
    unplaced = [m for m in modules() if layer_of(m) is None and m not in ENTRY_POINTS]
    assert unplaced == [], "add them to LAYERS here and to docs/ARCHITECTURE.md"


def placed_graph() -> dict[int, dict[str, dict[str, int]]]:
    """The import graph without the entry points and unplaced modules (the first test names
    those), keyed by layer: {layer: {module: {target: line}}}."""
    by_layer: dict[int, dict[str, dict[str, int]]] = {i: {} for i in range(len(LAYERS))}
    for module, targets in import_graph().items():
        if module not in ENTRY_POINTS and layer_of(module) is not None:
            by_layer[layer_of(module)][module] = {
                target: line for target, line in targets.items()
                if target not in ENTRY_POINTS and layer_of(target) is not None}
    return by_layer


def test_modules_import_only_their_own_layer_and_those_below():
    names = [name for name, _ in LAYERS]
    upward = [f"{module} ({names[layer]}) imports {target} ({names[layer_of(target)]}) at "
              f"line {line}"
              for layer, graph in placed_graph().items() for module, targets in graph.items()
              for target, line in targets.items() if layer_of(target) > layer]
    assert upward == []


def test_no_module_imports_an_entry_point():
    assert [(module, target) for module, targets in import_graph().items()
            for target in targets if target in ENTRY_POINTS] == []


def test_the_import_graph_has_no_cycle():
    graphlib.TopologicalSorter(import_graph()).prepare()  # raises CycleError naming the cycle


def test_the_layers_have_no_cycle_between_them():
    between = {layer: {layer_of(target) for targets in graph.values() for target in targets}
               - {layer} for layer, graph in placed_graph().items()}
    graphlib.TopologicalSorter(between).prepare()


def test_architecture_doc_lists_the_layers_in_order():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\d+\. \*\*(\w+)\*\*", section, flags=re.MULTILINE)
    assert listed == [name for name, _ in LAYERS]
    for module in ENTRY_POINTS:
        assert f"`{module}`" in section


def test_the_library_imports_neither_the_benchmarks_nor_the_reports():
    above = [f"{module} imports {target} at line {line}"
             for module, targets in import_graph(TOP_LEVEL).items() if module.startswith("jaxenc")
             for target, line in targets.items() if target.split(".")[0] in ABOVE_THE_LIBRARY]
    assert above == []


def test_the_repository_import_graph_has_no_cycle():
    graph = import_graph(TOP_LEVEL)
    assert {module.split(".")[0] for module in graph} >= set(TOP_LEVEL)
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle


def test_no_module_changes_the_import_path():
    """A module that needs another imports it by its package (run with `python -m` from the
    repository root), so what it imports never depends on where its file lies."""
    tops = [top for top in sorted(REPO.iterdir()) if not top.name.startswith(".")]  # no .venv
    files = [path for top in tops for path in ([top] if top.is_file() else top.rglob("*"))
             if path.suffix == ".py"]
    changed = [f"{path.relative_to(REPO)}:{number}: {line.strip()}" for path in files
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if PATH_CHANGE.search(line)]
    assert changed == []
