"""The counting judge on hand-made parameter sets whose outputs are exact dyadic numbers.

Construction used throughout (linear attention, no norm, d = 4, so tau = 1/2 exactly):
e_s = e_a = 2 e_1.  Then every score is tau <2 e_1, 2 e_1> = 2, A_n = 2 e_s + n 2 e_a = (4 + 4n) e_1
and r_n = e_s + A_n = (6 + 4n) e_1: the residual moves along a line, by exactly 4 per count.

* regression with w = k e_1: y(n) = k (6 + 4n) + w0, slope 4k;
* classification with u_c = (c/4) e_1 and b_c = -3c/2 - c^2/2 + delta_c:
  logit_c(n) = c n - c^2/2 + delta_c, so the margin of n against c is (c-n)^2/2 + delta_n - delta_c.

All these numbers are exact in float64, mpmath and ball arithmetic, so the verdicts on the
boundary |y - n| = 1/2 and on ties are decided by the rule itself, not by rounding.
"""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.cell import Cell, Params
from helpers import as_mp_list, examples, random_params
from verify import CountResult, counts_to, judge, reduced

BACKENDS = ["float64", "mp50", "arb256"]

# On the ball backend min_margin is a rigorous lower bound computed in floats from the
# enclosures (with a float error radius), and worst_error is |y - n| rounded to a float; elsewhere
# both are the exact values here.  1e-12 is far above those radii for the O(10) magnitudes below.
SLACK = 1e-12


def check_worst_error(res, value):
    if res.backend.startswith("arb"):
        assert abs(res.worst_error - value) <= SLACK
    else:
        assert res.worst_error == value


def check_min_margin(res, value):
    if res.backend.startswith("arb"):
        assert value - SLACK <= res.min_margin <= value
    else:
        assert res.min_margin == value



def line_regression(slope, intercept):
    """Parameters with y(n) = slope * n + intercept exactly (slope, intercept dyadic)."""
    cell = Cell("linear", "none", "regression", d=4)
    k = F(slope) / 4
    w0 = F(intercept) - 6 * k
    return Params(cell, {"e_s": [2, 0, 0, 0], "e_a": [2, 0, 0, 0], "w": [float(k), 0, 0, 0]},
                  {"w0": float(w0)})


def line_classifier(deltas):
    cell = Cell("linear", "none", "classification", d=4)
    L = len(deltas) - 1
    u = [[c / 4, 0, 0, 0] for c in range(L + 1)]
    b = [float(F(-3 * c, 2) - F(c * c, 2) + F(deltas[c])) for c in range(L + 1)]
    return Params(cell, {"e_s": [2, 0, 0, 0], "e_a": [2, 0, 0, 0], "u": u}, {"b": b})


def margins(deltas):
    """Exact margins by hand: min over c != n of (c - n)^2 / 2 + delta_n - delta_c."""
    L = len(deltas) - 1
    return [min(F((c - n) ** 2, 2) + F(deltas[n]) - F(deltas[c]) for c in range(L + 1) if c != n)
            for n in range(L + 1)]


# ------------------------------------------------------------------ regression


def test_line_construction_is_what_the_docstring_says():
    p = line_regression(1, 0)
    for backend in BACKENDS:
        assert [float(x) for x in as_mp_list(reduced(p, range(8), backend=backend))] == list(range(8))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("L", [1, 10, 300])
def test_exact_counter_counts(backend, L):
    res = counts_to(line_regression(1, 0), L, backend)
    assert isinstance(res, CountResult)
    assert res.verdict == "counts" and res.counts and bool(res)
    assert res.first_failure is None and res.undecided == ()
    assert res.L == L and res.backend == backend
    check_worst_error(res, 0.0)
    assert res.min_margin is None and res.min_margin_at is None
    # certified only by the rigorous ball backend, never by floats or mpmath
    assert res.certified is (backend == "arb256")


