"""Imports go one way: cli -> api -> job -> stages -> llm/io -> errors, with no circles.

Every ``ragrade`` import in src/ragrade counts, at any depth: module level, inside functions,
and inside ``if TYPE_CHECKING:`` blocks (a type-only import still ties the two modules' designs
together, so a circle through one is still a circle). Two checks follow from that graph:

* no import circle between packages (``ragrade.<part>``), and none between modules but the ones
  listed in :data:`KNOWN_MODULE_CYCLES` (matched exactly, so the list can only shrink);
* every arrow between packages runs down the declared :data:`LAYERS` order.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "ragrade"

# Rank of each package or top-level module: an import may only reach a strictly lower rank.
LAYERS: dict[str, int] = {
    # leaf utilities
    "ragrade.errors": -1,  # the one exception tree, below every module (ragrade.storage builds on it)
    "ragrade._version": 0,
    "ragrade.redact": 0,
    "ragrade.interrupt": 0,
    "ragrade.storage": 0,  # one rule for a write that fails for lack of space or permission
    "ragrade.progress_phases": 0,  # named phases of long work (what a display shows while it runs)
    # shared services
    "ragrade.registry": 1,
    "ragrade.deps": 1,
    "ragrade.schemas": 1,
    "ragrade.config": 1,
    "ragrade.config_paths": 1,  # paths in config files (a ~user that does not exist is a ConfigError)
    "ragrade.progress": 1,
    "ragrade.io": 1,
    "ragrade.stats": 1,
    "ragrade.outcome": 1,  # the per-item result type between a backend and a stage's records
    "ragrade.provenance": 1,  # what a result depends on, and the one rule for reruns (resume, extend, refuse)
    "ragrade.runlock": 1,  # one process per run folder
    "ragrade.journal": 2,  # the durable per-item store every stage resumes from (writes rows with io)
    # model access: sentence embedders, then LLMs (the offline LLM embeds)
    "ragrade.embedding": 2,
    "ragrade.llm": 3,
    # stages, lowest first
    "ragrade.corpus": 4,
    "ragrade.retrieval": 5,
    "ragrade.exam": 6,
    "ragrade.irt": 7,
    "ragrade.run": 8,
    "ragrade.adaptive": 9,  # adaptive sweeps: above run (its executor, journal, scoring), below job
    "ragrade.robust": 9,
    "ragrade.judge": 10,
    "ragrade.qa": 11,
    "ragrade.report": 11,
    # orchestration, then the front ends
    "ragrade.job": 12,
    "ragrade.results": 12,  # the API's reader of finished runs (uses report)
    "ragrade.api": 13,  # the Python API: the verbs as functions over the stages
    "ragrade.cli": 14,  # the command line: flags -> the API's settings -> an API call -> printing
    "ragrade": 15,
    "ragrade.__main__": 16,
}


# Module circles still open inside one package, each with the reason it stays (none now; the list
# can only shrink, and a new circle fails test_no_module_import_circles):
KNOWN_MODULE_CYCLES: list[list[str]] = []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    # ``from pkg import sub`` names the submodule where one exists
    return [f"{prefix}.{alias.name}" for alias in node.names] + [prefix]


@functools.cache
def module_graph() -> dict[str, set[str]]:
    """Module -> the ragrade modules it imports (anywhere in its code)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets = _imported(node, name, is_pkg)
            if isinstance(node, ast.ImportFrom):
                named = [t for t in targets[:-1] if t in modules]
                targets = named if len(named) == len(targets) - 1 else [*named, targets[-1]]
            for target in targets:
                if target == "ragrade" or target.startswith("ragrade."):
                    found = _resolve(target, modules)
                    if found and found != name:
                        graph[name].add(found)
    return graph


def package_of(module: str) -> str:
    """``ragrade.run.spec`` -> ``ragrade.run``; top-level modules stand for themselves."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for src, targets in graph.items():
        out[package_of(src)]
        for dst in targets:
            if package_of(src) != package_of(dst):
                out[package_of(src)].add(package_of(dst))
    return dict(out)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a package into one of the same or a higher layer."""
    bad = []
    for src, targets in sorted(graph.items()):
        for dst in sorted(targets):
            a, b = package_of(src), package_of(dst)
            if a != b and LAYERS[b] >= LAYERS[a]:
                bad.append(f"{src} -> {dst}")
    return bad


def test_cycle_finder_and_graph_reader_work() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    real = module_graph()
    # a function-level import and a TYPE_CHECKING import are both seen
    assert "ragrade.api" in real["ragrade"]
    assert "ragrade.errors" in real["ragrade.cli.main"]


def test_every_package_has_a_layer() -> None:
    packages = {package_of(m) for m in module_graph()}
    assert packages <= set(LAYERS), sorted(packages - set(LAYERS))


def test_no_module_import_circles() -> None:
    """No circle but the known ones below, which must match exactly (so the list only shrinks)."""
    assert sorted(cycles(module_graph())) == sorted(KNOWN_MODULE_CYCLES)


def test_no_package_import_circles() -> None:
    assert cycles(package_graph(module_graph())) == []


def test_no_import_runs_up_the_layers() -> None:
    assert upward_arrows(module_graph()) == []
