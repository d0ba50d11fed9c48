"""Hypothesis strategies for property-testing weights of this layer (needs ``hypothesis``:
``pip install 'counting-cost[strategies]'``).

Draw inputs of a cell's task and parameter sets of a cell, then run them through the explicit
token-by-token pass (:func:`verify.explicit`)::

    from hypothesis import given
    from verify import explicit
    from verify.strategies import sequences, target

    @given(sequences(my_params.cell, max_length=4096))
    def test_my_weights_count(seq):
        assert abs(float(explicit(my_params, seq, "float64")) - target(seq)) < 0.5

* :func:`sequences` -- token strings ``s x_1 .. x_m``, ``m <= max_length``, with ``x_i`` in the
  task's tokens (``a``; ``a`` and ``b`` for ``select``) in random order.  Shrinking moves towards
  short sequences of ``a`` tokens.
* :func:`target` -- the number the layer must output (the count of ``a`` tokens).
* :func:`parameter_sets` -- parameters of a cell (every trainable vector and free scalar) with
  entries that are exact binary floats of bounded size, so every backend sees the same numbers.

A sequence of the strategy is one input; the judge (:func:`verify.counts_to`) decides every
input up to ``L`` at once, by the counts (:mod:`verify.inputs`).  The strategies are for what
the judge does not see: your own forward pass, a framework's kernels, or a check that the two
agree.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from constructions.cell import Cell, Params


def target(sequence: str) -> int:
    """The count the layer must output for ``sequence``: the number of ``a`` tokens."""
    return sequence.count("a")


def sequences(cell: Cell, max_length: int, min_length: int = 0) -> st.SearchStrategy[str]:
    """Token strings ``"s" + x_1..x_m`` with ``min_length <= m <= max_length`` over the tokens
    of ``cell``'s task, in random order (every order equally likely at a given composition)."""
    if not 0 <= min_length <= max_length:
        raise ValueError(f"need 0 <= min_length <= max_length, got {min_length}, {max_length}")
    tokens = cell.task.tokens

    @st.composite
    def draw(data):
        m = data(st.integers(min_length, max_length), label="length")
        if len(tokens) == 1:
            return "s" + tokens * m
        n_b = data(st.integers(0, m), label="b tokens")
        order = data(st.randoms(use_true_random=False), label="order")
        body = ["a"] * (m - n_b) + ["b"] * n_b
        order.shuffle(body)
        return "s" + "".join(body)

    return draw()


def parameter_sets(cell: Cell, classes: int | None = None, scale: float = 1.0,
                   max_magnitude: float = 4.0) -> st.SearchStrategy[Params]:
    """Parameters of ``cell``: each entry ``scale * x`` with ``x`` a float in
    ``[-max_magnitude, max_magnitude]`` (rounded to 16 significant bits, so that the
    parameters are exact binary numbers of moderate length); a classification head has
    ``classes`` rows (default 4).  Vectors that a norm kind cannot normalise (constant for
    LayerNorm, zero for RMSNorm) are redrawn when the norm has ``eps = 0``."""
    d = cell.d
    rows = classes if classes is not None else 4
    entry = st.floats(-max_magnitude, max_magnitude, allow_nan=False, allow_infinity=False)

    def vector(length):
        return st.lists(entry, min_size=length, max_size=length).map(
            lambda xs: scale * _short(np.array(xs, dtype=np.float64)))

    def normalisable(v):
        return cell.eps > 0 or bool(np.any(v != (v[0] if cell.kind.centred else 0)))

    names = cell.vector_names()
    parts = {}
    for name in names:
        if name == "u":
            parts[name] = st.lists(vector(d), min_size=rows, max_size=rows).map(np.array)
        elif name.startswith("e_") and cell.normed:
            parts[name] = vector(d).filter(normalisable)
        else:
            parts[name] = vector(d)
    scalars = ({"w0": entry.map(lambda x: float(_short(np.array([x]))[0]))}
               if cell.readout == "regression"
               else {"b": vector(rows)})
    return st.builds(lambda v, s: Params(cell, v, s), st.fixed_dictionaries(parts),
                     st.fixed_dictionaries(scalars))


def _short(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to 16 significant bits (exactly: a float64 with a short mantissa)."""
    mant, exp = np.frexp(x)
    return np.ldexp(np.round(np.ldexp(mant, 16)), exp - 16)
