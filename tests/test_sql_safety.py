"""No user string reaches SQL unparameterized (SPEC §2): a static check of the code.

SQL lives in the package ``core/store/``; every other module must not execute SQL at all. In the
store, an f-string or ``%``/``.format`` SQL text may only interpolate identifiers the code owns
(table and column names from module constants, ``?`` placeholder lists), never a function
argument.
"""

from __future__ import annotations

import ast
import re

from conftest import ROOT

_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER)\b", re.I)
#: Names an f-string SQL in the store may interpolate: identifiers and placeholder lists the
#: code builds itself.
#: Adding a name here means: reviewed, its value is built by the code (never user text).
_ALLOWED = {
    "cols",
    "verb",
    "table",
    "view",
    "placeholders",
    "RUN_COLUMNS",
    "columns",
    "c",
    "col",
    "name",
    "k",
    "order",
    "sets",
    "only",
    # constant SQL fragments of core/store/runs.py (module-level string literals), and the
    # progress update's two pieces picked from them (values as placeholders)
    "_COUNTS",
    "counts",
    "source",
    "_FINAL_STATUS",
    # core/store/analysis.py: the gold-count column and join, one of two literals
    # picked by the store's schema version
    "n_gold",
    "gold",
    # module-level SQL fragments (string literals of the store's own modules):
    # core/store/schema.py, datasets.py (the content fingerprint), reparse_rows.py
    "_FINGERPRINT_OF",
    "DATASET_FINGERPRINT",
    "_DIGITS",
    "_CLEAN",
    # core/store/records.py: the response cache's column names, joined once
    "_CACHE_COLUMN_LIST",
    # core/store/merge.py (_same_content): a table of the schema qualified by an alias the
    # merge made ("merge_in_0"), and the key / column lists of the schema's own constants
    "table_a",
    "table_b",
    "key_match",
    "cols_a",
    "cols_b",
    # core/store/cell_rows.py: instance cells checked by _cells (GROUP_CELLS) in a window's
    # ORDER BY (_order(keys)) and GROUP BY (group); score columns checked by _score
    # (SCORE_COLUMNS) split into the counted (few) and the summed ones, and the aggregate
    # lists (aggs), the GROUPING SETS marker (marker) and the variant count (varied, a
    # literal) made of them
    "_order",
    "keys",
    "group",
    "few",
    "aggs",
    "marker",
    "varied",
    # core/store/cell_rows.py: the analysis frame's FROM clause (a module literal) and the
    # set-text tests of the error columns (a module literal formatted with a column name)
    "_ROWS",
    "error",
    "perr",
    # core/store/cell_rows.py: each score column's NaN-free value (schema constants)
    "values",
}
#: The store package, the one home of SQL.
_STORE = ROOT / "core" / "store"


def _sources():
    for base in ("core", "screens"):
        for path in sorted((ROOT / base).rglob("*.py")):
            yield path, path.read_text()
    app = ROOT / "app.py"
    if app.exists():
        yield app, app.read_text()


def test_only_the_store_executes_sql():
    offenders = []
    for path, text in _sources():
        if path.parent == _STORE:
            continue
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("execute", "executemany", "sql", "query")
                and node.args
                and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
                and _SQL.search(ast.unparse(node.args[0]))
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"SQL outside core/store.py: {offenders}"


def test_store_fstring_sql_interpolates_only_owned_identifiers():
    bad = []
    files = sorted(_STORE.glob("*.py"))
    nodes = [(p, n) for p in files for n in ast.walk(ast.parse(p.read_text()))]
    # an error message ("pass --with-runs drop") is not SQL: f-strings inside `raise` are skipped
    messages = {id(s) for _, n in nodes if isinstance(n, ast.Raise) for s in ast.walk(n)}
    for path, node in nodes:
        if isinstance(node, ast.JoinedStr) and id(node) not in messages:
            literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if not _SQL.search(literal):
                continue
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    names = {n.id for n in ast.walk(v.value) if isinstance(n, ast.Name)}
                    if names - _ALLOWED - {"len", "join", "str"}:
                        bad.append(f"{path.name}:{node.lineno}: {ast.unparse(v.value)}")
    assert not bad, f"f-string SQL with non-identifier values: {bad}"
