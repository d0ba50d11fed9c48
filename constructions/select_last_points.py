r"""Classification of the select task read last on the regression geometry: one head interface
for every cell whose regression construction, at a budget that keeps its embeddings (and gain,
bias) in the unit ball, keeps the classes apart along its read-out or along its arc.

*The points.*  An input of the select task read last is ``(n_a, n_b, q)`` (:mod:`verify.inputs`):
its output ``z(n_a, n_b, q)`` depends only on the counts and the last token, ``n_a + n_b <= L``;
its class is ``n_a``.  A regression parameter set that counts to ``L`` has ``|<w, z> + w0 - n_a|
< 1/2`` on every input, so along ``v = w/|w|`` the positions ``x = <v, z>`` of class ``c`` lie in
an interval ``[lo_c, hi_c]`` with ``hi_c < lo_{c+1}``.  Nothing else of the regression is needed
for this: the read-out ``w`` (the one vector that is not an input of ``z``) may have any norm, and
at a budget where the regression does not count the classes may still lie apart (the screen
below decides which geometry is read).

*The head* (:func:`constructions.classification.collinear_head` on intervals).  The rows ``u_c =
k_c v`` with slopes rising from -1 to 1 in steps ``2m/(lo_{c+1} - hi_c)`` and the breakpoints in
the middle of each gap give every input the margin

    m = 1 / sum_{c=0}^{L-1} 1/(lo_{c+1} - hi_c),

and this is the max-min margin of every head whose rows lie along ``v`` (the pair inequality of
:mod:`constructions.classification` at the facing ends of neighbouring classes, summed with
``-1 <= k_c <= 1``).  Every vector of the head has norm at most 1.

*The geometry* (:meth:`SelectLastPointsHead.geometries`).  The candidates are the regression
construction at the budgets :data:`BUDGETS` (``1 - 2^-30`` down to ``1/8``: at a budget where the
regression does not count, its plan still chooses a shape, and a smaller budget may choose one
that keeps the classes further apart) and at ``1 + 10^-3`` times its float estimate of
``B_min(L)`` (there it counts; the bare pre-RMSNorm construction keeps its embeddings at the
fixed scale ``2^-10``, only ``w`` grows with the budget); a candidate is kept only where every
vector but ``w`` has norm below 1.  The positions are computed
by the verifier's forward pass in float64 on every input (a screen: it finds the class intervals
and the breakpoints); the candidate with the larger screened margin is built, its rows from the
float direction (every logit then scaled by ``1 - 2^-40``) and its biases the exact sums of the float steps.  The judge
certifies every row on balls, non-neighbours included; nothing here is assumed of the float
screen.

*Post-norm: heads on the arc.*  After post-norm (``eps = 0``) the outputs ``g * N(r) + beta`` of
linear attention lie on one planar conic (:mod:`constructions.select_last_linear_post`: ``b`` a
scaled ``a``, every residual on the count task's line ``P + p Q``), and reading them along one
direction wastes its curvature.  Two heads read the plane: (i) :func:`arc_screen`, the greedy head
of :func:`constructions.classification.circle_head` on each candidate geometry, the classes
ordered by their angle about the conic's centre ``beta`` (0 without a bias) and read at their
facing ends; (ii) after post-LayerNorm, the arc head of :class:`~constructions.classification.
ClassificationDesign` itself (:class:`_SymmetricArc`: the symmetric arc of the counts ``0..L`` at
unit budget, ``lam = q L`` with ``q``, and with a gain the plane's turn and ellipse, optimised for
the greedy margin, the count 0 at ``p = 0`` and, the input ``(s)``, at ``-u``).  Every head is
compared by one float screen, the smallest margin of every input against the classes next to its
own (:func:`neighbour_screen`, or the interval margin along ``w``), and the best is built.

*Served* (:data:`constructions.registry.CLASSIFICATION`, :func:`constructions.registry.
points_select_last`): linear attention with bare pre-norm at ``eps = 0`` (LayerNorm ``d >= 3``,
:class:`~constructions.select_last.BareSelectDesign`; RMSNorm every ``d``,
:class:`~constructions.select_last.ScaleSelectDesign`), with bare pre-LayerNorm at ``eps > 0``
(``d >= 3``, :class:`~constructions.last_eps.EpsSelectDesign`) and linear attention with post-norm at
``eps = 0`` (LayerNorm ``d >= 3``, :class:`~constructions.select_last_linear_post.
LinearSelectLastArcDesign`; RMSNorm every ``d``, :class:`~constructions.select_last_linear_post.
SelectFootDesign`).  There the regression construction reads nothing of ``h_b`` (``<w, h_b> = 0``)
or puts ``b`` on the counting arc, and its geometry at unit budget keeps the classes apart along
``w``.

*The bound* (``margin_upper``, :func:`bounds.margin.margin_upper`).  The count task is the
sub-task ``n_b = 0``: its inputs ``(s, a^n)`` read at the last token are the select inputs ``(n, 0,
a)`` and ``(0, 0, s)``, with the same classes and, without ``e_b``, the same outputs, so a head
solving the select task with margin ``m`` solves the count task at the last read with margin at
least ``m``, and the count task's proven bound at the last read holds
(:func:`bounds.last_margin.last_margin_upper`; after post-RMSNorm the arc bound of ``L - 1``,
:func:`bounds.last_margin._post`, whose proof covers every arc ``R unit(P + n Q)``).

*Rates* (README: the sweeps at ``d = 8``).  After post-LayerNorm the symmetric arc with its greedy
head keeps within a few per cent of the bound from ``L = 32`` on (ratio about 1.02 at ``L = 128``),
the count task's arc rate ``-2``.  Before the norm (bare pre-norm) the positions are those of the
regression's two lines along ``w``, orthogonal to ``h_b`` and nearly orthogonal to ``h_a``: the
margin falls like ``L^-3/2``, against the bound's ``L^-1`` (the head is not shown max-min).  After
post-RMSNorm the one-sided arc's geometry is tied to the budget; with the tied geometry of
:mod:`constructions.last_tied` among the candidates the ratio to the bound falls with ``L``: 1.020
(``L = 16``), 1.008 (64) bare, 1.023 and 1.008 with a gain (``d = 8``): the class 0 holds the
query ``b`` one count before the count 1, which the count task's bound does not see (the count
task's own head, :mod:`constructions.count_last_foot_head`, meets that bound to 1.004).
"""

