"""Streamlit entry point: routes to the pages.

Run with ``streamlit run app.py`` or ``python -m core serve``.
"""

import streamlit as st

from screens.parts.common import first_start

_PAGES = {
    "Diagnostics": [
        ("screens/overview.py", "Overview", ":material/home:", True),
        ("screens/conditions.py", "Conditions & ONCU", ":material/table_chart:", False),
        ("screens/length_position.py", "Length & position", ":material/grid_on:", False),
        ("screens/retrieval.py", "Retrieval", ":material/manage_search:", False),
        ("screens/fanin.py", "Fan-in", ":material/call_merge:", False),
        ("screens/interventions.py", "Interventions", ":material/science:", False),
        ("screens/attribution.py", "Attribution", ":material/hub:", False),
        ("screens/dolce.py", "DOLCE", ":material/scatter_plot:", False),
    ],
    "Inspect & run": [
        ("screens/failures.py", "Failure browser", ":material/rule:", False),
        ("screens/case_view.py", "Case view", ":material/search:", False),
        ("screens/runs.py", "Runs", ":material/play_circle:", False),
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
