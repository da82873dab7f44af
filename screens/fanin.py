"""Fan-in: AC vs fan-in degradation curves, ER-AC / EP-AC scatter, degradation table (SPEC §9)."""

import streamlit as st

from core.figures.fanin import POINTS, R_INCLUDE_FULL_CONTEXT, R_INCLUDE_ORACLE, SCORE_SOURCE
from core.views import resolve_selection
from core.views.judged import AUTHTRACE_RUBRICS, fanin_judged_tables, has_judge_runs
from screens.parts.common import HELP, cached_call, get_store, sidebar
from screens.parts.display import show_figure, show_instances, show_table, with_options
from screens.parts.judge_agreement_panel import show_human_agreement, show_judge_agreement
from screens.parts.markdown import md_escape
from screens.parts.widgets import param_widget

selection = sidebar("fanin")
st.title("Fan-in")
st.caption(
    "Fan-in = distinct source documents among an instance's gold evidence (single 1, low 2-3, "
    "high >= 4). Evidence pack = passages shown (retrieved, oracle) or cited (full context); "
    "ER = |pack ∩ gold| / |gold|, EP = |pack ∩ gold| / |pack|, AC = 100 x the score field. "
    "A failed call is not an answer: it is left out of n and counted in `missing`; an "
    "unparseable reply scores 0 and stays in n. CIs: 95% bootstrap over cell summaries; "
    "`ci_method` in the tables says per row whether it is exact in distribution (counts of "
    "each distinct value drawn) or a stratified approximation (more than 8 distinct values). "
    "Build a fan-in grid with `python -m core generate controlled --preset fanin-grid`.",
    help="AuthTrace (seed 003) §2-3 and §6; SPEC §9.",
)
no_pack_note = st.empty()  # filled below once the buckets table is known
# Judged scores (issue 20): only when an AuthTrace judge run judged the selection; the check
# reads the runs frame the sidebar already holds, so a store without judges pays nothing.
has_judges = has_judge_runs(
    cached_call("runs"), AUTHTRACE_RUBRICS, dataset=selection.dataset, targets=selection.runs
)
if has_judges:
    selection = with_options(
        selection,
        **{
            SCORE_SOURCE.name: param_widget(
                SCORE_SOURCE,
                "fanin.score_source",
                st,
                label="AC / ER / EP from",
            )
        },
    )
    if selection.options.get(SCORE_SOURCE.name) == "judged":
        st.caption(
            "Every figure and table below uses the judges' AC (0-3 claim rubric / 3 x "
            "100), ER and EP (segment judgments); a prediction without a judged AC is "
            "counted in `missing`."
        )
# The r settings sit above the scatter but are read first: every view of the page shares one
# selection, so the fan-in analysis is computed (and cached) once.
curves, scatter = st.container(), st.container()
c = scatter.columns(3)
selection = with_options(
    selection,
    **{
        POINTS.name: param_widget(POINTS, "fanin.points", c[0], label="Pearson r points"),
        R_INCLUDE_ORACLE.name: param_widget(
            R_INCLUDE_ORACLE, "fanin.r_include_oracle", c[1], label="Include the oracle in r"
        ),
        R_INCLUDE_FULL_CONTEXT.name: param_widget(
            R_INCLUDE_FULL_CONTEXT,
            "fanin.r_include_full_context",
            c[2],
            label="Include full context in r",
        ),
    },
)
with curves:
    cell = show_figure("fanin_degradation", selection)
    if cell:
        fan = st.selectbox(
            "Fan-in of the instances to list",
            [None, 1, 2, 3, 4, 5, 6],
            key="fanin.level",
            format_func=lambda f: "(all)" if f is None else str(f),
            help="The clicked curve gives run and condition; choose the fan-in point here.",
        )
        if fan is not None:
            cell = dict(cell) | {"fan_in": fan}
    show_instances(selection, cell, key="fanin.instances")
with scatter:
    show_figure("fanin_scatter", selection, drill=False)
