"""Fuzz drills: random files into every importer -> a DataError (one line naming the file) or
a dataset; never another exception, and a store import that fails leaves the store unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.datasets.importers import FORMATS, read_dataset
from core.datasets.results import import_results
from core.store import Store, StoreError
from core.types import DataError

_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=30),
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "_id",
        "id",
        "question",
        "answer",
        "gold_answer",
        "context",
        "supporting_facts",
        "type",
        "passages",
        "long_context",
        "oracle_evidence",
        "evidences",
        "text",
        "title",
        "is_gold",
        "answers",
        "context_length",
        "distractors",
        "input",
        "length",
        "dataset",
        "language",
        "all_classes",
    ]
)
#: Records that look like the formats (right keys, wrong or odd values) reach deeper checks.
_record = st.dictionaries(_keys, _json, max_size=8)


def _check(path: Path, fmt: str) -> None:
    try:
        result = read_dataset(path, fmt=fmt, name="fuzz")
    except DataError as exc:
        msg = str(exc)
        assert "\n" not in msg and msg.startswith(str(path)), msg
    else:
        assert result.dataset.name == "fuzz"


@_SETTINGS
@given(data=st.binary(max_size=400), fmt=st.sampled_from(FORMATS))
def test_random_bytes_never_crash(tmp_path, data, fmt):
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    _check(path, fmt)


@_SETTINGS
@given(records=st.lists(_record, min_size=1, max_size=4), fmt=st.sampled_from(FORMATS))
def test_format_shaped_records_never_crash(tmp_path, records, fmt):
    path = tmp_path / "f.json"
    if fmt in ("hotpotqa", "2wiki"):
        path.write_text(json.dumps(records))
    else:
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    _check(path, fmt)


@_SETTINGS
@given(lines=st.lists(st.text(max_size=60), min_size=1, max_size=5))
def test_results_import_never_crashes_and_leaves_store_unchanged(tmp_path, lines):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    before = store.list_datasets()
    path = tmp_path / "x.per_sample_metrics.csv"
    header = (
        "sample_id,model_name,method,source,reasoning_type,answer_type,context_length,"
        "evidence_position,evidence_density,distractor_similarity,gold_answer,predicted_answer,"
        "gold_evidence_ids,predicted_evidence_ids"
    )
    path.write_text(header + "\n" + "\n".join(lines) + "\n")
    try:
        import_results(store, path, name="fz")
    except (DataError, StoreError) as exc:
        assert "\n" not in str(exc)
        assert store.list_datasets() == before
        assert store.runs_frame().empty
