"""Backend preflight: what would make a launch fail, asked of the server before the first call.

:func:`preflight` checks, for a backend kind and model, what the Runs page asks before it
launches a run (issue 18 item 3):

- ``ollama``: every host answers (``/api/version`` and ``/api/tags`` through the real
  ``ollama`` client), the model is pulled there (in ``/api/tags``), and the longest prompt of
  the plan fits the context: the run's ``num_ctx`` (default 32768, :func:`core.commands.run.
  run_options`), or the model's own ``*.context_length`` from ``/api/show`` ``model_info`` when
  that is smaller.
- ``openai``: ``GET {base_url}/models`` answers, lists the model, and the longest prompt fits
  its ``max_model_len`` / ``context_length`` (or the given ``num_ctx``); with several base
  URLs, each one is checked (one line per endpoint that fails).
- ``embedded``: nothing to check.

The prompt is measured in characters (:func:`core.execution.jobs.longest_prompt_chars`) and turned
into
tokens two ways: the backends' own lower bound (characters / 6, :func:`core.backends.support.
min_prompt_tokens`), which no prompt undercuts, so reaching the context means the calls will be
refused or truncated; and a typical count (characters / :data:`TYPICAL_CHARS_PER_TOKEN`), which
says the prompt may not fit. Both are ``context`` problems: the only kind a user may launch
anyway (a typical estimate can be wrong). Nothing here raises for an unreachable server; every
problem is one line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.backends.endpoints import resolve_base_urls
from core.backends.support import DEFAULT_CHARS_PER_TOKEN

__all__ = ["DEFAULT_NUM_CTX", "TYPICAL_CHARS_PER_TOKEN", "Problem", "preflight"]

#: The context an Ollama run loads the model with unless ``--num-ctx`` says otherwise.
DEFAULT_NUM_CTX = 32768
#: Characters per token of ordinary English text with current tokenizers (about 4); the
#: "may not fit" estimate divides by it. The backends' lower bound divides by 6.
TYPICAL_CHARS_PER_TOKEN = 4.0
#: The checks a problem can come from; only ``context`` may be overridden by the user.
CHECKS = ("server", "model", "context")


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason not to launch.

    Attributes:
        check: ``server`` (unreachable, bad URL), ``model`` (none given, not pulled or not
            served) or ``context`` (the longest prompt does not or may not fit).
        text: one line saying what is wrong and what to do.
    """

    check: str
    text: str

    def __str__(self) -> str:
        return self.text


def preflight(
    backend: str,
    model: str | None,
    *,
    hosts: Sequence[str] | None = None,
    base_url: str | Sequence[str] | None = None,
    prompt_chars: int = 0,
    num_ctx: int | None = None,
    timeout_s: float = 2.0,
) -> list[Problem]:
    """What would make a launch on ``backend`` fail; an empty list when nothing would.

    Args:
        backend: ``embedded``, ``ollama`` or ``openai``.
        model: the model name (required by the server backends).
        hosts: Ollama hosts (default ``OLLAMA_HOST``, else the local default).
        base_url: the OpenAI-compatible endpoint, or several (default ``OPENAI_BASE_URL``,
            comma-separated).
        prompt_chars: characters of the plan's longest prompt (0: no context check).
        num_ctx: the run's ``--num-ctx`` (None: Ollama's run default, or the server's own).
        timeout_s: seconds each request may take.

    Returns:
        The problems, server first; a server that does not answer gives only that one.
    """
    if backend == "embedded":
        return []
    if not model or not str(model).strip():
        return [Problem("model", f"the {backend} backend needs a model name (Model field)")]
    model = str(model).strip()
    if backend == "ollama":
        return _ollama(model, hosts, prompt_chars, num_ctx, timeout_s)
    if backend == "openai":
        return _openai(model, base_url, prompt_chars, num_ctx, timeout_s)
    return [Problem("server", f"unknown backend {backend!r}; choose embedded, ollama or openai")]


def _context(prompt_chars: int, size: int | None, where: str) -> list[Problem]:
    """The context problem of a prompt of ``prompt_chars`` characters in ``size`` tokens."""
    if not prompt_chars or not size:
        return []
    bound = math.floor(prompt_chars / DEFAULT_CHARS_PER_TOKEN)
    typical = math.ceil(prompt_chars / TYPICAL_CHARS_PER_TOKEN)
    if bound >= size:
        return [
            Problem(
                "context",
                (
                    f"the longest prompt has at least {bound:,} tokens ({prompt_chars:,} "
                    "characters / "
                    f"{DEFAULT_CHARS_PER_TOKEN:g}), over the context of {size:,} ({where}): its "
                    "calls "
                    "will fail; raise num_ctx or shorten the plan"
                ),
            )
        ]
    if typical >= size:
        return [
            Problem(
                "context",
                (
                    f"the longest prompt has about {typical:,} tokens ({prompt_chars:,} "
                    "characters / "
                    f"{TYPICAL_CHARS_PER_TOKEN:g}), over the context of {size:,} ({where}): it "
                    "may not "
                    "fit; raise num_ctx, or launch anyway"
                ),
            )
        ]
    return []


