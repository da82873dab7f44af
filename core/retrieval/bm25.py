"""BM25 (Okapi) scores equal to ``rank_bm25.BM25Okapi``'s, bit for bit, at a fraction of its cost.

The lexical retriever (:mod:`core.retrieval`) ranks an instance's chunks by
``BM25Okapi(corpus, k1, b).get_scores(query)`` of :func:`core.retrieval.retrievers.lexical_tokens`.
Planning a run did that for every instance: building the index (a dict of counts per chunk)
and the regular-expression tokenizer were about 70 % of the planning time (issue 17).
:func:`bm25_okapi_scores` computes the same numbers from arrays of token ids, and
:func:`chunk_tokens` tokenizes a text the way :func:`core.retrieval.retrievers.lexical_tokens` does,
with
byte operations when the text is ASCII (the regular expression otherwise).

Exactly the same numbers, because every floating-point operation is the reference's, in its
order (``tests/test_bm25_fast.py`` compares them on the HotpotQA fixture and controlled data):

- ``idf(w) = log(N - df(w) + 0.5) - log(df(w) + 0.5)`` with :func:`math.log`, N the number of
  documents and ``df(w)`` the documents containing ``w``;
- the floor: a word whose idf is negative (in more than half the documents) gets
  ``epsilon * average_idf`` (``epsilon`` 0.25), where ``average_idf`` is the sum of every
  word's idf, added one by one in the order the words first appear in the corpus, over the
  number of words (token ids are numbered in that order, and the sum is a cumulative sum);
- ``score(d) = sum over the query's tokens q, repeats included and in order, of
  idf(q) * tf(q, d) * (k1 + 1) / (tf(q, d) + k1 * (1 - b + b * len(d) / avgdl))``, a word the
  corpus lacks adding ``0 * ...`` as the reference does (so a zero denominator gives NaN in
  both).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Hashable, Sequence

import numpy as np

__all__ = ["EPSILON", "bm25_okapi_scores", "chunk_tokens"]

#: ``rank_bm25.BM25Okapi``'s default floor factor of negative idfs.
EPSILON = 0.25

# ASCII letters and digits kept (upper case lowered), every other byte a separator: on ASCII
# text, ``bytes.translate`` then ``bytes.split`` gives the runs ``[^\W_]+`` finds in the
# lowered text (for ASCII, the word characters other than "_" are exactly these).
_KEEP = b"abcdefghijklmnopqrstuvwxyz0123456789"
_TABLE = bytes(c + 32 if 65 <= c <= 90 else (c if c in _KEEP else 32) for c in range(256))


def chunk_tokens(text: str, token_re: re.Pattern[str]) -> list[bytes]:
    r"""The lowercase runs of letters and digits of ``text`` (UTF-8 bytes).

    Equal to ``[t.encode() for t in token_re.findall(text.lower())]`` with ``token_re`` the
    pattern ``[^\W_]+`` (given by :mod:`core.retrieval`, which owns it); ASCII text takes byte
    operations, any other text the pattern.
    """
    if text.isascii():
        return text.encode("ascii").translate(_TABLE).split()
    return [t.encode("utf-8", "surrogatepass") for t in token_re.findall(text.lower())]


@functools.lru_cache(maxsize=256)
def _idf_table(n_docs: int) -> list[float]:
    """``idf`` by document frequency 0..N, as the reference computes it (``math.log``)."""
    return [0.0] + [math.log(n_docs - df + 0.5) - math.log(df + 0.5) for df in range(1, n_docs + 1)]


def bm25_okapi_scores(
    corpus: Sequence[Sequence[Hashable]],
    query: Sequence[Hashable],
    k1: float = 1.5,
    b: float = 0.75,
    epsilon: float = EPSILON,
) -> np.ndarray:
    """``BM25Okapi(corpus, k1=k1, b=b, epsilon=epsilon).get_scores(query)``, the same floats.

    Args:
        corpus: the documents, each a sequence of tokens (any hashable values); at least one
            document, and at least one token in all (the reference divides by both).
        query: the query's tokens.
        k1: term-frequency saturation.
        b: length normalization.
        epsilon: the floor of negative idfs, as a share of the average idf.

    Returns:
        One float64 score per document.
    """
    n = len(corpus)
    vocab: dict[Hashable, int] = {}
    # Each new word's id is the position of its first occurrence in the whole corpus: ids
    # increase in the order the reference's dict first meets the words.
    tokens = itertools.chain.from_iterable(corpus)
    flat = np.fromiter(map(vocab.setdefault, tokens, itertools.count()), dtype=np.int64)
    lens = np.fromiter(map(len, corpus), dtype=np.int64, count=n)
    total = flat.size
    doc_of = np.repeat(np.arange(n, dtype=np.int64), lens)
    pairs = np.sort(doc_of * total + flat)
    pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]  # each (document, word) once
    df_by_id = np.bincount(pairs % total, minlength=total)
    word_ids = np.flatnonzero(df_by_id)  # ascending: first-appearance order
    table = _idf_table(n)
    idf_in_order = np.asarray(table, dtype=np.float64)[df_by_id[word_ids]]
    idf_sum = float(np.cumsum(idf_in_order)[-1])  # added one by one, in order
    average_idf = idf_sum / len(vocab)
    eps = epsilon * average_idf
    # Term frequencies of the query's words, per document.
    q_words = list(dict.fromkeys(w for w in query if w in vocab))
    tf = np.zeros((len(q_words), n), dtype=np.int64)
    if q_words:
        q_ids = np.array([vocab[w] for w in q_words], dtype=np.int64)
        order = np.argsort(q_ids)
        sorted_ids = q_ids[order]
        pos = np.searchsorted(sorted_ids, flat)
        pos[pos == len(sorted_ids)] = 0
        hit = sorted_ids[pos] == flat
        cell = order[pos[hit]] * n + doc_of[hit]
        tf = np.bincount(cell, minlength=len(q_words) * n).reshape(len(q_words), n)
    row_of = {w: i for i, w in enumerate(q_words)}
    zeros = np.zeros(n, dtype=np.int64)
    doc_len = lens
    avgdl = total / n
    score = np.zeros(n)
    for q in query:
        r = row_of.get(q)
        if r is None:
            idf_q: float = 0
            q_freq = zeros
        else:
            idf_q = table[int(df_by_id[vocab[q]])]
            if idf_q < 0:
                idf_q = eps
            q_freq = tf[r]
        # The reference's expression, operation for operation.
        score += (idf_q or 0) * (q_freq * (k1 + 1) / (q_freq + k1 * (1 - b + b * doc_len / avgdl)))
    return score
