"""The shape of the package: no import circles, packages layered one way, no technique in the generic loop.

Every module under ascent/ is parsed with `ast` (nothing is imported) and every `import ascent...` /
`from ascent... import ...` is collected, wherever it stands: module level, inside functions and methods,
under `if TYPE_CHECKING:` or `try:`. A lazy import inside a function still ties the two modules together, so it
counts. Relative imports are resolved against the importing module. `from ascent.x import y` is an edge to the
module ascent.x.y when y is a submodule, otherwise to ascent.x (its `__init__` when ascent.x is a package);
`import ascent.x.y` is an edge to ascent.x.y. The parent packages a dotted import also initialises are not
counted as edges: a package's `__init__` re-exporting its own submodules would otherwise always form a circle.

Two graphs are checked for circles: modules, and packages (`ascent.<subpackage>` for every module of a
subpackage, nested ones included; a top-level module such as ascent/cli.py is its own node). One exception:
ascent.config.schema is its own package node, a leaf of plain dataclasses below every registry, while the rest of
ascent.config (the loader, which resolves piece specs against the registries) sits above the pieces.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ascent"

# Lowest first: a package may import only packages that come before it. Names not (yet) in the tree are ignored.
LAYERS = [
    "ascent.typed",
    "ascent.registry",
    "ascent.papers",
    "ascent.config.schema",
    "ascent.algorithms",
    "ascent.kernels",
    "ascent.logging",
    "ascent.policy",
    "ascent.data",
    "ascent.rollout",
    "ascent.envs",
    "ascent.rewards",
    "ascent.agents",
    "ascent.tasks",
    "ascent.classic",
    "ascent.co",
    "ascent.incontext",
    "ascent.offline",
    "ascent.generative",
    "ascent.applications",
    "ascent.config",
    "ascent.trainer",
    "ascent.runtime",
    "ascent.app",
    "ascent.cli",
]
OWN_NODES = {"ascent.config.schema"}  # modules that are a package node of their own (see the module docstring)

# Technique names that must not appear in the generic loop (identifiers and strings; comments are not scanned).
# Identifiers are split into words at "_" and at camelCase humps, so a_star_values, AStarState, use_critic,
# self._v_star, "dapo" and DistilCache all match, while words that merely contain one (e.g. "staccato") do not.
# "teacher" is not one: the warm start imitates the task's teacher, and teacher forcing is generic.
TECHNIQUE_WORDS = re.compile(
    r"a star|v star|astar|vstar|critics?|gae|dapo|dynamic sampling|distil\w*"
    r"|taco|rebel|agro"
)


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (resolved to a file in the tree where possible)
    path: str  # importing file, relative to the repository root
    line: int
    resolved: bool  # False when no module of the imported name exists under ascent/ (target: its longest prefix)
    name: str = ""  # the imported name, made absolute

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def module_files() -> dict[str, Path]:
    """Module name -> file, for every .py file under ascent/ (a package is named by its __init__.py)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    if not node.level:
        return node.module
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _resolve(name: str, modules: dict[str, Path]) -> tuple[str, bool]:
    """The longest prefix of a dotted name that is a module in the tree; (name, False) when there is none."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in modules:
            return prefix, end == len(parts)
    return name, False


def imports_in(module: str, source: str, rel: str, is_package: bool, modules) -> list[Import]:
    """Every import of an ascent module anywhere in one module's source."""
    found = []
    for node in ast.walk(ast.parse(source, filename=rel)):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            if base is None:
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.append(submodule if submodule in modules else base)
        for target in targets:
            if target == "ascent" or target.startswith("ascent."):
                resolved, exact = _resolve(target, modules)
                found.append(Import(module, resolved, rel, node.lineno, exact, target))
    return found


def collect_imports() -> list[Import]:
    """Every import of an ascent module anywhere in every module of ascent/."""
    modules = module_files()
    found = []
    for module, path in modules.items():
        found += imports_in(module, path.read_text(), str(path.relative_to(ROOT)), path.name == "__init__.py", modules)
    return sorted(set(found), key=lambda i: (i.source, i.line, i.target))


def package_of(module: str) -> str:
    if module in OWN_NODES:
        return module
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else module


def graph(imports: list[Import], node=lambda m: m) -> dict[str, dict[str, list[Import]]]:
    """source node -> target node -> the imports that make the edge (self edges dropped)."""
    edges: dict[str, dict[str, list[Import]]] = {}
    for imp in imports:
        a, b = node(imp.source), node(imp.target)
        if a != b:
            edges.setdefault(a, {}).setdefault(b, []).append(imp)
    return edges


