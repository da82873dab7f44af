"""Help texts of the dashboard: the methods' and the sidebar's tooltips, one place."""

from __future__ import annotations

from core.views.catalog import get_figure, get_table

__all__ = [
    "HELP",
    "tip",
]


#: Definitions (and where they come from) of every number the pages show, for tooltips.
HELP = {
    "crux_judge": "Whose 0-5 answerability ratings CRUX uses (imported with `import crux` or "
    "made by `judge crux`); a passage answers a sub-question when its rating is >= η (the "
    "threshold below; default 3). "
    "Instances without rated sub-questions fall back to gold evidence: each gold passage "
    "answers a sub-question of its own. SPEC §9, seed 002 §3.1-3.3.",
    "group_key": "Metadata cells that define an ONCU group: S_none, S_oracle and S_c are means "
    "over a group's predictions, and a group is valid only when S_oracle > S_none. Default: "
    "source, model, reasoning_type, context_length, evidence_position, evidence_density, "
    "distractor_similarity (SPEC §6.5, seed 000 §3.3). Imported data with exact context "
    "lengths (HotpotQA) makes every instance its own group: drop context_length.",
    "oncu_clipped": "Unweighted mean over valid groups of clip((S_c - S_none) / (S_oracle - "
    "S_none), 0, 1): the share of the oracle's advantage the condition recovers. SPEC §6.5, "
    "seed 000 §3.3.",
    "oncu_raw_mean": "Mean of the unclipped ratio over valid groups; > 1 means above the "
    "oracle, < 0 below the no-evidence baseline. SPEC §6.5.",
    "oncu_weighted": "sum(S_c - S_none) / sum(S_oracle - S_none) over valid groups (the "
    "aggregate raw ratio of seed 000 Table 23). SPEC §6.5.",
    "valid_groups": "Groups with no-evidence and oracle predictions, all instances "
    "oracle-applicable and S_oracle > S_none. SPEC §6.5.",
    "ci": "95% percentile bootstrap interval, 5,000 resamples, seed 42. SPEC §6.6.",
    "trace_divergence": "D = 0.5 (1 - Jaccard of cited ids) + 0.3 [answer changed] + "
    "0.2 |c - c'|. SPEC §7, CUE-R.",
    "f1_relaxed": "Token F1 after the published relaxed normalization: accents dropped, "
    "Unicode punctuation to spaces (symbols such as $ + = are kept, so relaxed can be stricter "
    "than strict on symbol answers), articles a/an/the removed, synthetic suffix dropped; max "
    "over gold aliases. SPEC §6.2; seed 000 released scorer.",
    "ev_f1": "F1 of cited passage ids against gold passage ids. SPEC §6.3.",
    "failure_label": "parse -> success -> localization (nothing cited) -> selection -> "
    "integration -> conversion, strict EM = correct. SPEC §6.4.",
    "confidence": "The model's self-reported confidence in [0, 1] (answer contract).",
    "judged_fanin": "AuthTrace's judged scores from `judge authtrace-correctness` and `judge "
    "authtrace-evidence` runs, beside the proxies. Judged AC = score/3 x 100 (the 0-3 claim "
    "rubric; seed 003 §3, App. K). Judged ER = gold evidence units the pack's ~120-token "
    "segments cover / |E*| (eq. 4); judged EP = segments that match a gold unit / segments "
    "(eq. 5), shown in %. A value whose judge calls failed is left out and counted in `judged "
    "missing`. Correlations: Pearson r and Spearman ρ between proxy and judged value over the "
    "instances with both (n).",
    "crux_answers": "Answer coverage from `judge crux-coverage` runs (seed 002 §3.3): Cov(y) = "
    "share of the answerable sub-questions Q_ans the generated answer y addresses with a 0-5 "
    "rating >= η; Den(y) = ((Cov(y) / tokens(y)) / (Cov(Z*) / tokens(Z*)))^0.5 with the oracle "
    "context Z* as reference (eq. 5). An answer with an unrated sub-question is unscored "
    "(counted). Kendall τ-b (scipy's default, ties corrected) between each retrieval-context "
    "metric and Cov(y) (Den(Z): with Den(y)) across the judged pipelines of each k, over all "
    "pipelines (all) and over single contexts (contexts), in the layout of seed 002 Table 3; "
    "each cell's n is its number of points, τ is empty below two points or for a constant "
    "column.",
    "agreement": "People's labels (`annotate import`) against each other and against the rule "
    "labels (rater `rule`) on the blind sample of seed 000 App. A.6. Per pair of raters, on "
    "the items both rated: n, raw agreement = agreed / n, Cohen's κ = (p_o - p_e) / (1 - p_e); "
    "κ is empty with its note when undefined (fewer than 2 shared items, or p_e = 1). "
    "Confusion matrix: rows the first rater, columns the second (seed 000 Table 28 style).",
    "judge_agreement": "Judge runs of one rubric that rated the same items (same judged run, "
    "instance, condition and item), per pair: n, raw agreement, Cohen's κ and the "
    "quadratic-weighted κ of the rubric's ordered scale (0-5 or 0-3); failed calls are left "
    "out (`report agreement --judges J1,J2`).",
}


def tip(name: str) -> str | None:
    """Tooltip text (definition + paper section) of a number or a registered figure/table."""
    if name in HELP:
        return HELP[name]
    for getter in (get_figure, get_table):
        try:
            spec = getter(name)
        except ValueError:
            continue
        return f"{spec.description} ({spec.reference})"
    return None