from __future__ import annotations

import mpmath
import numpy as np

from constructions import last_tied, laws, registry
from constructions.cell import Cell, Params
from constructions.classification import (ClassificationDesign, check_size, circle_head, collinear_head,
                                          middle_biases)
from constructions.regression import design as regression_design

#: the budgets at which the regression geometry is screened (every vector inside the unit ball)
BUDGETS = (1 - 2.0**-30, 0.75, 0.5, 0.25, 0.125)
#: the factor above the float estimate of ``B_min(L)`` at which the counting geometry is built
ABOVE = 1 + 1e-3
#: the rows are shrunk by this factor so that the float direction keeps every ``|u_c|`` below 1
SHRINK = 1 - 2.0**-40


def built(cell: Cell) -> bool:
    """Whether ``cell`` (classification) is served by :class:`SelectLastPointsHead`."""
    return registry.builds("select_last_points", cell)


def class_intervals(x: np.ndarray, n_a: np.ndarray, L: int):
    """``(lo, hi)``: the smallest and largest position of every class ``0..L`` (floats)."""
    lo, hi = np.full(L + 1, np.inf), np.full(L + 1, -np.inf)
    np.minimum.at(lo, n_a, x)
    np.maximum.at(hi, n_a, x)
    return lo, hi


def interval_margin(lo: np.ndarray, hi: np.ndarray) -> float:
    """``1/sum 1/(lo_{c+1} - hi_c)``, the margin of the head on the class intervals (floats;
    ``-inf`` where two classes meet or are out of order)."""
    gaps = lo[1:] - hi[:-1]
    if not np.all(gaps > 0):
        return -np.inf
    return float(1 / np.sum(1 / gaps))