def strongly_connected(edges: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components with more than one node, each sorted, smallest first."""
    nodes = sorted(set(edges) | {b for out in edges.values() for b in out})
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def _shortest_path(edges, start: str, goal: str, within: set[str]) -> list[str]:
    previous, queue = {start: None}, deque([start])
    while queue:
        v = queue.popleft()
        if v == goal:
            break
        for w in sorted(edges.get(v, {})):
            if w in within and w not in previous:
                previous[w] = v
                queue.append(w)
    path, v = [], goal
    while v is not None:
        path.append(v)
        v = previous[v]
    return path[::-1]


def cycles(edges: dict[str, dict[str, list[Import]]], limit: int = 25) -> list[list[str]]:
    """Shortest circles that together use every edge inside each strongly connected component (at most `limit`
    per component): breaking one edge of each listed circle is necessary to remove them all."""
    found = []
    for component in strongly_connected(edges):
        members, covered, per_component = set(component), set(), 0
        for a in component:
            for b in sorted(edges.get(a, {})):
                if b not in members or (a, b) in covered or per_component >= limit:
                    continue
                circle = [a] + _shortest_path(edges, b, a, members)
                covered |= set(zip(circle, circle[1:]))
                found.append(circle)
                per_component += 1
    return found


def describe(circle: list[str], edges) -> str:
    lines = [f"  {circle[0]}"]
    for a, b in zip(circle, circle[1:]):
        sites = ", ".join(imp.where() for imp in edges[a][b])
        lines.append(f"    -> {b}    ({sites})")
    return "\n".join(lines)


def describe_all(circles: list[list[str]], edges, shown: int = 12) -> str:
    """The shortest circles first (the most direct ones to break), at most `shown` of them."""
    ordered = sorted(circles, key=len)
    text = "\n\n".join(describe(c, edges) for c in ordered[:shown])
    return text + (f"\n\n  ... and {len(ordered) - shown} longer circle(s)" if len(ordered) > shown else "")


# ------------------------------------------------------------------------------------------- the helpers themselves


def test_cycle_finder_on_a_known_graph():
    def imp(a, b):
        return Import(a, b, a, 1, True)

    edges = graph(
        [
            imp("a", "b"),
            imp("b", "c"),
            imp("c", "a"),
            imp("c", "d"),
            imp("d", "e"),
            imp("e", "d"),
            imp("f", "a"),
            imp("b", "a"),
        ]
    )
    assert strongly_connected(edges) == [["a", "b", "c"], ["d", "e"]]
    assert cycles(edges) == [["a", "b", "a"], ["b", "c", "a", "b"], ["d", "e", "d"]]
    assert cycles(graph([imp("a", "b"), imp("b", "c"), imp("a", "c")])) == []


def test_collector_sees_every_kind_of_import():
    modules = {m: Path() for m in ["ascent", "ascent.a", "ascent.a.b", "ascent.a.c", "ascent.d", "ascent.d.e"]}
    source = (
        "import os\nfrom . import b\nfrom .c import f, g\nfrom .. import d\n"
        "def lazy():\n    from ascent.d import e, h\n    import ascent.d.e.inner\n"
        "if TYPE_CHECKING:\n    from ascent.gone import x\n"
        "class K:\n    def m(self):\n        try:\n            from ..d.e import z\n"
        "        except ImportError:\n            pass\n"
    )
    found = imports_in("ascent.a.c", source, "x.py", False, modules)
    got = [(i.name, i.line, i.resolved) for i in found]
    assert sorted(got) == sorted(
        [
            ("ascent.a.b", 2, True),
            ("ascent.a.c", 3, True),
            ("ascent.a.c", 3, True),
            ("ascent.d", 4, True),
            ("ascent.d.e", 6, True),
            ("ascent.d", 6, True),
            ("ascent.d.e.inner", 7, False),
            ("ascent.gone", 9, False),
            ("ascent.d.e", 13, True),
        ]
    )
    assert {i.name: i.target for i in found if not i.resolved} == {
        "ascent.d.e.inner": "ascent.d.e",
        "ascent.gone": "ascent",
    }
    # in a package's __init__, "." is the package itself
    got = [i.target for i in imports_in("ascent.a", "from . import b\nfrom .c import f", "x.py", True, modules)]
    assert got == ["ascent.a.b", "ascent.a.c"]
    assert len(collect_imports()) > 100, "the parser found almost no ascent imports in the tree"


def test_every_ascent_import_names_a_module_in_the_tree():
    stale = [
        f"{imp.where()}: {imp.source} imports {imp.name}, which is not a module under ascent/"
        for imp in collect_imports()
        if not imp.resolved
    ]
    assert not stale, "imports of modules that do not exist (moved or renamed?):\n" + "\n".join(stale)


# ------------------------------------------------------------------------------------------- circles


def test_no_import_circle_between_modules():
    edges = graph(collect_imports())
    found = cycles(edges)
    assert not found, (
        f"{len(found)} import circle(s) between modules (imports inside functions count too):\n\n"
        + describe_all(found, edges)
    )


def test_no_import_circle_between_packages():
    edges = graph(collect_imports(), package_of)
    found = cycles(edges)
    assert not found, (
        f"{len(found)} import circle(s) between packages (ascent.config.schema is its own node):\n\n"
        + describe_all(found, edges)
    )


def test_config_schema_is_a_leaf():
    modules = module_files()
    if "ascent.config.schema" not in modules:
        pytest.skip("ascent/config/schema.py does not exist (moved?)")
    bad = [
        f"{imp.where()}: imports {imp.target}"
        for imp in collect_imports()
        if imp.source == "ascent.config.schema" and imp.target != "ascent.typed"
    ]
    assert not bad, "ascent.config.schema may import nothing from ascent but ascent.typed:\n" + "\n".join(bad)


# ------------------------------------------------------------------------------------------- layering


def test_packages_import_only_layers_below_them():
    edges = graph(collect_imports(), package_of)
    nodes = sorted({package_of(m) for m in module_files()})
    rank = {name: i for i, name in enumerate(LAYERS)}
    unplaced = [n for n in nodes if n not in rank and n != "ascent"]
    root_imports = [f"{imp.where()}: {imp.target}" for out in edges.get("ascent", {}).values() for imp in out]
    upward = []
    for a in sorted(edges):
        for b, sites in sorted(edges[a].items()):
            if a in rank and b in rank and rank[b] > rank[a]:
                upward.append(
                    f"  {a} (layer {rank[a]}) imports {b} (layer {rank[b]}): " + ", ".join(imp.where() for imp in sites)
                )
    problems = []
    if upward:
        problems.append(
            "packages importing a package above them (order, lowest first: "
            + " < ".join(n for n in LAYERS if n in nodes)
            + "):\n"
            + "\n".join(upward)
        )
    if unplaced:
        problems.append(
            "packages not placed in LAYERS (add them in tests/test_architecture.py): " + ", ".join(unplaced)
        )
    if root_imports:
        problems.append("ascent/__init__.py must import nothing from ascent:\n  " + "\n  ".join(root_imports))
    assert not problems, "\n\n".join(problems)


# ------------------------------------------------------------------------------------------- the generic loop


def technique_names(path: Path) -> list[tuple[int, str]]:
    """(line, token) for every identifier or string in the file that names a technique."""
    kinds = {tokenize.NAME, tokenize.STRING} | {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    hits = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type not in kinds:
            continue
        for match in re.finditer(r"[A-Za-z0-9_]+", tok.string):
            run = match.group()
            words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", run).lower().replace("_", " ").split()
            spans = (" ".join(words[i:j]) for i in range(len(words)) for j in (i + 1, i + 2) if j <= len(words))
            if any(TECHNIQUE_WORDS.fullmatch(span) for span in spans):
                hits.append((tok.start[0] + tok.string.count("\n", 0, match.start()), run))
    return hits


def test_technique_name_finder():
    import tempfile

    text = (
        'from x import a_star_values, AStarState\nself._v_star = use_critic(gae_lambda)\nmode = "dapo"\n'
        'class DistilCache: distillation = Distiller\nTeacher = 1\nx = """one\ndynamic_sampling"""\n'
        "# critic in a comment is fine\nstaccato = tacos + gaelic + rebellion + agronomy + vstar_\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    hits = technique_names(Path(f.name))
    Path(f.name).unlink()
    assert hits == [
        (1, "a_star_values"),
        (1, "AStarState"),
        (2, "_v_star"),
        (2, "use_critic"),
        (2, "gae_lambda"),
        (3, "dapo"),
        (4, "DistilCache"),
        (4, "distillation"),
        (4, "Distiller"),
        (7, "dynamic_sampling"),
        (9, "vstar_"),
    ]


def test_no_technique_names_in_trainer_or_runtime():
    found = []
    for folder in ("trainer", "runtime"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            found += [f"  {path.relative_to(ROOT)}:{line}: {name}" for line, name in technique_names(path)]
    assert not found, (
        f"{len(found)} technique name(s) in the generic loop (ascent/trainer, ascent/runtime); "
        "move them into the piece that owns them:\n" + "\n".join(found)
    )
