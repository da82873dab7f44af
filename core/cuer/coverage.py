"""Where a planned CUE-R operator could not apply: counted beside its rows (issue 34 item 3).

Every instance of a CUE-R run with a target gets the same planned item operators, but
``replace`` needs a non-support passage besides the target (seed 004 §5.6;
:func:`core.cuer.interventions.replacement_candidates`): an instance without one has no replace
call. A comparison's ``n`` then covers fewer instances than the others' without saying so;
``not_applicable`` counts, per (run, operator, variant), the targeted instances of the run
(those with any remove / replace / duplicate row) that hold no row of that comparison. It is
0 for the other rows (the original and the zero-retrieval control apply to every instance
with a base trace).
"""

from __future__ import annotations

import pandas as pd

__all__ = ["NOT_APPLICABLE_HELP", "with_not_applicable"]

#: The planned operators that describe one target (their instances are the "targeted" ones).
_PLANNED = ("remove", "replace", "duplicate")
#: Tooltip of the column (the page and the exports).
NOT_APPLICABLE_HELP = (
    "Targeted instances of the run this intervention could not apply to, left out of n and "
    "missing: replace needs a non-support passage besides the target (CUE-R §5.6; e.g. a "
    "HotpotQA example with only its two supporting paragraphs). 0: it applied to every "
    "instance with a target."
)


def with_not_applicable(agg: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """``agg`` with a ``not_applicable`` column right after ``missing``.

    Args:
        agg: rows with ``run``, ``operator``, ``variant`` and ``missing``.
        pairs: :func:`core.cuer.metrics.intervention_pairs` rows (``run``, ``instance_id``,
            ``operator``, ``param``).
    """
    out = agg.copy()
    planned = pairs[pairs["operator"].isin(_PLANNED)]
    targeted = planned.groupby("run")["instance_id"].nunique().to_dict()
    have = planned.groupby(["run", "operator", "param"])["instance_id"].nunique().to_dict()
    counts = [
        int(targeted.get(r, 0) - have.get((r, o, v or ""), 0)) if o in _PLANNED else 0
        for r, o, v in zip(out["run"], out["operator"], out["variant"], strict=True)
    ]
    out.insert(list(out.columns).index("missing") + 1, "not_applicable", counts)
    return out