show_table("fanin_degradation", selection)
buckets, _ = show_table("fanin_buckets", selection)
_NO_PACK = "no pack (ER/EP missing)"
if _NO_PACK in buckets.columns:  # never a 0 that is not a measurement (issue 36.1)
    gone = buckets[(buckets["bucket"] == "all") & (buckets[_NO_PACK] > 0)]
    no_pack_note.warning(
        "ER / EP not measured for "
        + md_escape(
            "; ".join(
                f"{r['run']} · {r['condition']}: {r[_NO_PACK]} of {r['n']}"
                for r in gone.to_dict("records")
            )
        )
        + " answered predictions: the store does not say which passages those calls showed "
        "(an imported release keeps no ids of its retrieved passages), so they have no "
        "evidence pack. They are left out of the ER / EP means and of Pearson r, and counted "
        "in the buckets table's column `no pack`. AC is measured as usual."
    )
show_table("fanin_pairs", selection)

# The judged values beside the proxies, with their correlation (issue 20 item 2).
if has_judges:
    try:
        judged = fanin_judged_tables(get_store(), selection)
    except ValueError as exc:
        st.warning(f"Judged scores: {md_escape(exc)}")
        judged = None
    if judged is not None:
        st.subheader("Judged scores (AuthTrace judges)", help=HELP["judged_fanin"])
        st.caption(
            f"Judges: {md_escape('; '.join(judged['judges']))}. "
            + md_escape(" ".join(judged["notes"]))
            + " Over every instance of the selected "
            "runs (metadata filters not applied), as `report fanin`."
        )
        baseline = any("lexical baseline" in j for j in judged["judges"])
        tag = " (lexical baseline)" if baseline else ""
        num = st.column_config.NumberColumn
        st.dataframe(
            judged["buckets"],
            key="fanin.judged",
            hide_index=True,
            column_config={
                "n": num("n", help="Answered predictions of the bucket (failed calls left out)."),
                "ac": num(
                    "AC proxy",
                    format="%.1f",
                    help="Proxy for AC: 100 x the score field (answer F1 by default).",
                ),
                "ac_judged": num(
                    f"AC judged{tag}",
                    format="%.1f",
                    help="score/3 x 100 of the 0-3 claim rubric (AuthTrace §3, App. K).",
                ),
                "er": num(
                    "ER id-overlap %",
                    format="%.1f",
                    help="Proxy for ER: passage-id overlap |pack ∩ gold ids| / |gold ids|.",
                ),
                "er_judged": num(
                    f"ER judged %{tag}",
                    format="%.1f",
                    help="Gold units covered by a pack segment / |E*| (App. K, eq. 4).",
                ),
                "ep": num(
                    "EP id-overlap %",
                    format="%.1f",
                    help="Proxy for EP: passage-id overlap |pack ∩ gold ids| / |pack|.",
                ),
                "ep_judged": num(
                    f"EP judged %{tag}",
                    format="%.1f",
                    help="Pack segments matching a gold unit / segments (App. K, eq. 5).",
                ),
                "judged_missing": num(
                    "judged missing",
                    help="Predictions whose AC or ER judgment "
                    "failed (the larger count), left out of the judged means.",
                ),
            },
        )
        st.dataframe(
            judged["correlation"],
            key="fanin.judged_corr",
            hide_index=True,
            column_config={
                "metric": st.column_config.TextColumn("proxy vs judged" + tag),
                "pearson": num("Pearson r", format="%.3f"),
                "pearson_p": num("p (Pearson)", format="%.3g"),
                "spearman": num("Spearman ρ", format="%.3f"),
                "spearman_p": num("p (Spearman)", format="%.3g"),
                "n": num(
                    "n",
                    help="Instances with both values; r is empty below 3 or for a constant column.",
                ),
            },
        )
    show_judge_agreement(
        AUTHTRACE_RUBRICS,
        dataset=selection.dataset,
        targets=selection.runs,
        key="fanin.judge_agreement",
    )
    # people's labels of the judged items against the judges (annotate --rubric ...)
    judged_runs = resolve_selection(get_store(), selection, cached_call("runs")).runs
    for rubric in AUTHTRACE_RUBRICS:
        show_human_agreement(get_store(), judged_runs, rubric, key="fanin")
