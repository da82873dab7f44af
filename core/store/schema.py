"""The store's schema: DDL, its version, the forward migrations and the column constants.

Migration ``i`` brings the schema from version ``i`` to ``i + 1``; :data:`SCHEMA_VERSION` is
their count. The version checks and the transaction around the migrations are in
:mod:`core.store.connection`, which reads both names from this module at call time.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

__all__ = [
    "CACHE_COLUMNS",
    "CELL_COLUMNS",
    "DATA_VERSION_DDL",
    "DATASET_FINGERPRINT",
    "INSTANCE_COLUMNS",
    "PASSAGE_COLUMNS",
    "PREDICTION_COLUMNS",
    "PREDICTION_KEY",
    "RUN_COLUMNS",
    "RUN_JSON_COLUMNS",
    "LEGACY_RETRIEVAL",
    "SCHEMA_VERSION",
    "SCORE_COLUMNS",
    "apply_migrations",
    "bump_data_version",
    "read_data_version",
    "stored_version",
]

#: A dataset's content fingerprint as SQL, ``{ds}`` its id: instance and passage counts and
#: the XOR of an MD5 of each row's fields (every stored field, the dataset id aside), so any
#: changed, added or removed instance or passage changes it; the row order of a table does
#: not. Cheap (one scan in DuckDB, ~15 ms for 2,000 passages), unlike ``content_hash``.
_FINGERPRINT_OF = """(
    (SELECT count(*) || '-' || coalesce(bit_xor(md5_number(CAST(row(
        i.instance_id, i.ord, i.question, i.gold_answer, i.answer_aliases, i.answer_type,
        i.reasoning_type, i.context_length, i.evidence_position, i.distractor_similarity,
        i.evidence_density, i.fan_in, i.oracle_applicable, i.source, i.metadata) AS VARCHAR))
    ), 0) FROM instances i WHERE i.dataset_id = {ds})
    || '/' ||
    (SELECT count(*) || '-' || coalesce(bit_xor(md5_number(CAST(row(
        p.instance_id, p.passage_id, p.ord, p.title, p.text, p.doc_id, p.role, p.is_gold,
        p.n_tokens) AS VARCHAR))
    ), 0) FROM passages p WHERE p.dataset_id = {ds}))"""
#: ``SELECT`` of one dataset's fingerprint (parameters: the dataset id, twice).
DATASET_FINGERPRINT = "SELECT " + _FINGERPRINT_OF.format(ds="?")

#: ``runs.retrieval`` of a judge run made of ratings stored by name (``import crux``; migration 8
#: writes the same literal).
LEGACY_RETRIEVAL = (
    '{"judge": {"rubric": "crux-answerability", "version": "stored", "hash": null, '
    '"target_run": "", "conditions": [], "passages": null}}'
)

#: Forward migrations; migration ``i`` brings the schema from version ``i`` to ``i + 1``.
#: Never edit a released migration: append a new one and the version follows.
_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE datasets (
        dataset_id VARCHAR PRIMARY KEY,
        name VARCHAR NOT NULL UNIQUE,
        source VARCHAR,
        builder VARCHAR,
        builder_params VARCHAR,           -- JSON
        created_at TIMESTAMP DEFAULT current_timestamp,
        n_instances INTEGER
    );
    CREATE TABLE instances (
        dataset_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        ord INTEGER NOT NULL,
        question VARCHAR NOT NULL,
        gold_answer VARCHAR NOT NULL,
        answer_aliases VARCHAR[],
        answer_type VARCHAR,
        reasoning_type VARCHAR,
        context_length INTEGER,
        evidence_position VARCHAR,
        distractor_similarity VARCHAR,
        evidence_density VARCHAR,
        fan_in INTEGER,
        oracle_applicable BOOLEAN,
        source VARCHAR,
        metadata VARCHAR,                 -- JSON
        PRIMARY KEY (dataset_id, instance_id)
    );
    CREATE TABLE passages (
        dataset_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        passage_id VARCHAR NOT NULL,
        ord INTEGER NOT NULL,
        title VARCHAR,
        text VARCHAR,
        doc_id VARCHAR,
        role VARCHAR,
        is_gold BOOLEAN,
        n_tokens INTEGER,
        PRIMARY KEY (dataset_id, instance_id, passage_id)
    );
    CREATE TABLE sub_questions (
        dataset_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        sq_id VARCHAR NOT NULL,
        text VARCHAR,
        PRIMARY KEY (dataset_id, instance_id, sq_id)
    );
    CREATE TABLE answerability (
        dataset_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        sq_id VARCHAR NOT NULL,
        passage_id VARCHAR NOT NULL,
        rating INTEGER,
        judge VARCHAR,
        PRIMARY KEY (dataset_id, instance_id, sq_id, passage_id, judge)
    );
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        dataset_id VARCHAR,
        backend VARCHAR,
        model VARCHAR,
        model_digest VARCHAR,
        options VARCHAR,                  -- JSON
        template_version VARCHAR,
        template_hash VARCHAR,
        retrieval VARCHAR,                -- JSON
        created_at TIMESTAMP DEFAULT current_timestamp,
        finished_at TIMESTAMP,
        status VARCHAR,
        n_planned INTEGER,
        n_done INTEGER,
        notes VARCHAR
    );
    CREATE TABLE predictions (
        run_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        condition VARCHAR NOT NULL,
        variant VARCHAR NOT NULL DEFAULT '',
        prompt_hash VARCHAR,
        input_passage_ids VARCHAR[],
        raw_response VARCHAR,
        answer VARCHAR,
        cited_ids VARCHAR[],
        confidence DOUBLE,
        logprob_confidence DOUBLE,
        explanation VARCHAR,
        parse_error VARCHAR,
        error VARCHAR,
        latency_ms DOUBLE,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        total_duration_ns BIGINT,
        load_duration_ns BIGINT,
        prompt_eval_duration_ns BIGINT,
        eval_duration_ns BIGINT,
        cache_hit BOOLEAN DEFAULT false,
        created_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (run_id, instance_id, condition, variant)
    );
    CREATE TABLE scores (
        run_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        condition VARCHAR NOT NULL,
        variant VARCHAR NOT NULL DEFAULT '',
        em_strict DOUBLE,
        f1_strict DOUBLE,
        em_relaxed DOUBLE,
        f1_relaxed DOUBLE,
        soft_correct DOUBLE,
        ev_precision DOUBLE,
        ev_recall DOUBLE,
        ev_f1 DOUBLE,
        citation_grounding DOUBLE,
        title_grounding DOUBLE,
        confidence_error DOUBLE,
        failure_label VARCHAR,
        PRIMARY KEY (run_id, instance_id, condition, variant)
    );
    CREATE TABLE response_cache (
        cache_key VARCHAR PRIMARY KEY,
        backend VARCHAR,
        model VARCHAR,
        options_hash VARCHAR,
        prompt_hash VARCHAR,
        response VARCHAR,
        created_at TIMESTAMP DEFAULT current_timestamp
    );
    """,
    # 2: engine bookkeeping. ``predictions.meta``: the planner's notes as JSON (CUE-R target
    # and rule, probe span, retrieval ranking); ``runs.backend_info``: the backend's
    # ``describe()``; ``runs.conditions``: the conditions planned (JSON list);
    # ``runs.model_seconds`` / ``runs.wall_seconds``: server time (sum of ``total_duration``)
    # against wall time, accumulated over every execution of the run.
    """
    ALTER TABLE predictions ADD COLUMN meta VARCHAR;
    ALTER TABLE runs ADD COLUMN backend_info VARCHAR;
    ALTER TABLE runs ADD COLUMN conditions VARCHAR;
    ALTER TABLE runs ADD COLUMN model_seconds DOUBLE;
    ALTER TABLE runs ADD COLUMN wall_seconds DOUBLE;
    """,
    # 3: truthful run states and errors that are not answers (issue 15).
    # ``runs.kind``: conditions, interventions, probes, judge, imported or rerun (inferred for
    # stored runs from their conditions and backend); ``runs.pid`` / ``runs.host`` /
    # ``runs.heartbeat_at``: the process running it and its last sign of life;
    # ``runs.n_errors``: stored calls that failed. A failed call keeps its ``error`` only: its
    # ``parse_error`` ("empty reply") and its scores become NULL, its failure label goes; a
    # finished run with errors becomes ``partial`` (``failed`` when every call failed);
    # imported runs get status ``done`` (kind ``imported``).
    """
    ALTER TABLE runs ADD COLUMN kind VARCHAR;
    ALTER TABLE runs ADD COLUMN pid INTEGER;
    ALTER TABLE runs ADD COLUMN host VARCHAR;
    ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMP;
    ALTER TABLE runs ADD COLUMN n_errors INTEGER;
    UPDATE runs SET kind = CASE
        WHEN backend = 'imported' OR status = 'imported' THEN 'imported'
        WHEN coalesce(conditions, '') LIKE '%"intervention"%' THEN 'interventions'
        WHEN coalesce(conditions, '') LIKE '%"probe"%' THEN 'probes'
        WHEN run_id LIKE '%:rerun:%' THEN 'rerun'
        ELSE 'conditions' END;
    UPDATE runs SET status = 'done' WHERE status = 'imported';
    UPDATE predictions SET parse_error = NULL WHERE coalesce(error, '') <> '';
    UPDATE scores SET em_strict = NULL, f1_strict = NULL, em_relaxed = NULL,
        f1_relaxed = NULL, soft_correct = NULL, ev_precision = NULL, ev_recall = NULL,
        ev_f1 = NULL, citation_grounding = NULL, title_grounding = NULL,
        confidence_error = NULL, failure_label = NULL
    FROM predictions p
    WHERE p.run_id = scores.run_id AND p.instance_id = scores.instance_id
        AND p.condition = scores.condition AND p.variant = scores.variant
        AND coalesce(p.error, '') <> '';
    UPDATE runs SET n_errors = (
        SELECT count(*) FROM predictions p
        WHERE p.run_id = runs.run_id AND coalesce(p.error, '') <> ''
    );
    UPDATE runs SET status = CASE
        WHEN n_errors = 0 THEN 'done'
        WHEN n_errors >= (SELECT count(*) FROM predictions p WHERE p.run_id = runs.run_id)
            THEN 'failed'
        ELSE 'partial' END
    WHERE status = 'done';
    """,
    # 4: judgments (issue 20). One row per judge call of a judge run (``runs.kind = 'judge'``):
    # the rubric (name, version, template hash), the judge (backend:model), what was judged
    # (``target_run`` / ``condition`` of a judged prediction, '' for a dataset's passages;
    # ``item``: sub-question, passage, gold unit or segment), the raw reply, the parsed
    # ``rating`` (NULL when the call failed: ``error`` set, never a rating) and ``parse_error``.
    """
    CREATE TABLE judgments (
        run_id VARCHAR NOT NULL,
        rubric VARCHAR NOT NULL,
        rubric_version VARCHAR NOT NULL,
        rubric_hash VARCHAR,
        judge_model VARCHAR,
        target_run VARCHAR NOT NULL DEFAULT '',
        instance_id VARCHAR NOT NULL,
        condition VARCHAR NOT NULL DEFAULT '',
        item VARCHAR NOT NULL,
        prompt_hash VARCHAR,
        raw_reply VARCHAR,
        rating DOUBLE,
        parse_error VARCHAR,
        error VARCHAR,
        cache_hit BOOLEAN DEFAULT false,
        latency_ms DOUBLE,
        created_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (run_id, target_run, instance_id, condition, item)
    );
    """,
    # 5: annotation samples and human labels (issue 20). ``annotation_items``: an opaque item
    # id -> the prediction it stands for under a rubric, with the seed of the export that drew
    # it; ``annotations``: one label per (item, annotator) and the file it came from. Rule
    # labels are not copied here (they are read from ``scores`` when reporting).
    """
    CREATE TABLE annotation_items (
        item_id VARCHAR PRIMARY KEY,
        run_id VARCHAR NOT NULL,
        instance_id VARCHAR NOT NULL,
        condition VARCHAR NOT NULL,
        variant VARCHAR NOT NULL DEFAULT '',
        rubric VARCHAR NOT NULL,
        seed BIGINT,
        created_at TIMESTAMP DEFAULT current_timestamp
    );
    CREATE TABLE annotations (
        item_id VARCHAR NOT NULL,
        annotator VARCHAR NOT NULL,
        label VARCHAR NOT NULL,
        imported_at TIMESTAMP DEFAULT current_timestamp,
        source_file VARCHAR,
        PRIMARY KEY (item_id, annotator)
    );
    """,
    # 6: the number of gold passages of each instance, kept with the instance (issue 17 item
    # 6): the analysis frame read it by counting every dataset's gold passages on each read
    # (0.1-0.2 s of a first page load at 1,000,000 predictions). Written with the instance
    # (core.store.datasets); here counted once for the instances already stored.
    """
    ALTER TABLE instances ADD COLUMN n_gold BIGINT;  -- count(*), as the read counted it
    UPDATE instances SET n_gold = (
        SELECT count(*) FROM passages p
        WHERE p.is_gold AND p.dataset_id = instances.dataset_id
            AND p.instance_id = instances.instance_id
    );
    """,
    # 7: a dataset's content fingerprint, and the fingerprint of the dataset each run ran on
    # (issue 35 item 1): a dataset replaced under its runs is found (`score` lists the runs,
    # core.store.datasets.DATASET_FINGERPRINT), never silently re-scored against new gold.
    # Stored runs are taken to have run on their dataset as it is now.
    f"""
    ALTER TABLE datasets ADD COLUMN IF NOT EXISTS fingerprint VARCHAR;
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS dataset_fingerprint VARCHAR;
    UPDATE datasets SET fingerprint = {_FINGERPRINT_OF.format(ds="datasets.dataset_id")};
    UPDATE runs SET dataset_fingerprint = (
        SELECT d.fingerprint FROM datasets d WHERE d.dataset_id = runs.dataset_id
    );
    """,
    # 8: CRUX answerability ratings in one table (issue 37 item 2). They were rows of
    # ``answerability`` (``judge crux``, ``import crux``, and a copy of each
    # ``crux-answerability`` judge run's judgments); now every rating is a judgment of a
    # ``crux-answerability`` judge run (``item`` = ``<sq_id>|<passage_id>``, ``target_run``
    # ''). Copies of judge runs' judgments are dropped (the judgment is kept); every other
    # rating becomes a judgment of a judge run named after its judge (``<judge>@<dataset>``
    # when that name is taken by another run or rated several datasets), rubric version
    # ``stored``, its raw reply unknown. ``answerability`` becomes a view of the judgments
    # with its old columns, so its readers read the one table.
    """
    -- the ratings to move (no judgment holds them), each with the judge run it goes to: the
    -- judge's name, or <judge>@<dataset> when a run has that name or it rated several datasets
    CREATE TABLE migrating_ratings AS
    WITH legacy AS (
        SELECT a.dataset_id, a.instance_id, a.sq_id, a.passage_id, a.rating,
            coalesce(a.judge, '') AS judge
        FROM answerability a
        WHERE NOT EXISTS (
            SELECT 1 FROM judgments j JOIN runs r USING (run_id)
            WHERE j.run_id = a.judge AND r.dataset_id = a.dataset_id AND j.target_run = ''
                AND j.rubric = 'crux-answerability' AND j.instance_id = a.instance_id
                AND j.item = a.sq_id || '|' || a.passage_id)
    ), judges AS (
        SELECT dataset_id, judge, CASE
            WHEN judge <> '' AND count(*) OVER (PARTITION BY judge) = 1
                AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = judge) THEN judge
            ELSE judge || '@' || dataset_id END AS run_id
        FROM (SELECT DISTINCT dataset_id, judge FROM legacy)
    )
    SELECT l.*, j.run_id, d.fingerprint
    FROM legacy l JOIN judges j USING (dataset_id, judge)
    LEFT JOIN datasets d USING (dataset_id);
    INSERT INTO runs (run_id, dataset_id, backend, model, retrieval, status, n_planned, n_done,
                      n_errors, kind, notes, finished_at, dataset_fingerprint)
    SELECT run_id, dataset_id, 'stored', judge,
        '{"judge": {"rubric": "crux-answerability", "version": "stored", "hash": null, '
        || '"target_run": "", "conditions": [], "passages": null}}',
        'done', count(*), count(*), 0, 'judge',
        'CRUX ratings stored before schema 8 under judge ' || judge,
        current_timestamp, any_value(fingerprint)
    FROM migrating_ratings GROUP BY run_id, dataset_id, judge
    ON CONFLICT DO NOTHING;
    INSERT INTO judgments (run_id, rubric, rubric_version, judge_model, target_run,
                           instance_id, condition, item, rating, cache_hit)
    SELECT run_id, 'crux-answerability', 'stored', judge, '', instance_id, '',
        sq_id || '|' || passage_id, rating, false
    FROM migrating_ratings
    ON CONFLICT DO NOTHING;
    DROP TABLE migrating_ratings;
    DROP TABLE answerability;
    -- the view: the ratings of the crux-answerability judge runs, in the old table's columns
    CREATE VIEW answerability AS
    SELECT r.dataset_id, j.instance_id, split_part(j.item, '|', 1) AS sq_id,
        substr(j.item, strpos(j.item, '|') + 1) AS passage_id,
        CAST(j.rating AS INTEGER) AS rating, j.run_id AS judge
    FROM judgments j JOIN runs r USING (run_id)
    WHERE j.rubric = 'crux-answerability' AND j.target_run = '' AND coalesce(j.error, '') = '';
    """,
)