def _ollama(
    model: str,
    hosts: Sequence[str] | None,
    prompt_chars: int,
    num_ctx: int | None,
    timeout_s: float,
) -> list[Problem]:
    # imported here: the ollama client and httpx are slow imports, needed only for this backend
    import httpx
    import ollama

    from core.backends.ollama import resolve_hosts, server_status

    try:
        urls = resolve_hosts(hosts)
    except ValueError as exc:
        return [Problem("server", str(exc))]
    problems: list[Problem] = []
    for row in server_status(urls, timeout_s=timeout_s):
        url = row["host"]
        if not row["reachable"] or row.get("error"):
            problems.append(Problem("server", row.get("error") or f"no answer from {url}"))
            continue
        pulled = row["models"]
        if model not in pulled and f"{model}:latest" not in pulled:
            have = ", ".join(pulled[:10]) or "none"
            problems.append(
                Problem(
                    "model",
                    (
                        f"model {model!r} is not pulled on {url} (pulled: {have}): run `ollama "
                        "pull "
                        f"{model}`"
                    ),
                )
            )
            continue
        size = int(num_ctx or DEFAULT_NUM_CTX)
        where = f"num_ctx={size}" + ("" if num_ctx else ", the run default")
        try:
            with ollama.Client(host=url, timeout=httpx.Timeout(timeout_s)) as client:
                info = client.show(model).modelinfo or {}
        except Exception as exc:
            problems.append(Problem("model", f"{url} did not describe {model!r}: {exc}"[:300]))
            continue
        own = _context_length(info)
        if own is not None and own < size:
            size, where = own, f"{model}'s context_length on {url}"
        problems += _context(prompt_chars, size, where)
    return problems


def _context_length(model_info: Any) -> int | None:
    """The ``<architecture>.context_length`` of ``/api/show``'s ``model_info``, if any."""
    for key, value in dict(model_info).items():
        if str(key).endswith(".context_length") and isinstance(value, int) and value > 0:
            return value
    return None


def _openai(
    model: str,
    base_url: str | Sequence[str] | None,
    prompt_chars: int,
    num_ctx: int | None,
    timeout_s: float,
) -> list[Problem]:
    try:
        urls = resolve_base_urls(base_url)
    except ValueError as exc:
        return [Problem("server", str(exc))]
    return [p for url in urls for p in _openai_one(model, url, prompt_chars, num_ctx, timeout_s)]


def _openai_one(
    model: str, url: str, prompt_chars: int, num_ctx: int | None, timeout_s: float
) -> list[Problem]:
    """The problems of one OpenAI-compatible endpoint (``url``: its ``/v1`` base)."""
    # imported here: httpx is a slow import, needed only for this backend
    import httpx

    headers = {}
    if key := os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = f"Bearer {key}"
    try:
        r = httpx.get(f"{url}/models", headers=headers, timeout=timeout_s)
    except httpx.ConnectError:
        return [
            Problem(
                "server",
                (
                    f"cannot reach the OpenAI-compatible server at {url}: start it (e.g. `vllm "
                    "serve "
                    "MODEL`) or fix the base URL"
                ),
            )
        ]
    except httpx.HTTPError as exc:
        return [Problem("server", f"no answer from {url}/models: {type(exc).__name__}")]
    if r.status_code != 200:
        return [Problem("server", f"HTTP {r.status_code} from {url}/models")]
    try:
        data = r.json().get("data")
    except (ValueError, AttributeError):
        data = None
    if not isinstance(data, list):
        return [Problem("server", f"{url}/models is not an OpenAI model list (is the URL right?)")]
    entries = {str(m.get("id")): m for m in data if isinstance(m, dict)}
    if model not in entries:
        have = ", ".join(list(entries)[:10]) or "none"
        return [Problem("model", f"model {model!r} is not served by {url} (it serves: {have})")]
    entry = entries[model]
    own = entry.get("max_model_len") or entry.get("context_length")
    size = num_ctx or (own if isinstance(own, int) and own > 0 else None)
    where = f"num_ctx={size}" if num_ctx else f"{model}'s max_model_len on {url}"
    return _context(prompt_chars, size, where)
