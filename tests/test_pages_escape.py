"""Data is text everywhere (issue 35 item 8): every Streamlit text call in ``screens/`` gets a
constant or escaped text.

An AST scan of every page module: the text argument of each Streamlit call that renders
Markdown (``st.markdown``, ``caption``, ``title``, ``error``, ... and the labels of widgets,
expanders, tabs, popovers, metrics and page links, whose labels are Markdown too) must be a
constant, a call of the one escaper (``md_escape`` / ``md_code``), an f-string or ``+`` / ``join``
whose every variable part is escaped or a number formatted with a spec, or a name bound in the
same function to such a value. A line that passes text known to be safe for another reason
carries ``# text: <why>``. ``st.text`` / ``st.code`` / ``st.dataframe`` show their argument as
text and are not checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

PAGES = Path(__file__).resolve().parents[1] / "screens"

#: Calls whose first positional argument (or ``body`` / ``label``) is rendered as Markdown.
_TEXT_CALLS = {
    "markdown",
    "caption",
    "title",
    "header",
    "subheader",
    "error",
    "warning",
    "info",
    "success",
    "toast",
    "exception",
    "expander",
    "popover",
    "metric",
    "button",
    "checkbox",
    "toggle",
    "selectbox",
    "multiselect",
    "radio",
    "text_input",
    "number_input",
    "text_area",
    "slider",
    "select_slider",
    "download_button",
    "page_link",
    "form_submit_button",
    "status",
    "spinner",
    "progress",
    "link_button",
    "date_input",
    "file_uploader",
    "segmented_control",
    "pills",
}
#: Keyword arguments rendered as Markdown (tooltips and labels).
_TEXT_KWARGS = ("label", "body", "help", "text")
_ESCAPERS = {"md_escape", "md_code", "esc", "escape"}
#: Calls whose result is a number or a fixed text.
_SAFE_CALLS = {"len", "int", "float", "round", "sum", "min", "max", "abs", "bool", "tip", "_num"}
_MARK = "# text:"
#: Attributes whose text is written in code (a registered figure's title, a Param's help).
_CODE_ATTRS = {"title", "description", "reference", "help"}


def _safe(node: ast.AST, bound: dict[str, ast.AST], depth: int = 0) -> bool:
    """Whether ``node`` evaluates to a constant or escaped text."""
    if depth > 8:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.JoinedStr):
        return all(_safe(v, bound, depth + 1) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        if node.format_spec is not None and node.conversion == -1:
            return True  # a number with a format spec (``:,``, ``.3f``)
        return _safe(node.value, bound, depth + 1)
    if isinstance(node, ast.BinOp) and any(
        isinstance(side, ast.Constant) and isinstance(side.value, int | float)
        for side in (node.left, node.right)
    ):
        return True  # arithmetic: a number
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return node.value.id.isupper()  # a module constant's entry (HELP[...], DEF[...])
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        # a registered figure's / declared parameter's own text, or a module constant's
        return node.attr in _CODE_ATTRS or node.value.id.isupper()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _safe(node.left, bound, depth + 1) and _safe(node.right, bound, depth + 1)
    if isinstance(node, ast.IfExp):
        return _safe(node.body, bound, depth + 1) and _safe(node.orelse, bound, depth + 1)
    if isinstance(node, ast.BoolOp):
        return all(_safe(v, bound, depth + 1) for v in node.values)
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in _ESCAPERS or name in _SAFE_CALLS:
            return True
        if name == "join" and isinstance(f, ast.Attribute):  # "sep".join(parts)
            return _safe(f.value, bound, depth + 1) and all(
                _safe(a, bound, depth + 1) for a in node.args
            )
        if name in ("upper", "lower") and isinstance(f, ast.Attribute):
            return _safe(f.value, bound, depth + 1)
        return False
    if isinstance(node, ast.GeneratorExp | ast.ListComp):
        return _safe(node.elt, bound, depth + 1)
    if isinstance(node, ast.List | ast.Tuple):
        return all(_safe(e, bound, depth + 1) for e in node.elts)
    if isinstance(node, ast.Name):
        if node.id.isupper():
            return True  # a module constant (LENGTH_RULE)
        value = bound.get(node.id)
        return value is not None and _safe(value, {**bound, node.id: None}, depth + 1)
    return False


def _bindings(tree: ast.AST) -> dict[ast.AST, dict[str, ast.AST]]:
    """Per function (and the module): name -> the value it was last assigned (one binding)."""
    scopes: dict[ast.AST, dict[str, ast.AST]] = {}
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
        names: dict[str, ast.AST] = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                t = node.targets[0]
                if isinstance(t, ast.Name):
                    names[t.id] = node.value if t.id not in names else ast.Name("?")
            elif (
                isinstance(node, ast.For)
                and isinstance(node.target, ast.Name)
                and isinstance(node.iter, ast.Tuple | ast.List)
            ):
                names[node.target.id] = node.iter  # a loop over constants
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                prev = names.get(node.target.id)
                names[node.target.id] = ast.BinOp(prev or ast.Name("?"), ast.Add(), node.value)
        scopes[scope] = names
    return scopes


def _violations(path: Path) -> list[str]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    scopes = _bindings(tree)
    found = []

    def visit(node: ast.AST, bound: dict[str, ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = {**bound, **scopes[child]} if child in scopes else bound
            visit(child, inner)
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return
        if node.func.attr not in _TEXT_CALLS:
            return
        first = [] if node.func.attr == "progress" else node.args[:1]  # a fraction, then text
        args = first + [k.value for k in node.keywords if k.arg in _TEXT_KWARGS]
        # a metric's value and delta are drawn as plain text; its label and help as Markdown
        span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
        if any(_MARK in line for line in span):
            return
        for arg in args:
            if not _safe(arg, bound):
                found.append(
                    f"{path.name}:{node.lineno}: {node.func.attr}({ast.unparse(arg)[:70]})"
                )
                break

    visit(tree, scopes[tree])
    return found


def test_every_streamlit_text_in_pages_is_constant_or_escaped():
    found = [v for p in sorted(PAGES.rglob("*.py")) for v in _violations(p)]
    assert not found, "unescaped text reaches Streamlit:\n" + "\n".join(found)


def test_the_scan_finds_an_unescaped_run_name():
    """The scanner itself: a run name in a metric label, an expander title and an f-string
    is found; the escaped forms and constants pass."""
    src = (
        "import streamlit as st\n"
        "def f(run, n):\n"
        "    st.metric(run, 1)\n"
        "    with st.expander(f'Labels of {run}'):\n"
        "        pass\n"
        "    st.markdown('**' + run + '**')\n"
        "    st.metric(md_escape(run), f'{n:.3f}')\n"
        "    label = f'Run {md_escape(run)}'\n"
        "    st.caption(label, help='constant')\n"
    )
    path = Path(PAGES.parent / "tests" / "_scan_probe.py")
    path.write_text(src)
    try:
        found = _violations(path)
    finally:
        path.unlink()
    assert [f.split(": ", 1)[1].split("(")[0] for f in found] == ["metric", "expander", "markdown"]
