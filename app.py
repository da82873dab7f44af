"""Streamlit entry point: routes to the pages.

Run with ``streamlit run app.py`` or ``python -m core serve``.
"""

import streamlit as st

from pages.common import first_start

_PAGES = {
    "Diagnostics": [
        ("pages/overview.py", "Overview", ":material/home:", True),
        ("pages/conditions.py", "Conditions & ONCU", ":material/table_chart:", False),
        ("pages/length_position.py", "Length & position", ":material/grid_on:", False),
        ("pages/retrieval.py", "Retrieval", ":material/manage_search:", False),
        ("pages/fanin.py", "Fan-in", ":material/call_merge:", False),
        ("pages/interventions.py", "Interventions", ":material/science:", False),
        ("pages/attribution.py", "Attribution", ":material/hub:", False),
        ("pages/dolce.py", "DOLCE", ":material/scatter_plot:", False),
    ],
    "Inspect & run": [
        ("pages/failures.py", "Failure browser", ":material/rule:", False),
        ("pages/case_view.py", "Case view", ":material/search:", False),
        ("pages/runs.py", "Runs", ":material/play_circle:", False),
    ],
}

st.set_page_config(
    page_title="Evidence diagnostics", page_icon=":material/troubleshoot:", layout="wide"
)
first_start()
st.navigation(
    {
        section: [
            st.Page(path, title=title, icon=icon, default=default)
            for path, title, icon, default in pages
        ]
        for section, pages in _PAGES.items()
    }
).run()
