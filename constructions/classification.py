"""Classification constructions: the largest margin a head of unit norm keeps.

With free biases the argmax is unchanged when every vector is scaled by ``c > 0`` (scale the
biases too), so in every cell the infimum of the bound ``B`` over counting heads is 0; what a
bounded head cannot escape is a shrinking *margin*.  We therefore fix every vector's norm to
at most 1 and maximise the smallest logit gap ``logit_n(z_n) - max_{c != n} logit_c(z_n)``
over ``n = 0..L``.

**One-dimensional read-out.**  If the outputs ``z_n`` vary only along a unit direction ``u``
with positions ``x_0 < x_1 < ... < x_L`` (``<u, z_n> = x_n`` + const), take ``u_c = k_c u``.
For neighbours the margin conditions ``l_n(x_n) - l_{n+1}(x_n) >= m`` and
``l_{n+1}(x_{n+1}) - l_n(x_{n+1}) >= m`` add up to ``(k_{n+1} - k_n)(x_{n+1} - x_n) >= 2m``;
summing over ``n`` with ``-1 <= k_c <= 1`` gives

    m <= 1 / sum_n 1/(x_{n+1} - x_n),

and equality holds for slopes rising from -1 to 1 in steps ``2m/(x_{n+1} - x_n)`` with the
breakpoints at the midpoints (the upper envelope is convex, so non-neighbours are beaten by a
neighbour).  Where the outputs are collinear (no norm and pre-norm: they lie on the segment or
line of :mod:`constructions.regression`) every head is of this form and the bound is the exact
max-min margin for the chosen shape (the shape itself is optimised numerically).  After
post-norm the outputs lie on an arc; the construction reads its projection on the chord
direction, which gives a certified (not proven optimal) margin.

Positions per family, at unit budget (``f_t`` as in the regression reduction):

* segment: ``x_n = X n/(rho+n)`` with ``X`` the largest ``|h_a - h_s|`` at budget 1, so
  ``m(rho) = X rho / (L rho^2 + L^2 rho + (L^3 - L)/3)``; ``rho`` is bounded at unit norm,
  hence ``m ~ L^-3``;
* line: ``x_n = kappa n``, ``kappa`` the capacity at budget 1: ``m = kappa / L``;
* arc: ``x_n = S x/sqrt(lam^2 + x^2)``, ``x = n - L/2``, ``S`` the capacity at budget 1:
  ``sqrt(d)`` (bare, read along the kind's top axis) or ``sqrt(d) a`` (a gain ``g = e_1``, ``a``
  the kind's axis reach: ``sqrt(d-1)`` for LayerNorm, ``sqrt(d)`` for RMSNorm): ``m ~ L^-2``.

The scale ``S`` of every family is the capacity of :func:`constructions.laws.capacity` at
budget 1 (the regression amplitude a unit read-out reaches at that shape).

Cost of a row: the head has ``(L+1) d`` exact numbers (``O(L d)`` work and memory to build,
store and bound), and certifying it compares every count with every class, ``(L+1)^2 d``
multiply-adds (:func:`verify.judge.check_cost`).  :func:`check_size` refuses either beyond its
limit before anything is built.
"""

from __future__ import annotations

import functools

import mpmath
import numpy as np
import sympy

from constructions import basis, laws, zoom
from constructions.cell import Cell, Params
from constructions.regression import FOOT_SLACK, axes, family
from constructions.regression import design as regression_design
from constructions.symbols import E1
from verify.judge import check_cost

#: theory exponent of the max-min margin in L, per family
MARGIN_EXPONENT = {"segment": -3.0, "line": -1.0, "arc": -2.0}
#: The most entries ``(L+1) d`` of a head: each is an exact number, held as mpf, as a float
#: and (while its norm is bounded) as a ball.  A certified row at the limit (L = 4096, d = 511)
#: peaks at about 850 MiB and takes under a minute; L = 65536 at d = 8 peaks at about 320 MiB.
MAX_HEAD_ENTRIES = 1 << 21


