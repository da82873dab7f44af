"""Evidence-utilization diagnostics: the library behind the dashboard and ``python -m core``."""
