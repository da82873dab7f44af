"""The ``ollama`` backend reads well-formed log-probabilities without the client's pydantic
model (issue 38 item 4: a fifth of the client's CPU a call), and gets exactly what the model
gave: the same entries, the same errors for malformed ones."""

from __future__ import annotations

import math

import ollama
import pydantic
import pytest

from core.backends.ollama import _plain_logprobs, _token_dict


def _through_model(entries):
    resp = ollama.ChatResponse(message={"role": "assistant", "content": "x"}, logprobs=entries)
    return [_token_dict(lp) for lp in (resp.logprobs or [])]


WELL_FORMED = [
    [],
    [{"token": "{", "logprob": -0.001}],
    [{"token": "a", "logprob": 0}],  # Go writes a float 0 as the JSON integer 0
    [{"token": "a", "logprob": -1.5, "bytes": [97], "top_logprobs": []}],
    [{"token": "a", "logprob": -1.5, "top_logprobs": None}],
    [
        {
            "token": "a",
            "logprob": -0.25,
            "bytes": [97],
            "top_logprobs": [
                {"token": "a", "logprob": -0.25, "bytes": [97]},
                {"token": "<alt1>", "logprob": -2.25},
            ],
        },
        {"token": "é", "logprob": float("-inf"), "top_logprobs": [{"token": "é", "logprob": -3}]},
    ],
]


@pytest.mark.parametrize("entries", WELL_FORMED)
def test_plain_path_gives_what_the_model_gives(entries):
    plain = _plain_logprobs(entries)
    assert plain is not None
    assert plain == _through_model(entries)
    for tok in plain:
        assert type(tok["logprob"]) is float
        for alt in tok.get("top_logprobs", []):
            assert type(alt["logprob"]) is float


@pytest.mark.parametrize(
    "entries",
    [
        None,
        {"token": "a"},
        [{"token": "a"}],
        [{"token": 1, "logprob": -1.0}],
        [{"token": "a", "logprob": "-1.0"}],  # the model coerces it: let it
        [{"token": "a", "logprob": True}],
        [{"token": "a", "logprob": 10**400}],
        [{"token": "a", "logprob": -1.0, "top_logprobs": "x"}],
        [{"token": "a", "logprob": -1.0, "top_logprobs": [{"token": "b"}]}],
        ["a"],
    ],
)
def test_anything_else_goes_through_the_model(entries):
    assert _plain_logprobs(entries) is None


def test_the_model_still_reports_a_malformed_entry():
    with pytest.raises(pydantic.ValidationError):
        _through_model([{"token": "a"}])
    assert math.isclose(_through_model([{"token": "a", "logprob": "-1.0"}])[0]["logprob"], -1.0)