SCHEMA_VERSION = len(_MIGRATIONS)
#: Migrations whose work a query finds done already (a store whose version rows were set back,
#: or its file copied mid-way), by index: they are recorded without being run again (DuckDB
#: has no conditional DDL, and dropping a view as a table fails).
_DONE_IF: dict[int, str] = {
    7: "SELECT count(*) > 0 FROM duckdb_views() "
    "WHERE database_name = current_database() AND view_name = 'answerability'",
}
#: The first schema version whose instances keep ``n_gold`` (older stores opened read-only
#: count it from the passages).
N_GOLD_VERSION = 6

INSTANCE_COLUMNS = (
    "dataset_id",
    "instance_id",
    "ord",
    "question",
    "gold_answer",
    "answer_aliases",
    "answer_type",
    "reasoning_type",
    "context_length",
    "evidence_position",
    "distractor_similarity",
    "evidence_density",
    "fan_in",
    "oracle_applicable",
    "source",
    "metadata",
)
PASSAGE_COLUMNS = (
    "dataset_id",
    "instance_id",
    "passage_id",
    "ord",
    "title",
    "text",
    "doc_id",
    "role",
    "is_gold",
    "n_tokens",
)

#: Metadata cells reported per dataset (``datasets --json``) and offered as filters.
CELL_COLUMNS = (
    "context_length",
    "evidence_position",
    "distractor_similarity",
    "reasoning_type",
    "answer_type",
    "evidence_density",
    "fan_in",
)