@pytest.mark.parametrize("backend", BACKENDS)
def test_slope_off_fails_at_the_right_count(backend):
    # y = (1 + 3/16) n: error 3n/16 -> 0.375 at n=2 (fine), 0.5625 at n=3 (first failure)
    res = counts_to(line_regression(F(19, 16), 0), 5, backend)
    assert res.verdict == "fails" and not res
    assert res.first_failure == 3
    assert res.worst_error_at == 5 and res.worst_error == pytest.approx(15 / 16, abs=1e-15)
    assert res.worst_error >= 15 / 16  # an upper bound on every backend (exact here)
    assert not res.certified


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_exactly_one_half_never_counts(backend):
    # y = (9/8) n: error n/8 is exactly 1/2 at n = 4; the rule |y - n| < 1/2 is strict
    p = line_regression(F(9, 8), 0)
    res = counts_to(p, 4, backend)
    assert not res.counts and not res.certified
    assert res.worst_error_at == 4
    check_worst_error(res, 0.5)
    res3 = counts_to(p, 3, backend)
    assert res3.verdict == "counts" and res3.worst_error_at == 3
    check_worst_error(res3, 0.375)


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_exactly_one_half_fails(backend):
    """The exact boundary is decided, not left open, also on balls (the outputs are exact)."""
    res = counts_to(line_regression(F(9, 8), 0), 4, backend)
    assert res.verdict == "fails" and res.first_failure == 4 and res.undecided == ()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("intercept", [F(1, 2), F(-1, 2)])
def test_offset_of_one_half_never_counts(backend, intercept):
    res = counts_to(line_regression(1, intercept), 6, backend)
    assert not res.counts and not res.certified
    check_worst_error(res, 0.5)
    assert res.verdict == "fails" and res.first_failure == 0 and res.undecided == ()


@pytest.mark.parametrize("backend", BACKENDS)
def test_offset_just_below_one_half_counts(backend):
    res = counts_to(line_regression(1, F(1, 2) - F(1, 2**40)), 6, backend)
    assert res.verdict == "counts"
    assert res.worst_error == pytest.approx(0.5 - 2**-40, abs=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_worst_error_position_not_at_the_end(backend):
    # y = 3n/4 + 7/16: errors 7/16, 3/16, -1/16, -5/16, -9/16
    p = line_regression(F(3, 4), F(7, 16))
    res = counts_to(p, 3, backend)
    assert res.verdict == "counts" and res.worst_error_at == 0
    check_worst_error(res, 7 / 16)
    res = counts_to(p, 4, backend)
    assert res.verdict == "fails" and res.first_failure == 4 and res.worst_error_at == 4
    check_worst_error(res, 9 / 16)


# ------------------------------------------------------------------ classification

DELTAS = [0, F(1, 8), 0, F(3, 16), F(1, 32), F(-1, 16)]


def test_hand_margins_are_what_we_think():
    m = margins(DELTAS)
    assert min(m) == F(5, 16) and m.index(min(m)) == 2 and m.count(min(m)) == 1
    assert all(x > 0 for x in m)


@pytest.mark.parametrize("backend", BACKENDS)
def test_classifier_counts_with_reported_margin(backend):
    p = line_classifier(DELTAS)
    res = counts_to(p, 5, backend)
    assert res.verdict == "counts" and res.first_failure is None
    assert res.min_margin_at == 2
    assert res.worst_error is None and res.worst_error_at is None
    check_min_margin(res, 5 / 16)
    assert res.certified is (backend == "arb256")


@pytest.mark.parametrize("backend", BACKENDS)
def test_classifier_wrong_class_fails(backend):
    deltas = list(DELTAS)
    deltas[4] = F(-1)  # class 4 loses to class 3 at n = 4: margin 1/2 - 1 - 3/16 < 0
    m = margins(deltas)
    assert [n for n in range(6) if m[n] <= 0] == [4]
    res = counts_to(line_classifier(deltas), 5, backend)
    assert res.verdict == "fails" and res.first_failure == 4
    assert res.min_margin_at == 4
    check_min_margin(res, float(m[4]))


TIE = [0, 0, 0, F(-1, 2), 0, 0]  # at n = 3 the logits of classes 2, 3 and 4 are all equal to 4


def test_tie_by_hand():
    assert margins(TIE)[3] == 0 and all(m > 0 for n, m in enumerate(margins(TIE)) if n != 3)
    logits = [float(x) for x in as_mp_list(reduced(line_classifier(TIE), [3], backend="mp50")[0])]
    assert logits[2] == logits[3] == logits[4] == 4.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_tie_must_fail(backend):
    """n must be the *unique* argmax: an exact tie is a failure (decided, also on balls)."""
    res = counts_to(line_classifier(TIE), 5, backend)
    assert res.verdict == "fails" and res.first_failure == 3 and res.undecided == ()
    assert not res.certified
    assert res.min_margin_at == 3 and res.min_margin <= 0


@pytest.mark.parametrize("extra", [0, 1])
def test_many_tied_classes_cannot_certify_rather_than_guess(extra):
    """Every logit equal: no count is the unique argmax.  The float enclosure leaves every count
    open; balls settle a tie against at most MAX_BALL_CLASSES competitors (then: fails), beyond
    that the count stays undecided (cannot certify) -- never counts."""
    L = judge.MAX_BALL_CLASSES + extra
    cell = Cell("linear", "none", "classification", d=4)
    p = Params(cell, {"e_s": [2, 0, 0, 0], "e_a": [2, 0, 0, 0], "u": [[0.25, 0, 0, 0]] * (L + 1)},
               {"b": [0.5] * (L + 1)})
    res = counts_to(p, L, "arb256")
    if extra:
        assert res.verdict == "cannot certify" and res.undecided == tuple(range(L + 1))
    else:
        assert res.verdict == "fails" and res.first_failure == 0 and res.undecided == ()
    assert counts_to(p, L, "float64").first_failure == 0


# ------------------------------------------------------------------ judge vs the rule, random


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("variant,kind,affine", [
    ("none", "layernorm", None), ("pre_learned", "layernorm", None), ("post_bare", "layernorm", None),
    ("pre_bare", "rmsnorm", None), ("post_learned", "rmsnorm", "gain"),
    ("post_learned", "rmsnorm", "gain_bias"), ("post_learned", "layernorm", "gain")])
@settings(max_examples=examples(10))
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(1, 30), slope=st.floats(0.5, 2.0))
def test_regression_judge_agrees_with_the_rule(attention, variant, kind, affine, seed, L, slope):
    """Random parameters with w0 chosen so that y(0) is near 0 and w scaled so that the outputs
    spread over about [0, L]: some counts pass and some fail.  The judge on float64 must agree
    with the rule |y - n| < 1/2 applied by hand to the float64 outputs (LayerNorm and RMSNorm,
    every affine)."""
    cell = Cell(attention, variant, "regression", d=5, norm=kind, affine=affine)
    p = random_params(cell, np.random.default_rng(seed))
    y = reduced(p, range(L + 1))
    spread = y[-1] - y[0]
    if abs(spread) < 1e-9:
        return
    k = slope * L / spread
    V = dict(p.vectors, w=[float(x) * k for x in p.vectors["w"]])
    q = Params(cell, V, {"w0": 0.0})
    y = reduced(q, range(L + 1))
    q = Params(cell, V, {"w0": float(-y[0])})
    y = reduced(q, range(L + 1))
    err = np.abs(y - np.arange(L + 1))
    res = counts_to(q, L, "float64")
    bad = [n for n in range(L + 1) if not err[n] < 0.5]
    assert res.verdict == ("fails" if bad else "counts")
    assert res.first_failure == (bad[0] if bad else None)
    assert res.worst_error == pytest.approx(err.max()) and res.worst_error_at == int(np.argmax(err))
    # the ball backend agrees wherever the error is not within 1e-12 of 1/2
    if np.all(np.abs(err - 0.5) > 1e-12):
        assert counts_to(q, L, "arb256").verdict == res.verdict