def check_size(cell: Cell, L: int) -> None:
    """Refuse, with a ``ValueError`` naming the limit, a classification row too large to run:
    a head of ``(L+1) d > MAX_HEAD_ENTRIES`` entries, or a certification beyond the judge's
    limits (:func:`verify.judge.check_cost` on the ball backend)."""
    entries = (L + 1) * cell.d
    if entries > MAX_HEAD_ENTRIES:
        raise ValueError(
            f"a classification head at L = {L}, d = {cell.d} has (L+1) d = {entries} entries, "
            f"beyond the limit MAX_HEAD_ENTRIES = {MAX_HEAD_ENTRIES} "
            "(constructions.classification.MAX_HEAD_ENTRIES)")
    check_cost(cell, L, "arb256")


def positions(cell: Cell, t_value, L_value: int, ctx=np):
    """Positions ``x_0..x_L`` of the outputs along the read-out direction at unit budget."""
    n = np.arange(L_value + 1, dtype=object if ctx is mpmath else float)
    fam = family(cell)
    if ctx is mpmath:
        n = np.array([mpmath.mpf(int(v)) for v in n], dtype=object)
    if fam == "segment":
        return n / (t_value + n)
    if fam == "line":
        return n
    foot = laws.foot_distance(cell, 1, laws.MPMATH if ctx is mpmath else laws.FLOAT)
    if foot is not None:  # the one-sided arc read along its line (psi = pi/2), foot at budget 1
        xs = n + (foot + (mpmath.mpf(FOOT_SLACK) if ctx is mpmath else float(FOOT_SLACK)))
    else:
        xs = n - ctx.mpf(L_value) / 2 if ctx is mpmath else n - L_value / 2
    sq = np.frompyfunc(mpmath.sqrt, 1, 1) if ctx is mpmath else np.sqrt
    return xs / sq(t_value**2 + xs**2)