class SelectLastPointsHead(ClassificationDesign):
    """The unit-norm head on the regression construction's points of the select task read last
    (module docstring); the interface of :class:`~constructions.classification.ClassificationDesign`
    (``build``; ``geometry`` is the regression design)."""

    def __init__(self, cell: Cell):
        if not built(cell):
            from constructions.refusals import refusal

            raise ValueError(f"{cell.describe()}: {refusal(cell) or 'not served by SelectLastPointsHead'}")
        self.cell, self.family, self.foot, self.pencil = cell, laws.family(cell), None, None
        self.geometry = regression_design(cell.replace(readout="regression"))

    def geometries(self, L_value: int) -> list[Params]:
        """The regression parameter sets whose points the head may read (module docstring): at
        the budgets :data:`BUDGETS`, and at :data:`ABOVE` times the float estimate, those whose
        every vector but ``w`` has norm below 1."""
        out = [self.geometry.build(L_value, B) for B in BUDGETS]
        est = self.geometry.estimate(L_value)
        if est is not None and est * ABOVE > BUDGETS[0]:
            out.append(self.geometry.build(L_value, est * ABOVE))
        if self.cell.post and not self.cell.kind.centred and L_value >= 2:
            out.append(last_tied.geometry(self.cell, L_value))
        return [p for p in out if _inside(p)]

    def _line_screen(self, params: Params, z, n_a, L_value: int):
        w = np.array([float(c) for c in params.vectors["w"]])
        v = w / np.linalg.norm(w)
        lo, hi = class_intervals(z @ v, n_a, L_value)
        return interval_margin(lo, hi), v, lo, hi

    def build(self, L_value: int, dps: int = 50) -> Params:
        """The head at ``L`` on the best screened geometry and head (refused beyond the limits
        of :func:`constructions.classification.check_size`; a ``ValueError`` where no geometry
        keeps the classes apart)."""
        if isinstance(L_value, bool) or not isinstance(L_value, (int, np.integer)) or L_value < 1:
            raise ValueError(f"L must be a positive integer, got {L_value!r}")
        L_value = int(L_value)
        check_size(self.cell, L_value)
        best = None
        for params in self.geometries(L_value):
            z, n_a = read_points(params, L_value)
            m, v, lo, hi = self._line_screen(params, z, n_a, L_value)
            if m > 0 and (best is None or m > best[0]):
                best = (m, params, ("line", v, lo, hi))
            if self.cell.post:
                arc = arc_screen(conic_centre(params), z, n_a, L_value)
                if arc is not None and (best is None or arc[0] > best[0]):
                    best = (arc[0], params, ("arc",) + arc[1:])
        built_head = None
        if self.cell.post and self.cell.kind.centred and L_value >= 2:
            # the symmetric arc of the counts 0..L with the greedy head, shaped for the margin
            arc_params = self._symmetric_arc().build(L_value, dps)
            m = neighbour_screen(arc_params, L_value)
            if m > 0 and (best is None or m > best[0]):
                best, built_head = (m, None, None), arc_params
        if best is None:
            raise ValueError(f"{self.cell.describe()}: no geometry keeps the classes apart at L = {L_value}")
        if built_head is not None:
            return built_head
        _, params, head = best
        with mpmath.workdps(dps):
            u, b = _line_head(*head[1:]) if head[0] == "line" else arc_head(*head[1:])
        vec = {k: val for k, val in params.vectors.items() if k != "w"}
        return Params(self.cell, {**vec, "u": u}, {"b": b})

    def _symmetric_arc(self) -> "_SymmetricArc":
        if not hasattr(self, "_arc"):
            self._arc = _SymmetricArc(self.cell)
        return self._arc