def test_tiny_head_is_not_certified_by_an_underflowing_radius():
    """Head vectors below 1.5e-154: their float squares vanish, and a norm computed from them
    would be 0 and drop the rounding term of the radius.  Here the float logits pick class 0 at
    n = 0 while the exact ones (mpmath at 100 digits) pick class 1: the balls must not certify."""
    Z1 = 1.2345678901234567e10
    Z2 = float(np.nextafter(np.nextafter(np.nextafter(Z1, 0), 0), 0))
    t, s = 1.8474337369372327e-165, 8.937121780061447e-181
    cell = Cell("softmax", "none", "classification", d=2)
    p = Params(cell, {"e_s": [Z1 / 2, Z2 / 2], "e_a": [0.0, 1e13], "u": [[t, -t], [s, 0.0]]},
               {"b": [0.0, 0.0]})
    exact = counts_to(p, 1, "mp100")
    assert exact.verdict == "fails" and exact.first_failure == 0
    assert counts_to(p, 1, "arb256").verdict != "counts"


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.floats(allow_nan=False, allow_infinity=False, max_value=1e150,
                                        min_value=-1e150), min_size=3, max_size=3),
                     min_size=1, max_size=4))
def test_row_norms_bound_the_exact_norms_at_every_magnitude(rows):
    """The float norms the classification radius is built from are upper bounds, also for
    entries whose squares underflow (exact check in rationals)."""
    a = np.array(rows, dtype=np.float64)
    up = judge._row_norms(a)
    for row, bound in zip(rows, up):
        exact_sq = sum(F(x) ** 2 for x in row)
        assert F(float(bound)) ** 2 >= exact_sq
        if exact_sq > F(1e-300) ** 2:  # tight where the norm is a normal float
            assert F(float(bound)) ** 2 <= exact_sq * F(1 + 1e-12)