class ClassificationDesign:
    """The unit-norm classification construction of one cell (module docstring)."""

    def __init__(self, cell: Cell):
        if cell.readout != "classification":
            raise ValueError("ClassificationDesign is for classification cells")
        self.cell = cell
        self.family = family(cell)
        # the geometry (embeddings, gains) is the regression construction's at budget 1
        self.geometry = regression_design(cell.replace(readout="regression"))

    def scale(self, t_value, ctx=np):
        """Length ``S`` multiplying the positions: the law's capacity at budget 1
        (:func:`constructions.laws.capacity`), the spread of the outputs along the read-out
        direction per unit read-out norm."""
        cap = self.geometry.capacity_mp if ctx is mpmath else self.geometry.capacity
        tv = 1.0 if self.family == "line" else t_value
        return cap(tv, 1 if ctx is np else mpmath.mpf(1))

    def margin(self, t_value, L_value: int):
        """Float64 1-D max-min margin at shape(s) ``t`` (a screen; -inf where degenerate)."""
        tv = np.atleast_1d(np.asarray(t_value, dtype=np.float64))
        x = np.stack([positions(self.cell, v, L_value) for v in tv])
        gaps = np.diff(x, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.asarray(self.scale(tv), dtype=np.float64) * np.ones(len(tv))
            m = scale / np.sum(1.0 / gaps, axis=1)
        m[~(np.isfinite(m) & (gaps > 0).all(axis=1))] = -np.inf
        return m if np.ndim(t_value) else float(m[0])

    def best_shape(self, L_value: int):
        """The shape maximising the margin (None for the line family)."""
        if self.family == "line":
            return None
        dom = self.geometry.domain(L_value, 1.0)
        return zoom.maximize(lambda tt: self.margin(tt, L_value), dom[0], dom[1], points=33)[0]

    def build(self, L_value: int, dps: int = 50) -> Params:
        """Unit-norm head maximising the margin: geometry at budget 1 plus 1-D slopes.

        Refused up front (``ValueError``) beyond the limits of :func:`check_size`.
        """
        check_size(self.cell, L_value)
        t_value = self.best_shape(L_value)
        with mpmath.workdps(dps):
            tv = mpmath.mpf(t_value) if t_value is not None else mpmath.mpf(1)
            one = mpmath.mpf(1)
            # geometry: the regression construction at budget 1 (its w, w0 are not used)
            geo = self.geometry.evaluate(L_value, one, tv, one, 0)
            vec = {k: v for k, v in geo.items() if k not in ("w", "w0") and not k.startswith("_")}
            direction, offset, spread = self._line_of_outputs(geo, vec)
            x = positions(self.cell, tv, L_value, ctx=mpmath) * spread
            inv = [1 / gp for gp in np.diff(x)]
            m = 1 / mpmath.fsum(inv)
            k = [-one]
            for iv in inv:
                k.append(k[-1] + 2 * m * iv)
            k[-1] = min(k[-1], one)  # rounding must not push |u_L| above 1
            beta = [mpmath.mpf(0)]
            for c in range(L_value):
                beta.append(beta[-1] + (k[c] - k[c + 1]) * (x[c] + x[c + 1]) / 2)
            # shrink by 2^-50 so that the rounded direction cannot lift any |u_c| above 1
            k = [kc * (1 - mpmath.mpf(2) ** -50) for kc in k]
            beta = [bc * (1 - mpmath.mpf(2) ** -50) for bc in beta]
            vec["u"] = np.array([[kc * di for di in direction] for kc in k], dtype=object)
            b = [bc - kc * offset for bc, kc in zip(beta, k)]
            return Params(self.cell, vec, {"b": b})

    def _line_of_outputs(self, geo, vec):
        """``(u, offset, spread)`` with ``<u, z_n> = offset + spread * f(n)`` (module docstring)."""
        d = self.cell.d
        if self.family == "arc":
            # z = sqrt(d)(cos th across + sin th top) (regression.axes); bare: read along top;
            # with a gain: g = e_1 (norm 1), beta = 0, and <e_1, g * z> = sqrt(d) a sin th with
            # a = <e_1, top> the kind's axis reach: the spread is the law's capacity at budget 1
            spread = self.scale(None, mpmath)
            if self.cell.affine.gain:
                vec["g"] = _mp_vector(E1, d)
                if self.cell.affine.bias:
                    vec["beta"] = np.array([mpmath.mpf(0)] * d, dtype=object)
                return vec["g"], mpmath.mpf(0), spread
            return _mp_vector(axes(self.cell)[0], d), mpmath.mpf(0), spread
        h_s, h_a = geo["_h_s"], geo["_h_a"]
        tau = 1 / mpmath.sqrt(d)
        if self.family == "segment":
            # z_n = e_s + h_s + n/(rho+n) (h_a - h_s)
            delta = h_a - h_s
            spread = mpmath.sqrt(mpmath.fsum(delta * delta))
            direction, z0 = delta / spread, vec["e_s"] + h_s
        else:
            # z_n = e_s + tau <h_s,h_s> h_s + n tau <h_s,h_a> h_a
            norm_a = mpmath.sqrt(mpmath.fsum(h_a * h_a))
            direction = h_a / norm_a
            spread = tau * mpmath.fsum(h_s * h_a) * norm_a
            z0 = vec["e_s"] + tau * mpmath.fsum(h_s * h_s) * h_s
        return direction, mpmath.fsum(direction * z0), spread


def _mp_vector(axis, width: int) -> np.ndarray:
    """A frame vector (``c_1``, ``e_1``, ...) as a d-vector of mpf: its at most four distinct
    coordinates (:meth:`~constructions.basis.FrameVector.coordinates`) evaluated once, the last
    repeated (no d-long sympy vector)."""
    head = [mpmath.mpf(sympy.N(x, mpmath.mp.dps + 5)) for x in basis.frame_vector(axis, width).coordinates()]
    return np.array(head + head[-1:] * (width - len(head)), dtype=object)


@functools.lru_cache(maxsize=None)
def design(cell: Cell) -> ClassificationDesign:
    return ClassificationDesign(cell)
