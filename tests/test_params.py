"""Declared parameters: the CLI flags and the dashboard widgets come from the same declarations."""

from __future__ import annotations

import argparse

import pytest
from streamlit.testing.v1 import AppTest

import core.commands.run as engine_commands
from core.cli import build_parser
from core.commands import split_csv
from core.cuer import interventions
from core.dolce import probes
from core.params import CONCURRENCY, Param, add_argument, widget_spec
from core.retrieval.retrievers import (
    CHUNK_SIZE,
    OVERLAP,
    TOP_K,
    list_retrievers,
    retriever_param,
)

RUN = ["run", "--dataset", "d", "--name", "x"]
PROBES = ["run-probes", "--dataset", "d", "--backend", "embedded", "--name", "x"]
CUER = ["run-interventions", "--dataset", "d", "--backend", "embedded", "--name", "x"]


def _action(argv_command: list[str], flag: str) -> argparse.Action:
    parser = build_parser()
    sub = parser
    for name in argv_command:
        sub = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices[
            name
        ]
    return next(a for a in sub._actions if flag in a.option_strings)


def test_retriever_choices_are_the_registry_names_in_flags_and_widgets():
    names = list_retrievers()
    assert _action(["run"], "--retriever").choices == names
    assert _action(["run-interventions"], "--retriever").choices == names
    spec = widget_spec(retriever_param())
    assert spec.kind == "selectbox" and spec.kwargs["options"] == names
    assert spec.kwargs["options"][spec.kwargs["index"]] == "lexical"


def test_parsed_defaults_are_the_declared_defaults():
    run = build_parser().parse_args(RUN)
    assert run.retriever == retriever_param().default == "lexical"
    assert (run.top_k, run.chunk_size, run.overlap) == (3, 220, 40)
    assert (run.top_k, run.chunk_size, run.overlap, run.concurrency) == (
        TOP_K.default,
        CHUNK_SIZE.default,
        OVERLAP.default,
        CONCURRENCY.default,
    )
    cuer = build_parser().parse_args(CUER)
    assert cuer.top_k == interventions.BASE_TOP_K.default == 5
    assert cuer.operators == "remove,replace,duplicate"
    assert cuer.duplicate_positions == "end" and cuer.two_support is True
    probe = build_parser().parse_args(PROBES)
    assert (probe.units, probe.per_length, probe.strategy, probe.max_spans, probe.seed) == tuple(
        p.default for p in probes.PARAMS
    )
    assert (probe.strategy, probe.max_spans) == ("paper", 100)  # the seed's sampling
    crux = build_parser().parse_args(["report", "crux", "--dataset", "d"])
    assert crux.k == [3] and crux.retrievers == "lexical"
    rep = build_parser().parse_args(["report", "interventions", "--run", "r"])
    assert (rep.eps, rep.tau) == (interventions.EPS.default, interventions.TAU.default)


def test_widget_specs_carry_the_declared_default_range_and_help():
    top = widget_spec(TOP_K)
    assert top.kind == "number_input"
    assert top.kwargs["value"] == 3 and top.kwargs["min_value"] == 1
    assert top.kwargs["help"] == TOP_K.help == _action(["run"], "--top-k").help
    assert widget_spec(interventions.TWO_SUPPORT).kind == "checkbox"
    assert widget_spec(probes.STRATEGY).kind == "text_input"
    ops = widget_spec(interventions.OPERATORS_PARAM)
    assert ops.kind == "multiselect" and ops.kwargs["default"] == ["remove", "replace", "duplicate"]
    units = widget_spec(probes.UNITS_PARAM)
    assert units.kind == "selectbox" and units.kwargs["options"] == ["sentence", "passage"]


def test_changing_a_declaration_changes_the_flag_and_the_widget(monkeypatch):
    seven = TOP_K.with_default(7)
    monkeypatch.setattr(engine_commands, "TOP_K", seven)
    assert build_parser().parse_args(RUN).top_k == 7
    assert widget_spec(seven).kwargs["value"] == 7
    parser = argparse.ArgumentParser()
    add_argument(parser, Param("lam", float, 0.25, "a knob", minimum=0.0))
    assert parser.parse_args([]).lam == 0.25 and parser.parse_args(["--lam", "2"]).lam == 2.0


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (RUN + ["--top-k", "0"], "'top_k' must be >= 1"),
        (RUN + ["--retriever", "bm99"], "'retriever': 'bm99' is not one of lexical"),
        (RUN + ["--chunk-size", "abc"], "'chunk_size' expects int"),
        (RUN + ["--concurrency", "0"], "'concurrency' must be >= 1"),
        (PROBES + ["--strategy", "every"], "'strategy': unknown strategy 'every'"),
        (PROBES + ["--units", "token"], "'units': 'token' is not one of sentence, passage"),
        (PROBES + ["--per-length", "0"], "'per_length' must be >= 1"),
        (PROBES + ["--max-spans", "0"], "'max_spans' must be >= 1"),
        (CUER + ["--top-k", "-1"], "'top_k' must be >= 1"),
        (["report", "interventions", "--run", "r", "--eps", "2"], "'eps' must be <= 1"),
        (["report", "crux", "--dataset", "d", "--k", "3,x"], "'k' expects int, got 'x'"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_parameter(argv, named, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"parameter {named}" in err, err


def test_coerce_is_the_one_check_for_code_widgets_and_flags():
    with pytest.raises(ValueError, match="parameter 'k' must be >= 1, got 0"):
        TOP_K.coerce(0)
    assert TOP_K.many((3,)).coerce("1, 5") == [1, 5]
    assert probes.STRATEGY.coerce("take-every-5") == "take-every-5"
    with pytest.raises(ValueError, match="parameter 'hardness'"):
        interventions.REPLACE_LEVEL.coerce("extreme")
    assert split_csv(["a", " b ", ""]) == ["a", "b"] and split_csv("a, b") == ["a", "b"]


def _widgets_app() -> None:
    import streamlit as st

    from core.dolce import probes
    from screens.parts.widgets import param_widgets

    values = param_widgets(probes.PARAMS, "t")
    st.text(repr(sorted(values.items())))


def test_param_widgets_render_the_declarations():
    at = AppTest.from_function(_widgets_app).run()
    assert not at.exception
    defaults = {
        "units": "sentence",
        "per_length": 5,
        "strategy": "paper",
        "max_spans": 100,
        "seed": 0,
    }
    assert at.text[0].value == repr(sorted(defaults.items()))
    assert at.selectbox(key="t.units").options == ["sentence", "passage"]
    assert at.number_input(key="t.per_length").value == 5
    assert at.text_input(key="t.strategy").value == "paper"
    at.number_input(key="t.per_length").set_value(12).run()
    assert "('per_length', 12)" in at.text[0].value