RUN_COLUMNS = (
    "run_id",
    "dataset_id",
    "backend",
    "model",
    "model_digest",
    "options",
    "template_version",
    "template_hash",
    "retrieval",
    "status",
    "n_planned",
    "n_done",
    "notes",
    "backend_info",
    "conditions",
    "model_seconds",
    "wall_seconds",
    "kind",
    "pid",
    "host",
    "heartbeat_at",
    "n_errors",
)
RUN_JSON_COLUMNS = ("options", "retrieval", "backend_info", "conditions")

PREDICTION_COLUMNS = (
    "run_id",
    "instance_id",
    "condition",
    "variant",
    "prompt_hash",
    "input_passage_ids",
    "raw_response",
    "answer",
    "cited_ids",
    "confidence",
    "logprob_confidence",
    "explanation",
    "parse_error",
    "error",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "total_duration_ns",
    "load_duration_ns",
    "prompt_eval_duration_ns",
    "eval_duration_ns",
    "cache_hit",
    "meta",
)

SCORE_COLUMNS = (
    "em_strict",
    "f1_strict",
    "em_relaxed",
    "f1_relaxed",
    "soft_correct",
    "ev_precision",
    "ev_recall",
    "ev_f1",
    "citation_grounding",
    "title_grounding",
    "confidence_error",
    "failure_label",
)

