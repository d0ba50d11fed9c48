"""Classification constructions: the largest margin a head of unit norm keeps.

With free biases the argmax is unchanged when every vector is scaled by ``c > 0`` (scale the
biases too), so in every cell the infimum of the bound ``B`` over counting heads is 0; what a
bounded head cannot escape is a shrinking *margin*.  We therefore fix every vector's norm to
at most 1 and maximise the smallest logit gap ``logit_n(z_n) - max_{c != n} logit_c(z_n)``
over ``n = 0..L``.  :mod:`bounds.margin` proves an upper bound over all parameter sets.

**The pair inequality.**  For neighbours the margin conditions ``l_n(z_n) - l_{n+1}(z_n) >= m``
and ``l_{n+1}(z_{n+1}) - l_n(z_{n+1}) >= m`` add up to ``<u_{n+1} - u_n, z_{n+1} - z_n> >= 2m``
(the biases cancel); conversely, given the ``u_c``, the biases with
``b_{c+1} - b_c = -<u_{c+1} - u_c, (z_c + z_{c+1})/2>`` (breakpoints at the midpoints) give every
neighbour pair the margin ``<u_{c+1} - u_c, z_{c+1} - z_c>/2``.

**One-dimensional read-out (no norm, pre-norm).**  The outputs vary only along a unit direction
``u`` with positions ``x_0 < x_1 < ... < x_L`` (``<u, z_n> = x_n`` + const; they lie on the segment
or line of :mod:`constructions.regression`); take ``u_c = k_c u``.  The pair inequality reads
``(k_{n+1} - k_n)(x_{n+1} - x_n) >= 2m``; summing over ``n`` with ``-1 <= k_c <= 1`` gives

    m <= 1 / sum_n 1/(x_{n+1} - x_n),

and equality holds for slopes rising from -1 to 1 in steps ``2m/(x_{n+1} - x_n)`` with the
breakpoints at the midpoints (the upper envelope is convex, so non-neighbours are beaten by a
neighbour).  Every head is of this form up to parts orthogonal to ``u`` (which change no
logit), so for the chosen shape this is the max-min margin; the shape maximising it is found
numerically, and :mod:`bounds.margin` proves that no parameter set does better (the family's
margin at the optimal shape is the supremum there).

Positions per family, at unit budget (``f_t`` as in the regression reduction):

* segment: ``x_n = X n/(rho+n)`` with ``X`` the largest ``|h_a - h_s|`` at budget 1, so
  ``m(rho) = X rho / (L rho^2 + L^2 rho + (L^3 - L)/3)``; ``rho`` is bounded at unit norm,
  hence ``m ~ L^-3`` (``L^-2`` while ``L`` is below the largest attention ratio);
* line: ``x_n = kappa n``, ``kappa`` the capacity at budget 1: ``m = kappa / L``.

**The arc (post-norm).**  The outputs ``z_n = R unit(P + n Q)`` (``R = sqrt(d)``) lie on a
circle of a plane, and a head may read them in every direction of the plane.  The geometry:
the symmetric arc of the regression construction at budget 1, ``z_n = R (x top + lam across)/
sqrt(x^2 + lam^2)``, ``x = n - L/2``, with ``lam = q L`` (``q`` optimised numerically; about
1/4, an arc of some 127 degrees).  Bare, the head reads the plane coordinates ``y_n`` of ``z_n``
with ``u_c = v_1 top + v_2 across``.  With a gain the logit is ``<g * u_c, z_n>``: the arc's
plane is turned (an orthogonal map that fixes ``one``, under which the norm and the attention
are invariant, applied to the embeddings) to the plane of ``f_1, f_2`` at an angle ``omega``
(``f_1 = e_1, f_2 = e_2`` for RMSNorm; ``f_1 = c_1`` and ``f_2`` the unit part of the centred
``e_2`` orthogonal to it for LayerNorm), ``g = cos(chi) e_1 + sin(chi) e_2`` (a bias is 0) and
``u_c = v_1 e_1 + v_2 e_2``, so the head reads ``y_n = (cos(chi) z_n[1], sin(chi) z_n[2])``:
an arc of an ellipse.  ``q, omega, chi`` are optimised numerically.  Linear attention after
RMSNorm cannot put the foot of its residual line in the counted range
(:func:`constructions.laws.foot_distance`): its geometry is the one-sided arc of
:mod:`constructions.one_sided` at budget 1, ``z_n`` along ``(n + F) top - lam across`` with
``F = F(1)`` (read-out angle ``psi = pi/2``), and the same heads read it.

*The head on a convex arc* (:func:`circle_head`).  The points ``y_n`` are in convex position,
their chords ``y_{c+1} - y_c = l_c t_c`` turning anticlockwise by less than ``pi`` in total
(``phi_c`` the angle of ``t_c``).  Take every ``v_c`` on the unit circle, at angle ``psi_c``, and
write ``beta_c = psi_c - phi_c``; the pair inequality is ``cos(psi_{c+1} - phi_c) >=
cos(beta_c) + 2m/l_c``.  What step ``c+1`` needs of ``v_{c+1}`` is a small ``cos(beta_{c+1})``,
and ``beta_{c+1} = (psi_{c+1} - phi_c) - (phi_{c+1} - phi_c)``: so the best ``v_{c+1}`` is the
one with the smallest angle allowed, ``psi_{c+1} - phi_c = -arccos(cos(beta_c) + 2m/l_c)``,
clipped so that ``beta_{c+1} >= -pi`` (``cos`` is increasing on ``[-pi, 0]``).  Starting at
``v_0 = -t_0`` (``beta_0 = -pi``), this greedy rule keeps ``cos(beta_c)`` smallest at every step
among all heads on the circle (induction), so a margin ``m`` is reachable on the circle iff the
greedy never needs ``cos > 1``; bisection on ``m`` gives the best.  The middle biases above
give every neighbour pair that margin; that non-neighbours are beaten too (the envelope of
lines read along a convex arc) is certified by the judge for every row, not assumed.  The
resulting margin matches an independent optimisation over all heads for the same points
(tests), and :mod:`bounds.margin` bounds every parameter set: with the dual certificate of
:mod:`bounds.arc_margin` (this head's own weights) the bound is within 0.4% of this
construction at every ``L >= 8``, bare and with a gain, so the symmetric arc with its greedy
head is max-min to that tolerance.

**The select task.**  Where the distractor changes no output the head is the count task's on the
geometry with ``e_b``.  Softmax attention without post-norm moves the outputs off the segment,
towards ``e_s + h_b``: the head is then the level head of :mod:`constructions.pencil`
(separators parallel to the rays through that point), on a placement of the values searched
for that head's margin (with a learned pre-norm the geometry of :mod:`constructions.select` at
unit budget, its shape ``rho``).

The scale of the collinear families is the capacity of :func:`constructions.laws.capacity` at
budget 1 (the regression amplitude a unit read-out reaches at that shape).

Cost of a row: the head has ``(L+1) d`` exact numbers (``O(L d)`` work and memory to build,
store and bound; the arc's greedy is ``O(L)`` per bisection step), and certifying it compares
every count with every class, ``(L+1)^2 d`` multiply-adds (:func:`verify.judge.check_cost`).
:func:`check_size` refuses either beyond its limit before anything is built.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import sympy

from constructions import basis, laws, pencil, registry, zoom
from constructions.cell import Cell, Params
from constructions.regression import axes, family
from constructions.regression import design as regression_design
from verify.judge import check_cost

#: the arc's shape and head are optimised at this L (or at L itself if smaller); beyond it the
#: optimal ``q = lam/L``, ``omega`` and ``chi`` are taken over (they converge as L grows)
ARC_FIT_L = 128
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
    """Positions ``x_0..x_L`` of the collinear outputs (segment, line) along the read-out
    direction at unit budget, up to the scale :meth:`ClassificationDesign.scale`."""
    n = np.arange(L_value + 1, dtype=object if ctx is mpmath else float)
    if ctx is mpmath:
        n = np.array([mpmath.mpf(int(v)) for v in n], dtype=object)
    return n / (t_value + n) if family(cell) == "segment" else n


def _chords(y: np.ndarray, ends: np.ndarray | None = None):
    """Lengths ``l_c`` and unwrapped angles ``phi_c`` of the chords ``y_{c+1} - ends_c``
    (``ends = y``: the chords of consecutive points; classes spread along the arc: the chords
    between their facing ends, :func:`circle_head`)."""
    step = y[1:] - (y if ends is None else ends)[:-1]
    return np.hypot(step[:, 0], step[:, 1]), np.unwrap(np.arctan2(step[:, 1], step[:, 0]))


def _greedy(lengths, turns, m: float, path: bool = False):
    """The greedy rule of the module docstring at margin ``m``: False where it needs
    ``cos > 1``; else True, or (``path``) the angles ``beta_c`` of ``v_0..v_{L-1}`` and the
    angle of ``v_L`` relative to the last chord."""
    cb, b = -1.0, -math.pi
    betas = [b] if path else None
    last = len(lengths) - 1
    for c, (length, turn) in enumerate(zip(lengths.tolist(), turns.tolist() + [0.0])):
        v = cb + 2 * m / length
        if v > 1:
            return False
        ahead = -math.acos(v)
        if c == last:
            return (betas, ahead) if path else True
        b = max(ahead - turn, -math.pi)
        cb = math.cos(b)
        if path:
            betas.append(b)


def _anticlockwise(y: np.ndarray, ends: np.ndarray | None = None):
    """``(y', ends', mirror)``: the points mirrored (``y_2 -> -y_2``) if their chords turn clockwise."""
    _, phi = _chords(y, ends)
    mirror = np.array([1.0, -1.0 if len(phi) > 1 and phi[-1] < phi[0] else 1.0])
    return y * mirror, (y if ends is None else ends) * mirror, mirror


def circle_margin(y: np.ndarray, guess: float | None = None, rel: float = 1e-10,
                  ends: np.ndarray | None = None) -> float:
    """The largest margin reachable by the greedy head on the unit circle for the points ``y``
    (an ``(L+1, 2)`` float array in convex position), by bisection to relative tolerance
    ``rel`` (started around ``guess`` when given); points whose chords turn clockwise are
    mirrored first (``y_2 -> -y_2``).  ``ends``: as in :func:`circle_head`."""
    oriented, oriented_ends, _ = _anticlockwise(y, ends)
    lengths, phi = _chords(oriented, oriented_ends)
    turns = np.diff(phi)
    feasible = lambda m: _greedy(lengths, turns, m)
    lo, hi = 0.0, float(lengths.min())
    if guess is not None and 0 < guess < hi:
        a, b = guess * 0.98, min(guess * 1.02, hi)
        if feasible(a) and not feasible(b):
            lo, hi = a, b
    while hi - lo > rel * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    return lo


def circle_head(y: np.ndarray, guess: float | None = None, ends: np.ndarray | None = None):
    """``(v, m)``: the unit vectors ``v_0..v_L`` (an ``(L+1, 2)`` float array) of the greedy head
    at the largest margin ``m`` it reaches for the points ``y`` (:func:`circle_margin`; mirrored
    points give the mirrored head).

    *Classes spread along the arc* (``ends``): class ``c`` has outputs on the arc from ``y_c`` to
    ``ends_c`` (in the order of the classes).  The pair inequality of neighbours taken at their
    facing ends, ``<v_{c+1} - v_c, y_{c+1} - ends_c> >= 2m``, is that of the points with the
    chords ``y_{c+1} - ends_c``: the greedy rule runs on those chords unchanged, and
    :func:`middle_biases` with the same ``ends`` puts each breakpoint between the facing ends.
    That the outputs inside a class, and non-neighbours, are beaten is not assumed: the judge
    certifies every output."""
    oriented, oriented_ends, mirror = _anticlockwise(y, ends)
    lengths, phi = _chords(oriented, oriented_ends)
    m = circle_margin(oriented, guess, ends=oriented_ends)
    betas, ahead = _greedy(lengths, np.diff(phi), m, path=True)
    psi = np.append(phi + np.array(betas), phi[-1] + ahead)
    return np.column_stack([np.cos(psi), np.sin(psi)]) * mirror, m


def middle_biases(y: np.ndarray, v: np.ndarray, ends: np.ndarray | None = None) -> np.ndarray:
    """Float biases with ``b_{c+1} - b_c = -<v_{c+1} - v_c, (ends_c + y_{c+1})/2>``, ``b_0 = 0``
    (``ends = y`` by default)."""
    ends = y if ends is None else ends
    return np.concatenate([[0.0], np.cumsum(-np.sum(np.diff(v, axis=0) * (y[1:] + ends[:-1]), axis=1) / 2)])


def head_margin(y: np.ndarray, v: np.ndarray) -> float:
    """The smallest margin over every count and class of the head ``v`` with the middle biases
    on the points ``y`` (float64, ``O(L^2)``: a screen for shapes at moderate ``L``)."""
    logit = y @ v.T + middle_biases(y, v)
    own = np.diag(logit).copy()
    np.fill_diagonal(logit, -np.inf)
    return float(np.min(own - logit.max(axis=1)))


def collinear_head(x, direction, offset=0, upper=None):
    """``(u, b)``: the max-min head of unit norm on collinear outputs with ``<direction, z_n> =
    offset + x_n`` (``x`` increasing mpf, ``direction`` a unit d-vector of mpf): slopes
    ``k_c`` rising from -1 to 1 in steps ``2m/(x_{c+1} - x_c)``, ``m = 1/sum 1/(x_{c+1} - x_c)``,
    and breakpoints at the midpoints (module docstring), as the rows ``u_c = k_c direction``
    and the biases.  Slopes and biases are shrunk by ``2^-50`` so that the rounded direction
    cannot lift any ``|u_c|`` above 1.

    *Classes of several outputs* (``upper``): class ``c`` has outputs whose positions along
    ``direction`` lie in ``[x_c, upper_c]`` (``upper_c < x_{c+1}``).  The pair inequality of
    neighbours, taken at the facing ends ``upper_c`` and ``x_{c+1}``, gives ``(k_{c+1} - k_c)
    (x_{c+1} - upper_c) >= 2m``: the same head on the gaps ``x_{c+1} - upper_c``, with the
    breakpoints at ``(upper_c + x_{c+1})/2``.  Every output of class ``c`` is then beaten by
    every other class by at least ``m``: for ``j > c`` the logit difference ``l_c - l_j`` at a
    position ``p <= upper_c`` is ``sum_{i=c}^{j-1} (k_{i+1} - k_i)(t_i - p)`` (``t_i`` the
    breakpoints), every term non-negative and the first at least ``m``; ``j < c`` alike."""
    one = mpmath.mpf(1)
    upper = list(x) if upper is None else list(upper)
    inv = [1 / (x[c + 1] - upper[c]) for c in range(len(x) - 1)]
    m = 1 / mpmath.fsum(inv)
    k = [-one]
    for iv in inv:
        k.append(k[-1] + 2 * m * iv)
    k[-1] = min(k[-1], one)  # rounding must not push |u_L| above 1
    beta = [mpmath.mpf(0)]
    for c in range(len(x) - 1):
        beta.append(beta[-1] + (k[c] - k[c + 1]) * (upper[c] + x[c + 1]) / 2)
    k = [kc * (1 - mpmath.mpf(2) ** -50) for kc in k]
    beta = [bc * (1 - mpmath.mpf(2) ** -50) for bc in beta]
    rows = np.array([[kc * di for di in direction] for kc in k], dtype=object)
    return rows, [bc - kc * offset for bc, kc in zip(beta, k)]


class ClassificationDesign:
    """The unit-norm classification construction of one cell (module docstring)."""

    def __init__(self, cell: Cell):
        if cell.readout != "classification":
            raise ValueError("ClassificationDesign is for classification cells")
        self.cell = cell
        self.family = family(cell)
        # the geometry (embeddings, gains) is the regression construction's at budget 1
        self.geometry = regression_design(cell.replace(readout="regression"))
        #: the foot ``F(1)`` of the one-sided arc (None: the symmetric arc's is free)
        self.foot = None if laws.foot_distance(cell, 1) is None else self.geometry.foot(1.0)
        #: the select task on the segment: the level head of :mod:`constructions.pencil`
        self.pencil = (pencil.PencilDesign(cell)
                       if cell.distractor and self.family == "segment" else None)

    # ----------------------------------------------------------------- collinear outputs
    def scale(self, t_value, ctx=np):
        """Length ``S`` multiplying the collinear positions: the law's capacity at budget 1
        (:func:`constructions.laws.capacity`), the spread of the outputs along the read-out
        direction per unit read-out norm."""
        cap = self.geometry.capacity_mp if ctx is mpmath else self.geometry.capacity
        tv = 1.0 if self.family == "line" else t_value
        return cap(tv, 1 if ctx is np else mpmath.mpf(1))

    def margin(self, t_value, L_value: int):
        """Float64 1-D max-min margin of the collinear outputs at shape(s) ``t`` (a screen;
        -inf where degenerate)."""
        if self.family == "arc":
            raise ValueError("the arc's margin is that of its head on the circle (arc_margin)")
        if self.pencil:
            return self.pencil.margin(t_value, L_value)
        tv = np.atleast_1d(np.asarray(t_value, dtype=np.float64))
        x = np.stack([positions(self.cell, v, L_value) for v in tv])
        gaps = np.diff(x, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.asarray(self.scale(tv), dtype=np.float64) * np.ones(len(tv))
            m = scale / np.sum(1.0 / gaps, axis=1)
        m[~(np.isfinite(m) & (gaps > 0).all(axis=1))] = -np.inf
        return m if np.ndim(t_value) else float(m[0])

    def best_shape(self, L_value: int):
        """The shape maximising the margin: ``rho`` (segment), None (line) or the arc's
        ``(q, omega, chi)`` (:meth:`arc_shape`)."""
        if self.family == "line":
            return None
        if self.family == "arc":
            return self.arc_shape(L_value)
        if self.pencil:
            return self.pencil.best_shape(L_value)
        dom = self.geometry.domain(L_value, 1.0)
        return zoom.maximize(lambda tt: self.margin(tt, L_value), dom[0], dom[1], points=33)[0]

    # ----------------------------------------------------------------- the arc
    def _plane(self, omega: float):
        """The first two coordinates of the images ``T, A`` of ``top, across`` (the plane of
        ``f_1, f_2`` turned by ``omega``)."""
        f1, f2 = _frame_heads(self.cell)
        T = [math.cos(omega) * a + math.sin(omega) * b for a, b in zip(f1, f2)]
        A = [-math.sin(omega) * a + math.cos(omega) * b for a, b in zip(f1, f2)]
        return T, A

    def arc_points(self, L_value: int, shape) -> np.ndarray:
        """The points ``y_0..y_L`` the head reads (module docstring), an ``(L+1, 2)`` float array."""
        q, omega, chi = shape
        lam = q * L_value
        if self.foot is None:  # the symmetric arc: z_n along (n - L/2) top + lam across
            x = np.arange(L_value + 1, dtype=np.float64) - L_value / 2
        else:  # the one-sided arc: (n + F) top - lam across (the read-out angle psi = pi/2)
            x, lam = np.arange(L_value + 1, dtype=np.float64) + self.foot, -lam
        return self.points_at(x, lam, omega, chi)

    def points_at(self, x: np.ndarray, lam: float, omega, chi) -> np.ndarray:
        """The read points of the arc's counts at the offsets ``x`` along ``top`` (distance
        ``lam`` across): the norm's image ``sqrt(d) (x top + lam across)/|.|``, then the gain's
        plane at ``omega`` and its tilt ``chi``."""
        s = np.sqrt(x * x + lam * lam) / math.sqrt(self.cell.d)
        top, across = x / s, lam / s
        if not self.cell.affine.gain:
            return np.stack([top, across], axis=1)
        T, A = self._plane(omega)
        return np.stack([math.cos(chi) * (top * T[0] + across * A[0]),
                         math.sin(chi) * (top * T[1] + across * A[1])], axis=1)

    def arc_margin(self, L_value: int, shape) -> float:
        """The margin of the greedy head with the middle biases at ``shape``, over every pair
        of classes (:func:`head_margin`; float64, 0 outside the shapes' domain): the objective
        of :meth:`arc_shape`, so that no optimised shape relies on a non-neighbour tie."""
        q, _, chi = shape
        if not 1e-3 <= q <= 10 or (self.cell.affine.gain and not 0 < chi < math.pi / 2):
            return 0.0
        y = self.arc_points(L_value, shape)
        return head_margin(y, circle_head(y)[0])

    def arc_shape(self, L_value: int):
        """``(q, omega, chi)`` maximising :meth:`arc_margin` at ``min(L, ARC_FIT_L)``."""
        return _arc_shape(self, min(L_value, ARC_FIT_L))

    # ----------------------------------------------------------------- the head
    def build(self, L_value: int, dps: int = 50) -> Params:
        """Unit-norm head maximising the margin: geometry at budget 1 plus the head of its
        family (module docstring).

        Refused up front (``ValueError``) beyond the limits of :func:`check_size`.
        """
        check_size(self.cell, L_value)
        if self.cell.post and self.cell.d < laws.smallest_d(self.cell):
            return self._build_narrow(L_value, dps)
        if self.family == "arc":
            return self._build_arc(L_value, dps)
        if self.pencil:
            return self.pencil.build(L_value, dps)
        t_value = self.best_shape(L_value)
        with mpmath.workdps(dps):
            tv = mpmath.mpf(t_value) if t_value is not None else mpmath.mpf(1)
            one = mpmath.mpf(1)
            # geometry: the regression construction at budget 1 (its w, w0 are not used)
            geo = self.geometry.evaluate(L_value, one, tv, one, 0)
            vec = {k: v for k, v in geo.items() if k not in ("w", "w0") and not k.startswith("_")}
            direction, offset, spread = self._line_of_outputs(geo, vec)
            x = positions(self.cell, tv, L_value, ctx=mpmath) * spread
            vec["u"], b = collinear_head(list(x), direction, offset)
            return Params(self.cell, vec, {"b": b})

    def _build_narrow(self, L_value: int, dps: int) -> Params:
        """Below the arc's width (post-LayerNorm at ``d = 2``; the centred subspace is the line of
        ``c_1``).  Every residual's centred part is ``t (1, -1)``, so ``N(r) = s (1, -1)`` with
        ``s = t/sqrt(t^2 + eps)`` and every output ``z = g * N(r) + beta`` lies on one line, the
        points ``beta + s g * (1, -1)``.  At ``eps = 0``, ``s = +-1``: two points, and nothing
        counts beyond ``L = 1`` (:func:`bounds.lstar.cell_l_star`).

        The geometry is the regression construction at budget 1 (its residuals' centred parts
        rise with ``n``, so the outputs are ordered along the line; the judge certifies the
        head), its gain scaled to norm 1 (``g * N(r)`` scales with ``g``), and the head is the
        collinear head of its outputs along ``z_L - z_0`` (:func:`collinear_head`), the max-min
        head for these points.  At ``eps = 0``, ``L = 1`` its margin is ``|z_1 - z_0|``, ``2 sqrt(2)``
        bare and ``2`` with a gain, the most unit rows reach on two such points (``2m <= <u_1 -
        u_0, z_1 - z_0> <= 2 |z_1 - z_0|``, ``|z_1 - z_0| <= 2 |N| = 2 sqrt(d)`` bare, ``<= 2 |g|``
        with a gain).  Outputs not strictly ordered along the line (``eps = 0`` and ``L >= 2``):
        ValueError."""
        from verify.forward import reduced

        with mpmath.workdps(dps):
            geo = self.geometry.build(L_value, 1, dps)
            if self.cell.affine.gain:
                g = geo.vectors["g"]
                geo = Params(geo.cell, {**geo.vectors, "g": g / mpmath.sqrt(mpmath.fsum(g * g))},
                             geo.scalars)
            z = [np.array([mpmath.mpf(v) for v in row], dtype=object)
                 for row in reduced(geo, list(range(L_value + 1)), backend=f"mp{dps}", readout=False)]
            spread = z[-1] - z[0]
            direction = spread / mpmath.sqrt(mpmath.fsum(spread * spread))
            x = [mpmath.fsum(direction * zn) for zn in z]
            if any(b <= a for a, b in zip(x, x[1:])):
                raise ValueError(
                    f"post-{self.cell.kind.name} at d = {self.cell.d}: the outputs of the counts "
                    f"0..{L_value} are not ordered along their line (at eps = 0 they are two "
                    "points: nothing counts beyond L = 1)")
            vec = {k: v for k, v in geo.vectors.items() if k != "w"}
            vec["u"], b = collinear_head(x, direction)
            return Params(self.cell, vec, {"b": b})

    def _build_arc(self, L_value: int, dps: int) -> Params:
        """The arc's head: embeddings of the symmetric arc (turned into the plane of the gain),
        the gain, and the greedy head on the circle with the middle biases.

        The head is formed in floats (its entries are exact binary numbers, scaled by
        ``1 - 2^-40`` so that no row exceeds norm 1); the biases are the exact running sums of
        the float middle steps, so every neighbour pair keeps the margin of the float points
        up to ``1e-16`` of a logit step.  The judge certifies the result.
        """
        shape = self.arc_shape(L_value)
        q, omega, chi = shape
        d = self.cell.d
        y = self.arc_points(L_value, shape)
        guess = self.arc_margin(min(L_value, ARC_FIT_L), shape) * (min(L_value, ARC_FIT_L) / L_value) ** 2
        v, _ = circle_head(y, guess)
        with mpmath.workdps(dps):
            one = mpmath.mpf(1)
            geo = self.geometry.evaluate(L_value, one, mpmath.mpf(q) * L_value, one, 0)
            zero = mpmath.mpf(0)
            vec = {}
            if self.cell.affine.gain:
                top, across = (_mp_vector(a, d) for a in axes(self.cell))
                T, A = _turned_plane(self.cell, omega)
                for name in ("e_s", "e_a", "e_b")[:3 if "e_b" in geo else 2]:  # e_b: the select task
                    e = geo[name]
                    a, b = mpmath.fsum(e * top), mpmath.fsum(e * across)
                    vec[name] = e - top * a - across * b + T * a + A * b
                g = np.array([zero] * d, dtype=object)
                g[0], g[1] = mpmath.cos(chi), mpmath.sin(chi)
                vec["g"] = g
                if self.cell.affine.bias:
                    vec["beta"] = np.array([zero] * d, dtype=object)
                rows = np.zeros((L_value + 1, d))
                rows[:, :2] = v
            else:
                vec.update({name: geo[name] for name in ("e_s", "e_a", "e_b") if name in geo})
                top, across = (np.array(_mp_vector(a, d), dtype=np.float64) for a in axes(self.cell))
                rows = v[:, :1] * top + v[:, 1:] * across
            rows *= 1 - 2.0**-40
            # the head reads y through its plane coordinates: bare, <v1 top + v2 across, z> =
            # <v, y>; with the gain, <g * u, z> = <v, y> (module docstring)
            steps = -np.sum(np.diff(v, axis=0) * (y[1:] + y[:-1]), axis=1) * (1 - 2.0**-40) / 2
            b, total = [zero], zero
            for s in steps.tolist():
                total += s
                b.append(total)
            vec["u"] = rows
            return Params(self.cell, vec, {"b": b})

    def _line_of_outputs(self, geo, vec):
        """``(u, offset, spread)`` with ``<u, z_n> = offset + spread * f(n)`` (collinear outputs)."""
        d = self.cell.d
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


def _frame_heads(cell: Cell):
    """The first two coordinates of ``f_1, f_2`` (module docstring), as floats: ``e_1, e_2``
    (RMSNorm) or ``c_1`` and the unit part of the centred ``e_2`` orthogonal to it (LayerNorm)."""
    if not cell.kind.centred:
        return (1.0, 0.0), (0.0, 1.0)
    d = float(cell.d)
    f1 = (math.sqrt((d - 1) / d), -1 / math.sqrt(d * (d - 1)))
    # c(e_2) + c_1 / sqrt(d (d-1)) has norm sqrt((d-2)/(d-1))
    k = math.sqrt((d - 1) / (d - 2))
    return f1, ((-1 / d + f1[0] / math.sqrt(d * (d - 1))) * k,
                (1 - 1 / d + f1[1] / math.sqrt(d * (d - 1))) * k)


def _turned_plane(cell: Cell, omega) -> tuple:
    """The d-vectors ``T = cos(omega) f_1 + sin(omega) f_2`` and ``A = -sin(omega) f_1 +
    cos(omega) f_2`` (mpf), the images of ``top, across`` under the orthogonal map that fixes
    ``one`` and the complement of the two planes."""
    d = cell.d
    if cell.kind.centred:
        f1 = _mp_vector(axes(cell)[0], d)  # c_1
        ce2 = np.array([-mpmath.mpf(1) / d] * d, dtype=object)
        ce2[1] += 1
        w = ce2 - f1 * mpmath.fsum(ce2 * f1)
        f2 = w / mpmath.sqrt(mpmath.fsum(w * w))
    else:
        f1 = np.array([mpmath.mpf(0)] * d, dtype=object)
        f2 = f1.copy()
        f1[0] = f2[1] = mpmath.mpf(1)
    c, s = mpmath.cos(omega), mpmath.sin(omega)
    return f1 * c + f2 * s, f2 * c - f1 * s


@functools.lru_cache(maxsize=None)
def _arc_shape(des: ClassificationDesign, L_fit: int):
    """``(q, omega, chi)`` maximising the greedy margin at ``L_fit`` (with a gain: Nelder-Mead
    from the best of a grid of orientations and ellipses; without one a bounded scalar search
    for ``q``)."""
    from scipy import optimize  # scipy loads only where an arc head is shaped

    if not des.cell.affine.gain:
        with np.errstate(invalid="ignore"):  # an infinite margin (no greedy head) is a value
            res = optimize.minimize_scalar(lambda lq: -des.arc_margin(L_fit, (math.exp(lq), 0.0, 0.0)),
                                           bounds=(math.log(0.02), math.log(4.0)), method="bounded",
                                           options={"xatol": 1e-6})
        return (math.exp(res.x), 0.0, 0.0)
    f = lambda p: -des.arc_margin(L_fit, (math.exp(p[0]), p[1], p[2]))
    # start at the best of a coarse grid of orientations and ellipses
    grid = [(math.log(0.22), omega, chi) for omega in np.linspace(0, math.pi, 9)[:-1]
            for chi in (0.4, math.pi / 4, 1.2)]
    start = min(grid, key=f)
    res = optimize.minimize(f, start, method="Nelder-Mead",
                            options={"xatol": 1e-6, "fatol": 1e-15, "maxiter": 600})
    return (math.exp(res.x[0]), float(res.x[1]), float(res.x[2]))


def _mp_vector(axis, width: int) -> np.ndarray:
    """A frame vector (``c_1``, ``e_1``, ...) as a d-vector of mpf: its at most four distinct
    coordinates (:meth:`~constructions.basis.FrameVector.coordinates`) evaluated once, the last
    repeated (no d-long sympy vector)."""
    head = [mpmath.mpf(sympy.N(x, mpmath.mp.dps + 5)) for x in basis.frame_vector(axis, width).coordinates()]
    return np.array(head + head[-1:] * (width - len(head)), dtype=object)


@functools.lru_cache(maxsize=None)
def design(cell: Cell) -> ClassificationDesign:
    """The head of a classification cell: the first entry of
    :data:`constructions.registry.CLASSIFICATION` that serves it, built
    (:class:`ClassificationDesign` at the read at ``s``,
    :class:`constructions.last_read.LastReadHead` at the last read,
    :class:`constructions.last_post.LastArcHead` there after post-norm); a ValueError naming
    :func:`constructions.refusals.refusal`'s reason where no entry does."""
    if cell.readout != "classification":
        raise ValueError("ClassificationDesign is for classification cells")
    return registry.construct(cell)
