"""Figures and tables by name: each pairs a view (store + selection -> data) with a plot.

The dashboard pages (``screens/parts/common.py``), ``python -m core export`` and the tests call
``get_figure(name).build(store, selection)`` / ``get_table(name).build(store, selection)``,
which run the registered view of :mod:`core.views` and hand what it returns to the
registered plot of :mod:`core.figures` with the figure's options. A figure's ``build`` returns
``(plotly Figure, DataFrame)`` (the figure and the data behind it, the CSV a user downloads),
a table's a DataFrame.

Options are declared once as :class:`core.params.Param` beside the plots
(``core/figures/<area>.py``). A plot receives, as keywords, the declared options named by its
keyword-only arguments (read from the selection by :func:`core.selection.option`); a view
reads its own (:data:`VIEW_OPTIONS`). :attr:`Spec.options` lists both, for CLI flags and
widgets.

To register a new figure: write its plot function in ``core/figures/<area>.py`` (data from a
view plus keyword options -> ``(Figure, DataFrame)``; options it takes must be declared Params
listed in :data:`OPTIONS`), then add ONE ``_figure(...)`` (or ``_table(...)``) call below with
the name, title, description, reference, the view that feeds it and the plot. A figure that
needs other data gets a new view function in ``core/views/`` and an entry in
:data:`VIEW_OPTIONS`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.attribution.metrics import BOOTSTRAP as ATTRIBUTION_BOOTSTRAP
from core.attribution.metrics import LDS_LOW
from core.figures import N_RESAMPLES, SCORE_FIELD
from core.figures import attribution as attribution_fig
from core.figures import cuer as cuer_fig
from core.figures import dolce as dolce_fig
from core.figures import fanin as fanin_fig
from core.figures import oncu as oncu_fig
from core.figures import retrieval as retrieval_fig
from core.params import Param
from core.selection import Selection, option
from core.store import Store
from core.views.attribution import attribution_result
from core.views.cuer import cuer_result
from core.views.dolce import dolce_result
from core.views.fanin import crux_result, fanin_result
from core.views.oncu import plain_predictions, plain_rows, scaling_result
from core.views.retrieval import retrieval_audit_frames

__all__ = [
    "OPTIONS",
    "VIEW_OPTIONS",
    "FigureSpec",
    "Spec",
    "TableSpec",
    "figure_names",
    "get_figure",
    "get_table",
    "table_names",
]

#: Every declared figure/table option, by name.
OPTIONS: dict[str, Param] = {
    p.name: p
    for p in (
        SCORE_FIELD,
        N_RESAMPLES,
        oncu_fig.CONDITIONS_OPTION,
        oncu_fig.CONTRASTS,
        oncu_fig.GROUP_KEY,
        oncu_fig.CI,
        oncu_fig.SCALING_DISTANCE,
        oncu_fig.P_TEST,
        oncu_fig.OLS_P_TEST,
        cuer_fig.EPS,
        cuer_fig.TAU,
        cuer_fig.SYNERGY_METRIC,
        cuer_fig.CORRECTNESS_AXIS,
        *dolce_fig.FIT_OPTIONS,
        dolce_fig.PROBLEM,
        fanin_fig.POINTS,
        fanin_fig.CRUX_RETRIEVERS,
        fanin_fig.CRUX_KS,
        fanin_fig.JUDGE,
        fanin_fig.R_INCLUDE_ORACLE,
        fanin_fig.R_INCLUDE_FULL_CONTEXT,
        fanin_fig.ETA,
        fanin_fig.CRUX_K_REQUIRED,
        fanin_fig.SCORE_SOURCE,
        retrieval_fig.RETRIEVERS,
        retrieval_fig.KS,
        retrieval_fig.CHUNK_SIZE,
        retrieval_fig.OVERLAP,
        retrieval_fig.MAX_INSTANCES,
        ATTRIBUTION_BOOTSTRAP,
        LDS_LOW,
    )
}
_R = retrieval_fig
#: The options each view reads from the selection.
# a table, one row per line: the formatter would put each item on a line of its own
VIEW_OPTIONS: dict[Callable[..., Any], tuple[Param, ...]] = {
    plain_predictions: (),
    plain_rows: (),
    scaling_result: (SCORE_FIELD, oncu_fig.GROUP_KEY, oncu_fig.CONDITIONS_OPTION,
                     oncu_fig.SCALING_DISTANCE, N_RESAMPLES, oncu_fig.P_TEST,
                     oncu_fig.OLS_P_TEST),
    cuer_result: (cuer_fig.EPS, cuer_fig.TAU, cuer_fig.SYNERGY_METRIC, cuer_fig.CORRECTNESS_AXIS,
                  N_RESAMPLES),
    dolce_result: dolce_fig.FIT_OPTIONS,
    fanin_result: (SCORE_FIELD, fanin_fig.POINTS, fanin_fig.R_INCLUDE_ORACLE,
                   fanin_fig.R_INCLUDE_FULL_CONTEXT, N_RESAMPLES, fanin_fig.SCORE_SOURCE),
    crux_result: (fanin_fig.CRUX_RETRIEVERS, fanin_fig.CRUX_KS, fanin_fig.CRUX_K_REQUIRED,
                  fanin_fig.ETA, _R.CHUNK_SIZE, _R.OVERLAP, N_RESAMPLES, fanin_fig.JUDGE),
    retrieval_audit_frames: (_R.RETRIEVERS, _R.KS, _R.CHUNK_SIZE, _R.OVERLAP, _R.MAX_INSTANCES),
    attribution_result: (ATTRIBUTION_BOOTSTRAP, LDS_LOW),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Spec:
    """A registered figure or table: what it is (name, title, source) and how it is computed.

    Attributes:
        kind: ``figure`` or ``table``.
        name: registry name (``export figure NAME``).
        title: human title.
        description: what it shows and how to read it (shown as the page tooltip).
        reference: the SPEC / paper section the numbers come from.
        view: ``(store, selection) -> data`` (a function of :mod:`core.views`).
        plot: ``(data, **options) -> (go.Figure, DataFrame)`` for a figure, ``-> DataFrame``
            for a table (a function of :mod:`core.figures`).
        plot_options: the options the plot takes as keywords.
    """

    kind: str
    name: str
    title: str
    description: str
    reference: str
    view: Callable[[Store, Selection], Any]
    plot: Callable[..., Any]
    plot_options: tuple[Param, ...] = ()

    @property
    def options(self) -> tuple[Param, ...]:
        """Every option the view and the plot read (each once)."""
        both = (*VIEW_OPTIONS.get(self.view, ()), *self.plot_options)
        return tuple({p.name: p for p in both}.values())

    def build(self, store: Store, selection: Selection) -> Any:
        """The view of ``selection`` drawn by the plot with the selection's options.

        Raises:
            ValueError: nothing to show for the selection, or a bad option value.
        """
        kwargs = {p.name: option(selection, p) for p in self.plot_options}
        return self.plot(self.view(store, selection), **kwargs)


#: The same record; the names say which registry a spec comes from.
FigureSpec = Spec
TableSpec = Spec

_FIGURES: dict[str, Spec] = {}
_TABLES: dict[str, Spec] = {}


def _plot_options(plot: Callable[..., Any]) -> tuple[Param, ...]:
    names = [
        p.name
        for p in inspect.signature(plot).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    unknown = [n for n in names if n not in OPTIONS]
    if unknown:
        raise ValueError(f"{plot.__name__} takes undeclared option(s) {unknown}")
    return tuple(OPTIONS[n] for n in names)


def _register(registry: dict[str, Spec], kind: str, name: str, **fields: Any) -> None:
    if name in registry:
        raise ValueError(f"{kind} {name!r} is registered twice")
    if fields["view"] not in VIEW_OPTIONS:
        raise ValueError(f"{kind} {name!r}: its view is not listed in VIEW_OPTIONS")
    registry[name] = Spec(kind, name, plot_options=_plot_options(fields["plot"]), **fields)


def _figure(name: str, **fields: Any) -> None:
    _register(_FIGURES, "figure", name, **fields)


def _table(name: str, **fields: Any) -> None:
    _register(_TABLES, "table", name, **fields)


def figure_names() -> list[str]:
    """Registered figure names, sorted."""
    return sorted(_FIGURES)


def table_names() -> list[str]:
    """Registered table names, sorted."""
    return sorted(_TABLES)


def get_figure(name: str) -> Spec:
    """The figure registered as ``name``; ValueError naming the allowed ones otherwise."""
    if name not in _FIGURES:
        raise ValueError(f"unknown figure {name!r}; choose one of: {', '.join(sorted(_FIGURES))}")
    return _FIGURES[name]


def get_table(name: str) -> Spec:
    """The table registered as ``name``; ValueError naming the allowed ones otherwise."""
    if name not in _TABLES:
        raise ValueError(f"unknown table {name!r}; choose one of: {', '.join(sorted(_TABLES))}")
    return _TABLES[name]


_DOLCE = "SPEC §8; seed dolce_lambda_k §3, App. A-C, Figure 1"

# ------------------------------------------------------------------------ oncu
_table(
    "condition_matrix",
    title="Four-condition matrix",
    description="Mean of every answer and evidence score per run and condition over all "
    "instances (parse errors count as 0), with 95% bootstrap CIs (5,000 resamples, seed 42). "
    "title_grounding_n counts the predictions with a gold title to ground against (passages "
    "without titles, e.g. imported results: missing, not 0).",
    reference="SPEC §6.1-6.3, §6.6; seed 000 Table 6",
    view=plain_rows,
    plot=oncu_fig.condition_matrix_table,
)
_figure(
    "condition_matrix",
    title="Answer and evidence scores by condition",
    description="Bars: mean score per condition (and run); whiskers: 95% bootstrap CI. Left: "
    "the selected answer score; right: evidence F1 (0 by construction for no evidence: no "
    "passages are shown).",
    reference="SPEC §6.1-6.3; seed 000 Table 6",
    view=plain_rows,
    plot=oncu_fig.condition_matrix_figure,
)
_table(
    "oncu_summary",
    title="ONCU by run and condition",
    description="Headline: unweighted mean of clipped ONCU over valid groups with a 95% "
    "bootstrap CI over groups; raw mean; denominator-weighted ONCU = sum(S_c - S_none) / "
    "sum(S_oracle - S_none); groups above oracle (raw > 1) and below baseline (raw < 0).",
    reference="SPEC §6.5; seed 000 §3.3, Tables 7, 9, 23",
    view=plain_rows,
    plot=oncu_fig.oncu_summary_table,
)
_table(
    "oncu_groups",
    title="ONCU group audit",
    description="Every metadata group with S_none, S_oracle, S_c, raw and clipped ONCU, "
    "whether it is valid and, when not, why (missing_no_evidence, missing_oracle, "
    "empty_oracle_evidence, oracle_not_above_no_evidence).",
    reference="SPEC §6.5; seed 000 §4.4",
    view=plain_rows,
    plot=oncu_fig.oncu_groups_table,
)
_figure(
    "oncu_audit",
    title="Raw vs clipped ONCU per group",
    description="Each point is one valid metadata group: x = raw ONCU, y = clipped ONCU. The "
    "shaded band is [0, 1]; points right of it recovered more than the oracle (above oracle), "
    "points left of it fell below the no-evidence baseline.",
    reference="SPEC §6.5, §10.2; seed 000 §4.4",
    view=plain_rows,
    plot=oncu_fig.oncu_audit_figure,
)
_table(
    "paired_contrasts",
    title="Paired contrasts",
    description="Mean paired difference aligned by instance with a paired bootstrap 95% CI, "
    "standardized effect (mean / sd of differences), two-sided normal-approximation p "
    "(erfc(|z| / sqrt 2), z = mean / (sd / sqrt n), as published; option p_test=bootstrap: "
    "the bootstrap p) and p_holm, Holm across every run's condition contrasts in the table; "
    "McNemar's exact p for binary scores. With several runs, each run against the first per "
    "condition (its own Holm family).",
    reference="SPEC §6.6; seed 000 §7.6, Table 29; issue 34",
    view=plain_predictions,
    plot=oncu_fig.contrasts_table,
)
_table(
    "failure_breakdown",
    title="Failure labels by condition",
    description="Share (%) of contextual predictions per failure label: localization (nothing "
    "cited), selection (wrong evidence), integration (missing part of a chain), conversion "
    "(all gold cited, answer wrong), success, parse.",
    reference="SPEC §6.4; seed 000 App. A.5, Table 28",
    view=plain_predictions,
    plot=oncu_fig.failure_table,
)
_figure(
    "failure_breakdown",
    title="Failure labels by condition",
    description="Stacked share (%) of failure labels per condition and run.",
    reference="SPEC §6.4; seed 000 App. A.5",
    view=plain_predictions,
    plot=oncu_fig.failure_figure,
)
_table(
    "calibration",
    title="Calibration by condition",
    description="Brier score and expected calibration error (10 equal-width bins) of the "
    "self-reported and log-prob confidences against correctness (score >= 0.5).",
    reference="SPEC §6.6",
    view=plain_predictions,
    plot=oncu_fig.calibration_table,
)
_figure(
    "calibration",
    title="Reliability diagram",
    description="Accuracy vs mean confidence per confidence bin, one line per condition; "
    "the diagonal is perfect calibration.",
    reference="SPEC §6.6",
    view=plain_predictions,
    plot=oncu_fig.calibration_figure,
)
_table(
    "length_position",
    title="ONCU by context length and evidence position",
    description="Mean clipped ONCU over the valid groups of each (length, position) cell.",
    reference="SPEC §6.7; seed 000 §8.11",
    view=plain_rows,
    plot=oncu_fig.length_position_table,
)
_table(
    "scaling_by_length",
    title="ONCU by context length (seed 000 Table 10 layout)",
    description="Mean clipped ONCU over the valid groups of each context length, one column "
    "per condition x length; note names lengths without a valid group.",
    reference="SPEC §6.7; seed 000 §8.11, Table 10",
    view=scaling_result,
    plot=oncu_fig.scaling_length_table,
)
_table(
    "scaling_contrasts",
    title="Paired scaling contrasts (seed 000 Table 29)",
    description="Paired over matched length x position cells (cell = mean clipped ONCU over "
    "its valid groups): 4K - 32K full context by position; pos_09 - each of pos_00..pos_07 "
    "at 32K; retrieved - full at 32K by position. Mean difference, 95% bootstrap CI over the "
    "cells (5,000 resamples, seed 42), effect = mean / sd of the differences, two-sided "
    "normal-approximation p (as published; option p_test=bootstrap), Holm-adjusted across "
    "every run's contrasts in the table (Table 29's family); note says what is missing.",
    reference="SPEC §6.6-6.7; seed 000 §8.11, App. A.9, Table 29",
    view=scaling_result,
    plot=oncu_fig.scaling_contrasts_table,
)
_table(
    "scaling_regression",
    title="Scaling OLS over length x position cells (seed 000 Table 30)",
    description="ONCU ~ log2 context length + position fraction + distance from the middle "
    "(each centered on its mean over the cells), statsmodels OLS per run and condition: "
    "coefficient, SE, normal-approximation p (as published; option ols_p_test=t: the t-test "
    "p), p_bh (Benjamini-Hochberg across every row of the table, as Table 30), R², cells "
    "used (n) and left out (no valid group, scattered).",
    reference="SPEC §6.6-6.7; seed 000 §8.11, App. A.9, Table 30",
    view=scaling_result,
    plot=oncu_fig.scaling_regression_table,
)
_figure(
    "oncu_heatmap",
    title="ONCU heatmap: context length x evidence position",
    description="Each cell: mean clipped ONCU over the valid groups at that context length and "
    "evidence position (decile buckets on the scaling grid); one panel per condition.",
    reference="SPEC §6.7; seed 000 §8.11",
    view=plain_rows,
    plot=oncu_fig.oncu_heatmap_figure,
)
_figure(
    "oncu_length_curves",
    title="ONCU by evidence position, per context length",
    description="Mean clipped ONCU per evidence position, one line per context length and "
    "condition (solid: full context, dashed: retrieved).",
    reference="SPEC §6.7; seed 000 §8.11",
    view=plain_rows,
    plot=oncu_fig.oncu_length_curves_figure,
)

# ------------------------------------------------------------------------ retrieval
_table(
    "retrieval_grid",
    title="Retriever family x top-k",
    description="Per retriever and k, averaged over instances: recall of gold passage ids, "
    "full-chain coverage (all gold ids retrieved), evidence F1, distractor rate (retrieved ids "
    "labelled distractor/conflicting) and distinct passages per context. Recall, coverage "
    "and F1 average over instances with gold evidence.",
    reference="SPEC §4; seed 000 App. A.10-A.13, Table 32",
    view=retrieval_audit_frames,
    plot=retrieval_fig.retrieval_grid_table,
)
_figure(
    "retrieval_curves",
    title="Recall, chain coverage and distractor rate vs top-k",
    description="One line per retriever family; x = number of retrieved chunks k.",
    reference="SPEC §4; seed 000 App. A.10-A.13",
    view=retrieval_audit_frames,
    plot=retrieval_fig.retrieval_curves_figure,
)

# ------------------------------------------------------------------------ cuer
_table(
    "cuer_profile",
    title="CUE-R utility profile (means, 95% CIs)",
    description="Per intervention: mean correctness (soft by default, strict = normalized "
    "exact match: the Correctness axis setting, shown in correctness_axis), relaxed answer F1, "
    "title grounding, confidence error |c - 1[correct]|, trace divergence D and evidence "
    "divergence d_Jaccard(E, E') = 1 - |E ∩ E'| / |E ∪ E'| of the cited ids, with 95% "
    "percentile bootstrap intervals (5,000 resamples, seed 42), and the answers (relaxed "
    "y != y') and correctness labels changed, count and % of n. n = answered pairs; missing = "
    "pairs whose call failed (not wrong); not_applicable = targeted instances the "
    "intervention could not apply to (replace: no non-support passage besides the target). "
    "Original = the retrieved base trace (BM25 top-5).",
    reference="SPEC §7, §6.6; CUE-R Table 2, §3.4 eq. 9, §4.6, App. A-C",
    view=cuer_result,
    plot=cuer_fig.utility_profile_table,
)
_figure(
    "cuer_profile",
    title="Utility profile per intervention",
    description="Grouped bars: each metric's mean per intervention with 95% bootstrap CIs. "
    "Remove and replace lower correctness and grounding; duplicate is mild; trace divergence "
    "is 0 for the original by definition.",
    reference="SPEC §7; CUE-R §6.1, Figure 2",
    view=cuer_result,
    plot=cuer_fig.utility_profile_figure,
)
_table(
    "cuer_paired",
    title="CUE-R paired deltas (original - intervention)",
    description="Mean paired difference original minus intervention per metric, 95% paired "
    "bootstrap CI and two-sided bootstrap p = 2 min(P(d* >= 0), P(d* <= 0)); positive: the "
    "original is higher (for confidence error and trace divergence, lower is better).",
    reference="SPEC §7, §6.6; CUE-R Table 3",
    view=cuer_result,
    plot=cuer_fig.paired_delta_table,
)
_figure(
    "cuer_paired_heatmap",
    title="Paired-delta heatmap",
    description="Cell = mean paired delta original - intervention; red: the original is "
    "higher, blue: lower. Stars: * p < .05, ** p < .01, *** p < .001 (two-sided bootstrap).",
    reference="SPEC §7; CUE-R §6.3, Figure 3",
    view=cuer_result,
    plot=cuer_fig.paired_heatmap_figure,
)
_figure(
    "cuer_divergence",
    title="Trace-divergence distributions",
    description="Per intervention, the distribution of D = 0.5 (1 - Jaccard of cited ids) + "
    "0.3 [answer changed] + 0.2 |c - c'| over instances (box: quartiles; points: "
    "instances). Answer-preserving interventions with D > 0 changed the evidence use.",
    reference="SPEC §7; CUE-R §3.4 eq. 9, §6.2",
    view=cuer_result,
    plot=cuer_fig.divergence_figure,
)
_table(
    "cuer_roles",
    title="Evidence-role flag counts",
    description="Per intervention, how many target items carry each role flag, every rule "
    "checked on its own (an item can carry several): constructive (Δcorr > 0 or Δgrnd > 0), "
    "redundant (|Δcorr|, |Δgrnd|, |Δcal| <= eps and D <= eps), distractive (D >= tau and "
    "Δcorr > 0 or Δgrnd > 0: every distractive item is also constructive), "
    "confidence-distorting (|Δcal| > eps and |Δcorr| <= eps); unassigned = no flag, "
    "several_flags = two or more; n = items with both calls answered, missing = a call "
    "failed.",
    reference="SPEC §7; CUE-R §3.5",
    view=cuer_result,
    plot=cuer_fig.role_table,
)
_table(
    "cuer_role_examples",
    title="Role examples",
    description="Each item intervention with its role flags (flags: every flag it carries; "
    "primary_role: one label for colouring, the first of constructive > distractive > "
    "confidence-distorting > redundant that holds, as the paper's Table 10 labels its "
    "exemplars), the original and perturbed answers, the "
    "deltas, the trace and evidence divergence; select one to open the instance in the Case "
    "view.",
    reference="SPEC §7; CUE-R §3.5, §6.9",
    view=cuer_result,
    plot=cuer_fig.role_examples,
)
_figure(
    "cuer_roles",
    title="Evidence roles per intervention",
    description="Side-by-side (not stacked) counts of the items carrying each role flag; the "
    "flags overlap, so one intervention's bars can add up to more than its items (hatched: "
    "items with several flags). Thresholds eps and tau in the page settings.",
    reference="SPEC §7; CUE-R §3.5",
    view=cuer_result,
    plot=cuer_fig.roles_figure,
)
_table(
    "cuer_synergy",
    title="Two-support synergy",
    description="Instances with >= 2 gold passages shown: mean drop (original - ablation) "
    "removing support 1, support 2 and both; mean synergy = joint drop - max single drop; % "
    "positive synergy; % strong complementary (both single drops <= eps, joint > eps).",
    reference="SPEC §7; CUE-R §6.8, Table 9",
    view=cuer_result,
    plot=cuer_fig.synergy_table,
)
_figure(
    "cuer_hardness",
    title="Replacement-hardness sweep",
    description="Each metric per replacement hardness, the replacement a whole non-support "
    "passage of the instance (shown or not; the target left out): easy (seeded random), "
    "medium (highest BM25 vs the question), hard (highest BM25 vs the target passage); "
    "dashed: the original.",
    reference="SPEC §7; CUE-R §5.6, §6.7, Figure 6",
    view=cuer_result,
    plot=cuer_fig.hardness_figure,
)
_table(
    "cuer_hardness",
    title="Replacement-hardness sweep table",
    description="The original and each replacement hardness: n, missing, not_applicable "
    "(instances without a non-support passage besides the target), the mean metrics, "
    "evidence divergence d_Jaccard(E, E') of the cited ids, and the answers (relaxed "
    "y != y') and correctness labels changed, count and % of n.",
    reference="SPEC §7; CUE-R §5.6, §6.7, Table 8",
    view=cuer_result,
    plot=cuer_fig.hardness_table,
)
_figure(
    "cuer_duplicate_positions",
    title="Duplicate-position sweep",
    description="Each metric per duplicate insertion position: front (before all evidence), "
    "after (right after the original), end (after all evidence, the default); dashed: the "
    "original.",
    reference="SPEC §7; CUE-R App. C, Table 13",
    view=cuer_result,
    plot=cuer_fig.duplicate_positions_figure,
)
_table(
    "cuer_duplicate_positions",
    title="Duplicate-position sweep table",
    description="The original and each duplicate position (front, after, end): n, missing, "
    "the mean metrics, evidence divergence d_Jaccard(E, E') = 1 - |E ∩ E'| / |E ∪ E'| of the "
    "cited ids (Table 13's Evid. Div.), and per position the answers changed (relaxed "
    "y != y') and the correctness labels changed (App. C), count and % of n.",
    reference="SPEC §7; CUE-R App. C, Table 13",
    view=cuer_result,
    plot=cuer_fig.duplicate_positions_table,
)
_table(
    "cuer_role_combinations",
    title="Role flag combinations",
    description="Per intervention, how many items carry each combination of role flags "
    "(e.g. constructive+distractive; unassigned = none), most frequent first.",
    reference="SPEC §7; CUE-R §3.5",
    view=cuer_result,
    plot=cuer_fig.role_combinations_table,
)

# ------------------------------------------------------------------------ dolce
_figure(
    "dolce_lambda_k_map",
    title="DOLCE lambda-k map",
    description=(
        "One point per problem: complexity lambda (length in units of the shortest sufficient "
        "span, COW; number of aspects, PIG) against redundancy k (its copies), both on log "
        "axes (0 drawn at 0.5). Colour = focus category: I closed-book (lambda = 0), II easy "
        "(lambda <= lambda_p, k > k_p), III retrieval (lambda <= lambda_p, k <= k_p), IV "
        "balanced (lambda_p < lambda <= lambda_q), V holistic (lambda > lambda_q). Dashed "
        "lines: the thresholds each problem's category was assigned with, one panel per "
        "threshold set (defaults, §4: lambda_p = k_p = the observed length at index "
        "floor(N/3) counted from 0 among the N other than 0 and L, 5 on the ladder 0, 1, 2, "
        "5, ..., 100, L; lambda_q = the longest span shorter than L); open markers: PIG fits "
        "of the published Algorithm 2 (lambda not identified); crosses: COW fits with k = 0 "
        "(not covered by the model: a class this tool adds, not one of the paper's). Hover "
        "shows the question; click a point to list its probes."
    ),
    reference=_DOLCE,
    view=dolce_result,
    plot=dolce_fig.lambda_k_map,
)
_figure(
    "dolce_categories",
    title="DOLCE focus categories per task",
    description=(
        "Share of problems in each focus category I-V per task (a dataset, or a run | dataset "
        "when several runs are selected); the hover gives counts. Categories from the fitted "
        "lambda and k with the thresholds shown on the lambda-k map; hatched: not identified "
        "(PIG under the published estimator); grey crossed segment: not covered (COW k = 0; "
        "this tool's class, not one of the paper's)."
    ),
    reference=_DOLCE,
    view=dolce_result,
    plot=dolce_fig.category_bars,
)
_figure(
    "dolce_outcome_curve",
    title="DOLCE outcome curve P(x | C) with the fitted mixture",
    description=(
        "For one problem (option 'problem'): observed outcome shares by observation length C "
        "(markers; COW: correct, wrong, IDK; PIG: mean score) and what the fitted mixture of "
        "the background-noise and hybrid oracle components predicts (lines). C on a log axis, "
        "0 drawn at 0.5."
    ),
    reference="SPEC §8; seed dolce_lambda_k §3.2-3.4, Algorithms 1-2",
    view=dolce_result,
    plot=dolce_fig.outcome_curve,
)
_table(
    "dolce_problems",
    title="DOLCE estimates per problem",
    description=(
        "Per problem: scenario (the problem's own dip-test p-value and the task's App. H "
        "rule), units L, observations, lambda, k, P(z = oracle), log-likelihood, estimator, "
        "identified, thresholds and focus category."
    ),
    reference=_DOLCE,
    view=dolce_result,
    plot=dolce_fig.problems_table,
)
_table(
    "dolce_tasks",
    title="DOLCE category distribution per task",
    description=(
        "Problems per task, COW / PIG split with the scenario rule (App. H) and the pooled "
        "dip-test p-value, count and share of each category I-V, not-identified and "
        "not-covered counts."
    ),
    reference=_DOLCE,
    view=dolce_result,
    plot=dolce_fig.tasks_table,
)

# ------------------------------------------------------------------------ fanin
_figure(
    "fanin_degradation",
    title="Fan-in degradation curves",
    description="Answer correctness AC = 100 x the score field (default relaxed F1) against "
    "fan-in, the number of distinct source documents among the gold evidence; one line per "
    "run and condition with 95% bootstrap bands. Click a point to list its instances.",
    reference="SPEC §9; seed 003 §2-3, Fig. 2, Table 5",
    view=fanin_result,
    plot=fanin_fig.fanin_degradation_figure,
)
_figure(
    "fanin_scatter",
    title="ER-AC and EP-AC scatter",
    description="Each point is one (run, condition) at one fan-in bucket (single 1, low 2-3, "
    "high >= 4), as the paper's Figure 3 ('method-fan-in pairs'): mean evidence recall ER "
    "(left) or evidence precision EP (right) of the evidence pack against mean AC, with "
    "Pearson r (95% bootstrap CI over points) and the least-squares line. By default the "
    "retrieved condition only: the oracle (pack = gold evidence, ER = EP = 1 by construction) "
    "and full context (pack = cited passages; the paper's long-context baseline has no "
    "pack) are left out unless included; the note under the plot lists the points used.",
    reference="SPEC §9; seed 003 §3, §6.1, Fig. 3",
    view=fanin_result,
    plot=fanin_fig.fanin_scatter_figure,
)
_table(
    "fanin_degradation",
    title="Relative degradation and construction loss",
    description="Per run and condition: AC at single (fan-in 1) and high (>= 4) fan-in, "
    "relative degradation (AC_high - AC_single) / AC_single in % with a bootstrap CI, the "
    "oracle's drop (synthesis-difficulty baseline), construction loss = system drop minus "
    "oracle drop (pp; negative = loss beyond synthesis), and failure attribution: failures "
    "(AC < 33) and the share of them with ER < 50%.",
    reference="SPEC §9; seed 003 §6.1, §6.3, Table 8",
    view=fanin_result,
    plot=fanin_fig.fanin_degradation_table,
)
_table(
    "fanin_buckets",
    title="AC, ER and EP per fan-in bucket",
    description="Means with 95% bootstrap CIs per run, condition and fan-in bucket (single = "
    "1, low = 2-3, high >= 4, all). ER = |pack ∩ gold| / |gold|, EP = |pack ∩ gold| / |pack| "
    "over passage-id sets (an id listed twice counts once); no pack for no-evidence.",
    reference="SPEC §9; seed 003 §2-3, Table 4",
    view=fanin_result,
    plot=fanin_fig.fanin_buckets_table,
)
_table(
    "fanin_pairs",
    title="Failure overlap and crossover between systems",
    description="Per pair of (run, condition): Jaccard overlap of their failure sets (AC < "
    "33) over common instances, and the crossover fan-in where the leader in AC changes.",
    reference="SPEC §9; seed 003 §6.3-6.4, Table 5",
    view=fanin_result,
    plot=fanin_fig.fanin_pairs_table,
)
_figure(
    "crux_coverage",
    title="CRUX coverage, ranked coverage and density",
    description="Per retriever and top-k: Cov = share of answerable sub-questions the context "
    "answers (rating >= 3), alpha-nDCG (alpha 0.5) with sub-questions as subtopics, and "
    "density ((Cov/tokens) / (Cov(Z*)/tokens(Z*)))^0.5 against the required subset Z*; 95% "
    "bootstrap CIs; k = |Z*| (when chosen) sizes each context to its required subset. A "
    "judged rating answers when >= eta (default 3). Without stored judge ratings each gold "
    "passage answers its own sub-question (answerability derived from gold, binary: eta does "
    "not apply); the note under the plot counts the instances of each.",
    reference="SPEC §9; seed 002 §3.1-3.3, §4.2 (k = |Z*|), §4.4 (eta)",
    view=crux_result,
    plot=fanin_fig.crux_coverage_figure,
)
_table(
    "crux_table",
    title="CRUX per retriever and k",
    description="Mean Cov, alpha-nDCG and density with 95% bootstrap CIs and the mean context "
    "tokens, per retriever and top-k (k = |Z*|: the required subset's size per instance, "
    "k_mean its mean); n = instances with answerable sub-questions; eta = answerability "
    "threshold; judged / gold_derived = instances whose answerability was judged or derived "
    "from gold evidence (not judged; eta does not apply).",
    reference="SPEC §9; seed 002 §3.3, §4.2 (k = |Z*|), §4.4 (eta)",
    view=crux_result,
    plot=fanin_fig.crux_table,
)

# ------------------------------------------------------------------------ attribution
_table(
    "attribution_cited_causal",
    title="Cited vs causal passages (attribution run)",
    description="Every shown passage of the fitted instances, by whether the unablated answer "
    "cited it and whether it is causal (its surrogate weight's 95% bootstrap CI lies above "
    "0). Cited but not causal: cited without the answer depending on it; causal but not "
    "cited: the answer depends on a passage it does not cite. Passages always kept or always "
    "dropped by the masks are undetermined and left out (counted in the report).",
    reference="issue 40 item 4; ContextCite (Cohen-Wang et al., NeurIPS 2024)",
    view=attribution_result,
    plot=attribution_fig.cited_causal_table,
)
_table(
    "attribution_gold_reliance",
    title="Gold reliance by context length, evidence position, distractor similarity",
    description=attribution_fig.HELP["gold_reliance"],
    reference="issue 40 item 4",
    view=attribution_result,
    plot=attribution_fig.gold_reliance_table,
)
_figure(
    "attribution_gold_reliance",
    title="Gold reliance per cell",
    description=attribution_fig.HELP["gold_reliance"],
    reference="issue 40 item 4",
    view=attribution_result,
    plot=attribution_fig.gold_reliance_figure,
)
_figure(
    "attribution_lds",
    title="Linear datamodeling score per instance",
    description=attribution_fig.HELP["lds"],
    reference="ContextCite (Cohen-Wang et al., NeurIPS 2024) §4",
    view=attribution_result,
    plot=attribution_fig.lds_figure,
)