#: Columns of a response-cache row as callers give it (``created_at`` is the store's).
CACHE_COLUMNS = ("cache_key", "backend", "model", "options_hash", "prompt_hash", "response")

PREDICTION_KEY = ("run_id", "instance_id", "condition", "variant")


def stored_version(con: duckdb.DuckDBPyConnection) -> int:
    """The schema version of an open store; 0 for a new, empty file.

    Args:
        con: a connection whose current database is the store.
    """
    # One cheap query on every open (the catalog views cost several ms); a file without
    # the table is a new, empty store.
    try:
        # fetchall, not fetchone: no result stays pending on ``con`` (a later ``con.sql``
        # would refuse to run while one is)
        row = con.execute("SELECT max(version) FROM schema_version").fetchall()[0]
    except duckdb.CatalogException:
        return 0
    return int(row[0] or 0)


def apply_migrations(con: duckdb.DuckDBPyConnection, version: int) -> None:
    """Run the migrations from ``version`` to :data:`SCHEMA_VERSION`, recording each.

    The caller holds the transaction (:func:`core.store.connection.in_transaction`).

    Args:
        con: a read-write connection inside a transaction.
        version: the store's current version (:func:`stored_version`).
    """
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_version "
        "(version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT current_timestamp)"
    )
    for target in range(version, SCHEMA_VERSION):
        done = _DONE_IF.get(target)
        if done is None or not con.execute(done).fetchone()[0]:
            con.execute(_MIGRATIONS[target])
        con.execute("INSERT INTO schema_version (version) VALUES (?)", [target + 1])
    con.execute(DATA_VERSION_DDL)