class _SymmetricArc(ClassificationDesign):
    """Post-LayerNorm: the arc head of :class:`~constructions.classification.ClassificationDesign`
    (module docstring there: the symmetric arc at unit budget, ``lam = q L``, turned into the
    gain's plane at ``omega`` with the ellipse ``chi``, the greedy head and the middle biases) on
    the regression geometry of :class:`~constructions.select_last_linear_post.
    LinearSelectLastArcDesign`: every input on the arc of ``V + p top`` (``V = lam across - (L/2)
    top``), the count ``n >= 1`` at ``p`` in ``[n, n + 2^-40]``, the count 0 at ``p`` in ``[0,
    2^-40]`` and, the input ``(s)``, at ``-u`` with ``u = sqrt(d)(1 + 2^-30)`` (``|e_a| < 1``).  The
    shape is optimised on the points ``p = 0..L`` (one a class); that the rest of each class, the
    count 0 at ``-u`` included, is read right is for the judge to certify."""

    def __init__(self, cell: Cell):
        super().__init__(cell)
        self.geometry = _CentredAt(self.geometry)

    def arc_points(self, L_value: int, shape) -> np.ndarray:
        q, omega, chi = shape
        x = np.arange(L_value + 1, dtype=np.float64) - L_value / 2
        return self.points_at(x, q * L_value, omega, chi)


class _CentredAt:
    """The regression geometry with the centre ``L/2`` and the budget's ``u`` filled in: what
    :meth:`constructions.classification.ClassificationDesign._build_arc` evaluates."""

    def __init__(self, geometry):
        self._geometry = geometry

    def evaluate(self, L_value, B_value, t_value, A_value, C_value):
        B = mpmath.mpf(B_value)
        return self._geometry.evaluate(L_value, B, t_value, A_value, mpmath.mpf(int(L_value)) / 2,
                                       self._geometry.fallback_u(B))

    def __getattr__(self, name):
        return getattr(self._geometry, name)


def read_points(params: Params, L_value: int):
    """``(z, n_a)``: the outputs of every input of the cell's task read last (float64, the
    verifier's forward pass) and their classes."""
    from verify.forward import reduced
    from verify.inputs import QUERY_TOKENS, InputSet

    inputs = InputSet(params.cell, L_value)
    n_a, n_b, q = inputs.chunk(0, inputs.size)
    z = np.asarray(reduced(params, n_a, n_b, backend="float64", readout=False,
                           query=[QUERY_TOKENS[i] for i in q]), dtype=np.float64)
    return z, n_a


def neighbour_screen(params: Params, L_value: int) -> float:
    """The smallest margin of the head ``params`` over every input of the select task read last
    against the classes next to its own (float64, ``O(N d)``; the judge decides the rest)."""
    z, n_a = read_points(params, L_value)
    u = np.array([[float(c) for c in row] for row in params.vectors["u"]])
    b = np.array([float(c) for c in params.scalars["b"]])
    own = np.einsum("ij,ij->i", z, u[n_a]) + b[n_a]
    worst = np.inf
    for step in (-1, 1):
        other = n_a + step
        ok = (other >= 0) & (other <= L_value)
        rival = np.einsum("ij,ij->i", z[ok], u[other[ok]]) + b[other[ok]]
        worst = min(worst, float(np.min(own[ok] - rival)))
    return worst


def _line_head(v, lo, hi):
    """The rows and exact biases of the interval head along the float direction ``v``, every
    logit then scaled by :data:`SHRINK` (the argmax is unchanged, and the rounded direction
    cannot lift a row above norm 1)."""
    direction = np.array([mpmath.mpf(float(c)) for c in v], dtype=object)
    u, b = collinear_head([mpmath.mpf(float(c)) for c in lo], direction,
                          upper=[mpmath.mpf(float(c)) for c in hi])
    return u * mpmath.mpf(SHRINK), [bc * mpmath.mpf(SHRINK) for bc in b]


def conic_centre(params: Params) -> np.ndarray:
    """The centre of the conic of the post-norm outputs: the bias ``beta`` (0 without one; floats)."""
    if "beta" in params.vectors:
        return np.array([float(c) for c in params.vectors["beta"]])
    return np.zeros(params.cell.d)