# --------------------------------------------------------------------------- data version
#: The data-version counters (:func:`bump_data_version`). Not a numbered migration: a store of
#: schema version 3 gets the table from its first write by this program (every write creates
#: it when missing), so stores written by older versions stay readable and the migration count
#: is unchanged. ``scope`` is ``store`` (a random id drawn when the table is made, never
#: bumped: a store file deleted and made again at the same path gets another), ``global``
#: (bumped by every change) or ``dataset:<name>`` (bumped by changes to that dataset or its
#: runs). Rows are never deleted, so a counter never goes back to a value it had.
DATA_VERSION_DDL = (
    "CREATE TABLE IF NOT EXISTS data_version (scope VARCHAR PRIMARY KEY, version BIGINT NOT NULL)"
)

_BUMP = (
    "INSERT INTO data_version (scope, version) "
    "SELECT scope, CASE WHEN scope = 'store' THEN CAST(floor(random() * 9.0e15) AS BIGINT) "
    "ELSE 1 END FROM ("
    "SELECT 'store' AS scope UNION SELECT 'global' "
    "UNION SELECT 'dataset:' || d FROM (SELECT unnest(?::VARCHAR[]) AS d) WHERE d IS NOT NULL "
    "UNION SELECT 'dataset:' || dataset_id FROM runs "
    "WHERE list_contains(?, run_id) AND dataset_id IS NOT NULL) "
    "ON CONFLICT (scope) DO UPDATE SET version = CASE WHEN data_version.scope = 'store' "
    "THEN data_version.version ELSE data_version.version + 1 END"
)


def bump_data_version(
    con: duckdb.DuckDBPyConnection,
    *,
    datasets: Sequence[str | None] = (),
    runs: Sequence[str] = (),
    scopes: Sequence[str] | None = None,
) -> list[str]:
    """Count one change of what the dashboard reads, inside the writer's transaction.

    Bumps ``global`` and ``dataset:<name>`` of each of ``datasets`` and of the dataset of
    each stored run of ``runs`` (a run not stored yet bumps ``global`` only; its
    :meth:`core.store.Store.save_run` bumps its dataset). Pages cache their data by these
    counters (:meth:`core.store.Store.data_version`), so the bump must be in the same
    transaction as the change: a reader sees both or neither.

    Args:
        con: a read-write connection inside the caller's transaction.
        datasets: dataset names whose content changed (None entries are ignored).
        runs: run ids whose row, predictions or scores changed.
        scopes: what an earlier, committed bump of the same ``datasets`` and ``runs``
            returned (the engine's writer, once a second): their counters exist, so one
            ``UPDATE`` bumps them, without the table's DDL or the look-up of the runs'
            datasets (about 1 ms instead of 4-5). The counters end the same.

    Returns:
        The scopes bumped (``global`` and the datasets'), for ``scopes`` next time.
    """
    if scopes is not None:
        con.execute(_BUMP_KNOWN, [list(scopes)])
        return list(scopes)
    con.execute(DATA_VERSION_DDL)
    bumped = con.execute(
        _BUMP + " RETURNING scope",
        [[str(d) for d in datasets if d is not None], [str(r) for r in runs]],
    ).fetchall()
    return sorted(str(s) for (s,) in bumped if s != "store")