def arc_screen(centre: np.ndarray, z: np.ndarray, n_a: np.ndarray, L_value: int):
    """The arc head's float screen (module docstring, *Post-norm*) of the outputs ``z`` about the
    conic's ``centre``: ``(margin, basis, centre, y, ends, v)`` or None where the outputs are not
    on a planar arc with the classes in order.

    The margin is the smaller of the greedy head's and :func:`plane_margin`, every output against
    every class (the greedy rule sees only the facing ends of neighbours)."""
    Y = z - centre
    _, sv, vt = np.linalg.svd(Y, full_matrices=False)
    if len(sv) > 2 and sv[2] > 1e-12 * sv[0]:
        return None  # not planar
    P = Y @ vt[:2].T
    radius = np.linalg.norm(P, axis=1)
    if not np.all(radius > 0):
        return None  # an output at the centre: no angle
    mean = np.sum(P / radius[:, None], axis=0)
    turn = np.array([[mean[0], mean[1]], [-mean[1], mean[0]]]) / np.linalg.norm(mean)
    P = P @ turn.T  # the mean direction along the first axis: angles in (-pi, pi) without a wrap
    theta = np.arctan2(P[:, 1], P[:, 0])
    lo, hi = class_intervals(theta, n_a, L_value)
    flip = np.array([1.0, 1.0])
    if not lo[-1] > lo[0]:  # the classes in the order of the angle
        flip = np.array([1.0, -1.0])
        P, theta = P * flip, -theta
        lo, hi = class_intervals(theta, n_a, L_value)
    if not np.all(lo[1:] > hi[:-1]):
        return None
    first = np.full(L_value + 1, -1)
    last = np.full(L_value + 1, -1)
    order = np.argsort(theta, kind="stable")
    cls = n_a[order]
    first[cls[::-1]] = order[::-1]  # the first index of each class in angle order
    last[cls] = order
    y, ends = P[first], P[last]
    v, m = circle_head(y, ends=ends)
    b = middle_biases(y, v, ends)
    m = min(m, plane_margin(P, n_a, v, b))
    if not m > 0:
        return None
    basis = (turn @ vt[:2]) * flip[:, None]  # P = (z - centre) basis^T
    return m, basis, centre, y, ends, v


#: rows of outputs per block of :func:`plane_margin` (a block's logits stay within a few MiB)
BLOCK = 2048


def plane_margin(P: np.ndarray, n_a: np.ndarray, v: np.ndarray, b: np.ndarray) -> float:
    """The smallest margin of the plane head ``(v, b)`` over the outputs ``P`` (plane
    coordinates, classes ``n_a``) against every class (float64, ``O(N L)`` in blocks)."""
    worst = np.inf
    for start in range(0, len(P), BLOCK):
        rows, cls = P[start:start + BLOCK], n_a[start:start + BLOCK]
        logit = rows @ v.T + b
        own = logit[np.arange(len(cls)), cls]
        logit[np.arange(len(cls)), cls] = -np.inf
        worst = min(worst, float(np.min(own - logit.max(axis=1))))
    return worst


def arc_head(basis, centre, y, ends, v):
    """The rows ``u_c = basis^T v_c`` and exact biases of the arc head: ``<u_c, z> = <v_c, P(z)> +
    <u_c, centre>`` with ``P(z)`` the plane coordinates of ``z - centre``, so ``b_c`` is the sum of
    the middle steps minus ``<u_c, centre>``; every logit scaled by :data:`SHRINK`."""
    rows = (v @ basis) * SHRINK
    steps = -np.sum(np.diff(v, axis=0) * (y[1:] + ends[:-1]), axis=1) / 2
    zero = mpmath.mpf(0)
    total, b = zero, []
    for c, row in enumerate(rows):
        if c:
            total += mpmath.mpf(float(steps[c - 1]))
        shift = mpmath.fsum(mpmath.mpf(float(r)) * mpmath.mpf(float(x)) for r, x in zip(row, centre))
        b.append(total * mpmath.mpf(SHRINK) - shift)
    return np.array([[mpmath.mpf(float(x)) for x in row] for row in rows], dtype=object), b


def _inside(params: Params) -> bool:
    """Whether every vector of ``params`` but the read-out ``w`` has norm below 1 (mpmath)."""
    return all(mpmath.fsum(c * c for c in np.ravel(val)) < 1
               for k, val in params.vectors.items() if k != "w")