#: :data:`_BUMP` of scopes whose counters exist (never ``store``, which is not bumped).
_BUMP_KNOWN = (
    "UPDATE data_version SET version = version + 1 "
    "WHERE list_contains(?::VARCHAR[], scope) AND scope <> 'store'"
)


def read_data_version(
    con: duckdb.DuckDBPyConnection, dataset: str | None, runs: Sequence[str]
) -> tuple[int, ...]:
    """The counters of a view: ``(store id, scope version, *run datasets' versions)``.

    The scope is ``global`` when ``dataset`` is None, else ``dataset:<dataset>``; then one
    version per stored run of ``runs`` (ordered by run id): its dataset's counter. A store
    without the table (written only by older versions, opened read-only) gives ``(0, 0)``;
    a missing counter reads 0.
    """
    try:
        rows = con.execute(
            "SELECT 0 AS k, '' AS r, version FROM data_version WHERE scope = 'store' "
            "UNION ALL SELECT 1, '', version FROM data_version WHERE scope = ? "
            "UNION ALL SELECT 2, r.run_id, coalesce(v.version, 0) FROM runs r "
            "LEFT JOIN data_version v ON v.scope = coalesce('dataset:' || r.dataset_id, 'global') "
            "WHERE list_contains(?, r.run_id) ORDER BY 1, 2",
            ["global" if dataset is None else f"dataset:{dataset}", [str(r) for r in runs]],
        ).fetchall()
    except duckdb.CatalogException:
        return (0, 0)
    keys = {k for k, _, _ in rows}
    head = [0 if 0 not in keys else rows[0][2], next((v for k, _, v in rows if k == 1), 0)]
    return tuple(int(v) for v in head + [v for k, _, v in rows if k == 2])
