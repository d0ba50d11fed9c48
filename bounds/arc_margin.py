"""The arc's max-min margin bounded by a dual certificate: weighted pair inequalities.

Setting (:mod:`bounds.margin`): after post-norm (``eps = 0``) the outputs are
``z_n = R unit(lam, n - p)`` in coordinates of their plane (``R = sqrt(d)``, ``lam > 0`` the
distance of the residual line from the origin in count units, ``p`` the count at its foot), and
a class ``c`` is read through ``w_c``, the part in that plane of ``u_c`` (bare) or of
``g * u_c`` (with a gain; a bias shifts every logit of a class by a constant).  Bare,
``|w_c| <= 1``.  With a gain, ``w_c = M u_c`` with ``M = P diag(g)`` (``P`` the projection on
the plane), so the ``w_c`` lie in the ellipse ``M(unit ball)``, whose squared semi-axes (the
squared singular values of ``M``) add up to ``|M|_F^2 = sum_i g_i^2 |P e_i|^2 <= a^2 |g|^2 <= a^2``,
``a`` the axis reach (:meth:`~constructions.cell.NormKind.axis_reach`: the plane lies in the
norm's image, so ``|P e_i|`` is at most the norm of ``e_i``'s part in the image).

**The dual bound.**  Write the head as ``w_c = Q v_c`` with ``|v_c| <= 1`` (``Q`` the identity
bare; ``Q = Rot diag(s_1, s_2)`` with ``s_1^2 + s_2^2 <= a^2`` with a gain).  The pair inequality
(:mod:`bounds.margin`) ``<w_{c+1} - w_c, z_{c+1} - z_c> >= 2m`` times weights ``omega_c >= 0``,
summed, and regrouped by class (Abel summation), reads

    2m sum_c omega_c <= sum_{c=0}^{L} <v_c, Q^T F_c> <= sum_{c=0}^{L} |Q^T F_c|,
    F_c = omega_{c-1} (z_c - z_{c-1}) - omega_c (z_{c+1} - z_c)    (omega_{-1} = omega_L = 0),

for *every* choice of weights (a Lagrangian dual; with the optimal weights it is the max-min
margin of the neighbour pairs, by convex duality).  Put ``omega_c = k_c / l_c`` with ``l_c`` the
chord length and ``t_c`` the unit chord direction: ``F_c = G_c = k_{c-1} t_{c-1} - k_c t_c`` and

    m <= N / D,   D = 2 sum_c k_c / l_c,   N = sum_c |Q^T G_c|.                          (W)

The bound of :mod:`bounds.margin` is ``k_c = 1``.  Here ``k`` is the certificate of the
construction's own head (:func:`certificate`): at its points the head is on the unit circle and
every pair inequality it needs is tight, so the stationarity conditions ``F_c = mu_c v_c``
(``mu_c >= 0``) fix the weights by the recursion ``omega_c [z_{c+1}-z_c, v_c] =
omega_{c-1} [z_c - z_{c-1}, v_c]`` (``[,]`` the 2-D cross product), starting at the last class
whose vector is ``-t_c`` (a slack pair before it has weight 0).  Any negative or undefined
weight is set to 0: (W) needs only ``k >= 0``.  The same ``k`` is then used for *every*
geometry; with it the supremum of (W) over the geometry is the construction's margin to float
precision (a saddle point, observed), and what is proven is the supremum.  The one exception is
the tied arc of the last read with a gain, where that supremum sits at a larger foot, some 4%
above the construction: there each box takes the least of (W) over the weights of the greedy
heads on the tied arcs at a few feet (:data:`TIED_FEET`; any weights are valid on any box), and
Newton's ``eta_0`` may come as close to the disk's edge as :data:`TIED_EDGE` (its best ellipse is
nearly degenerate).

**Stable chord geometry.**  In complex notation ``u_n = (lam + i x_n)/r_n``, ``x_n = n - p``,
``r_n = |lam + i x_n|``, ``S_n = r_n^2``: the points turn anticlockwise by ``dtheta_c`` with
``e^{i dtheta_c} = u_{c+1} conj(u_c) = (lam^2 + x_c x_{c+1} + i lam)/(r_c r_{c+1})``, so
``l_c = 2R sin(dtheta_c/2) = R sin(dtheta_c) / sqrt((1 + cos dtheta_c)/2)``.  Consecutive
chords turn by ``2h_c = Omega_c / 2``, ``Omega_c = theta_{c+1} - theta_{c-1} < pi`` with
``e^{i Omega_c} = (S_c - 1 + 2i lam)/(r_{c-1} r_{c+1})``, whence ``cos(Omega/2) =
sqrt((1 + cos Omega)/2)``, ``sin(Omega/2) = sin Omega / (2 cos(Omega/2))``, ``cos h =
sqrt((1 + cos(Omega/2))/2)``, ``sin h = sin(Omega/2)/(2 cos h)``.  The chords' bisector
``m_c = e(theta_c + pi/2 + eps_c)``, ``eps_c = (dtheta_c - dtheta_{c-1})/4``, and

    G_c = (P_c + i Q_c) m_c,   P_c = (k_{c-1} - k_c) cos h,   Q_c = -(k_{c-1} + k_c) sin h,

(``t_{c-1} = e^{-ih} m_c``, ``t_c = e^{ih} m_c``) so ``|G_c|^2 = P_c^2 + Q_c^2``: no difference of
nearly equal numbers is formed.  ``G_0 = -k_0 t_0``, ``G_L = k_{L-1} t_{L-1}``.  Bare this is
all (W) needs: ``N = k_0 + k_{L-1} + sum_c |G_c|``.  With a gain the directions enter through
``e(2 gamma_c) = G_c^2 / |G_c|^2 = -e(2 theta_c) e(2 eps_c) e(2 beta_c)``, ``beta_c = arg(P_c +
i Q_c)``, ``e(2 theta_c) = (lam^2 - x^2 + 2 i lam x)/S_c`` and ``e^{4 i eps_c} = u_{c+1} u_{c-1}
conj(u_c)^2 = (S_c^2 + lam^2 - x_c^2 - 2 i lam x_c)/(r_{c-1} r_{c+1} S_c)`` (its real part
positive wherever the box is not degenerate; half angles as above), at the ends ``-e(2 theta_0)
e(dtheta_0)`` and ``-e(2 theta_L) e(-dtheta_{L-1})``.  Over a box the direction is the
centre's turned by ``2 delta``, ``|delta| <= sum_i |d gamma / d v_i| h_i`` (mean value theorem
for the continuous angle ``gamma``), with ``d theta_c = -(x_c, lam) . d(lam, p) / S_c``,
``d eps_c`` the second difference of ``d theta`` over 4 and ``d beta = (P dQ - Q dP)/|G|^2``
(at the ends ``(d theta_0 + d theta_1)/2`` and ``(d theta_{L-1} + d theta_L)/2``);
``cos 2 delta >= 1 - 2 delta^2``, ``|sin 2 delta| <= 2 |delta|``, and ``d e(2 gamma) = 2 rot90(
e(2 gamma)) d gamma``.  Turning the centre's direction, rather than enclosing the closed form
over the box, keeps the enclosure as narrow as the direction's true variation.

**The ellipse (gain).**  ``|Q^T G|^2 = G^T Rot diag(s_1^2, s_2^2) Rot^T G <= (a^2/2) G^T (I + H(eta))
G`` with ``H(eta) = [[eta_1, eta_2], [eta_2, -eta_1]]`` and ``eta`` in the unit disk (``eta =
cos(2 chi) e(2 alpha)`` for ``s = a (cos chi, sin chi)`` turned by ``alpha``; smaller semi-axes
only lower it, as ``I + H(eta) >= 0``).  As ``G^T (I + H(eta)) G = |G|^2 (1 + <e(2 gamma),
eta>)`` (``gamma`` the angle of ``G``), ``N <= (a/sqrt 2) sup_eta n(eta)`` with ``n(eta) =
sum_c |G_c| sqrt(1 + <e(2 gamma_c), eta>)``: a sum of square roots of functions affine in
``eta``, concave.  Its Hessian is ``-sum_c |G_c| e e^T / (4 (1 + <e, eta>)^{3/2})`` (``e =
e(2 gamma_c)``); as ``1 + <e, eta> <= 2``, ``-Hess n >= S / (8 sqrt 2)`` with ``S = sum_c |G_c|
e e^T``, whose smallest eigenvalue is ``(sum_c |G_c| - |sum_c |G_c| e(4 gamma_c)|)/2``
(``e(4 gamma)`` the complex square of ``e(2 gamma)``).  With ``mu`` that eigenvalue over
``8 sqrt 2``, for ``eta`` and ``eta_0`` in the disk ``n(eta) <= n(eta_0) + <grad n(eta_0), eta -
eta_0> - mu |eta - eta_0|^2 / 2``, hence

    sup_eta n <= n(eta_0) + |grad n(eta_0)|^2 / (2 mu),
    grad n = sum_c |G_c| e(2 gamma_c) / (2 sqrt(1 + <e(2 gamma_c), eta>)).

``eta_0`` is any point of the disk (Newton's method at each box's centre, in floats).

**Tangents.**  For ``s > 0`` and ``y >= 0``, ``sqrt(y) <= (s^2 + y) / (2 s)`` (that is ``(sqrt(y)
- s)^2 >= 0``), with equality at ``y = s^2``.  Let ``T`` be a set of classes with a number ``s_c >
0`` each, and ``n~`` be ``n`` with the term of each ``c`` in ``T`` replaced by ``|G_c| (s_c^2 + 1 +
<e(2 gamma_c), eta>) / (2 s_c)``, affine in ``eta``: then ``n <= n~`` on the disk (``1 + <e, eta>
>= 0`` there), ``n~`` is concave, and its Hessian is that of the kept terms, so the bound above
holds for ``n~`` with ``mu`` the same eigenvalue of ``S`` summed over the kept terms only:
``sup n <= sup n~ <= n~(eta_0) + |grad n~(eta_0)|^2 / (2 mu~)``.  ``T`` holds the classes whose
``y_c = 1 + <e(2 gamma_c), eta_0>`` is below :data:`TANGENT_BELOW` at the box's centre, with
``s_c = sqrt(y_c)`` there (floored at ``sqrt(TANGENT_FLOOR)``), so that at the centre ``n~`` and
its gradient at ``eta_0`` are ``n``'s (any ``s_c > 0`` is valid; these lose only to second
order).  Why: where the maximising ellipse is nearly degenerate (``|eta_0|`` near 1: the short,
nearly straight arcs of far feet) some ``y_c`` is near 0 at ``eta_0``, and the root's derivative
``1/(2 sqrt(y_c))`` has no finite enclosure over a box on which ``y_c`` may reach 0, however
small the box; the tangent's derivatives in ``eta`` are constants and smooth in the geometry.

**Over every geometry.**  ``(lam, p)`` and ``(lam, L - p)`` give mirror images of the same
points in reverse order (``z_n(L - p)`` is the mirror of ``z_{L-n}(p)``), and mirroring the
head (and the ellipse) keeps every margin, so ``p <= L/2`` suffices.  Where the foot is tied
to the budget (linear attention with post-RMSNorm, :func:`constructions.laws.foot_distance`)
every parameter set with vectors of norm at most 1 has ``p = -(sqrt(d) + |e_s|^2)/|e_a|^2 <=
-sqrt(d)``, so the domain ends there instead (and the certificate is that of the cell's own
one-sided arc).  Read at the last position (the counts ``1..L+1`` of that cell: the arc of
``L`` with its foot at ``p = -(F + 1)``) the distance is tied as well, ``lam <= kappa F = kappa (-p
- 1)`` with ``F >= sqrt(d)`` (:func:`constructions.laws.last_distance_ratio`): the domain is
``p <= -(sqrt(d) + 1)`` and every box is cut to ``lam <= kappa (-p_0 - 1)`` (``p_0`` its least
``p``; a box with none of it left holds no geometry), and the certificate is that of the head on
the tied arc (:func:`constructions.last_tied.count_arc`).  A branch and bound covers
``0 < lam <= 4L`` and ``-3L/2 <= p <= L/2`` (tied: ``-P <= p``, ``P = FAR L``); on each box the
bound is the smaller of

* the closed form of :mod:`bounds.margin` (``k_c = 1`` and chord estimates), at its worst point
  of the box: ``a R (1 + Theta/2) / max(min_lam (L lam^2 + E(p*))/lam, L/2)`` with ``p*`` the
  box's ``p`` nearest ``L/2`` (``E`` is smallest there, ``Theta``, the angle the arc subtends,
  largest for every ``lam``), ``Theta`` at the smallest ``lam`` when ``0 <= p* <= L``
  (decreasing in ``lam`` there), ``atan(l_1/|p_1|)`` when ``p_1 < 0`` (every point is at an angle
  ``atan(lam/(n - p))`` from the line's direction, between 0 and ``atan(lam/|p|)``), else ``pi``;
* (W) in the mean-value form of :mod:`bounds.jets` (the value at the box's centre plus the
  interval gradient over the box times the half-widths; or the plain enclosure, if smaller),
  for ``N/D`` bare and for ``n~(eta_0)/D`` with a gain, plus ``(a/sqrt 2) |grad n~(eta_0)|^2 /
  (2 mu~ D)`` with ``grad n~`` and ``mu~`` in the same form (``mu~`` from below) and ``D``
  enclosed over the box (``n~``, ``mu~``: the tangents of the box's centre);

every operation in the outward-rounded intervals of :mod:`verify.intervals`.  Outside the
region, ``(L lam^2 + E)/lam >= L lam >= 4L^2`` (``lam >= 4L``) or ``>= 2 sqrt(L E) >= 4 L^2``
(``p <= L/2 - 2L``, where ``E >= 4 L^3``; ``E >= 0`` for ``L >= 2``), so there ``m <= a R
(1 + pi/2) / (4 L^2)``; tied, outside ``p >= -P`` every ``x_c = c - p >= P``, so ``E >= L p^2``
and, as ``lam + p^2/lam`` decreases on ``0 < lam <= kappa |p| < |p|``, ``(L lam^2 + E)/lam >= L
|p| (1 + kappa^2)/kappa``: there ``m <= a R (1 + atan(kappa)/2) kappa/(L P (1 + kappa^2))``.  The
result is the largest leaf bound, below ``(1 + TOLERANCE)`` times
the certificate's value at the construction's geometry once the search closes (a capped search
returns its largest leaf: weaker, still valid).

Cost: ``O(L)`` vectorised interval operations per box (boxes are evaluated in batches of at
most ``BATCH_ENTRIES`` box-class pairs): some 250-600 boxes bare and 1000-1400 with a gain
(about 5 s at ``L = 4096`` bare, 10 s at ``L = 1024`` with a gain).
"""

from __future__ import annotations

import copy
import heapq
import math

import flint
import numpy as np

from bounds.jets import Jet, concatenate, mean_value_upper, upper
from constructions import classification, last_tied, laws
from constructions.cell import Cell
from verify.backends import arb_ceil, arb_floor
from verify.intervals import Iv, check_float_mode

#: relative tolerance of the branch and bound against the certificate at the construction
TOLERANCE = 4e-3
#: the most boxes the branch and bound splits (a cap gives a weaker, still valid bound)
MAX_BOXES = 3000
#: boxes times classes evaluated together in one vectorised pass (memory: a few hundred MiB)
BATCH_ENTRIES = 1 << 18
#: the tied domain's search ends at ``p = -FAR L`` (a closed form covers the rest)
FAR = 64
#: Newton steps for the ellipse parameter ``eta_0`` at a box's centre
NEWTON_STEPS = 8
#: Newton's ``eta_0`` is kept within this radius of the disk (any point of the disk is valid)
EDGE = 0.999
#: the same on the tied arc of the last read, whose best ellipse with a gain is nearly degenerate
#: (``|eta|`` about 0.9993 at ``d = 16``, where kept at 0.999 the certificate's value at the
#: construction was 3.5 times its margin)
TIED_EDGE = 1 - 1e-6
#: a term whose root argument ``1 + <e(2 gamma_c), eta_0>`` is below this at a box's centre is
#: replaced by its tangent bound (module docstring)
TANGENT_BELOW = 0.3
#: the least tangent point (``s^2``) of the tangent bound
TANGENT_FLOOR = 1e-6
#: the feet, as multiples of the construction's, of the certificates of the tied arc with a gain
#: (:func:`_tied_family`): where the construction's weights alone stall (up to ~1.5 times its
#: foot, d = 8); a heuristic, as any weights give a valid bound
TIED_FEET = (1.0, 1.1, 1.25, 1.5)


def certificate(cell: Cell, L: int):
    """``(k, q, p)``: the weights ``k_c >= 0`` (largest 1) of the construction's greedy head read
    as a dual certificate (module docstring), the construction's ``q = lam / L`` and its foot
    ``p`` (``L/2``; ``-F(1)`` on the one-sided arc).  The construction of the softmax twin of
    the cell is used where the foot is free (the bound holds for any weights; linear attention
    shares the arc), the cell's own one-sided arc where it is not."""
    if cell.read.last:  # the tied arc of the last read (module docstring)
        lam, foot, y, _ = last_tied.count_arc(cell, L)
        q = lam / L
    else:
        tied = laws.foot_distance(cell, 1) is not None  # the one-sided arc: its own construction
        des = classification.design(cell if tied else cell.replace(attention="softmax"))
        foot = L / 2 if des.foot is None else -des.foot
        q = des.arc_shape(L)[0]
        y = des.arc_points(L, (q,) + tuple(des.arc_shape(L)[1:]))
    return _weights(y, q * L, np.arange(L + 1) - foot), q, foot


def _weights(y: np.ndarray, lam: float, x: np.ndarray) -> np.ndarray:
    """The weights ``k_c >= 0`` (largest 1) of the greedy head on the read points ``y`` read as
    a dual certificate (module docstring), the chords measured on the circle of the arc at
    distance ``lam`` and offsets ``x`` (the points ``unit(lam, x_c)``)."""
    L = len(x) - 1
    v, _ = classification.circle_head(y)
    dy = np.diff(y, axis=0)
    cross = lambda a, b: a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    t = dy / np.linalg.norm(dy, axis=1)[:, None]
    backward = np.linalg.norm(v[:L] + t, axis=1) < 1e-9
    c0 = int(np.argmin(backward)) - 1 if not backward.all() else L - 1
    c0 = max(c0, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = cross(dy[:-1], v[1:L]) / cross(dy[1:], v[1:L])
    w = np.zeros(L)
    w[c0] = 1.0
    w[c0 + 1:] = np.cumprod(ratio[c0:])
    w = np.where(np.isfinite(w) & (w > 0), w, 0.0)
    z = np.stack([np.full(L + 1, lam), x], axis=1) / np.hypot(lam, x)[:, None]
    k = w * np.linalg.norm(np.diff(z, axis=0), axis=1)
    return k / k.max()


class _Arc:
    """The certificate's terms for one cell and ``L`` (module docstring)."""

    def __init__(self, cell: Cell, L: int, first=None):
        self.L, self.R = L, math.sqrt(cell.d)
        self.gain = cell.affine.gain
        self.a = cell.kind.axis_reach(cell.d, math.sqrt) if self.gain else 1.0
        #: the range ``(n_lo, n_hi)`` of the first point's position (the points ``n_*, 1, ..., L``:
        #: :func:`last_arc_upper`), or None (the points ``0..L``)
        self.first = first
        if first is None:
            self.k, self.q, self.p = certificate(cell, L)
        else:
            self.k, self.q, self.p, self.n_ref = last_certificate(cell, L)
        #: the largest foot of the domain: ``L/2`` by symmetry, or before ``-sqrt(d)`` where the
        #: foot is tied to the budget (rounded up, so that the domain holds every such foot)
        foot = laws.foot_distance(cell, 1, laws.FLOAT)
        self.p_max = L / 2 if foot is None else math.nextafter(-foot, math.inf)
        #: the last read's tie ``lam <= kappa (-p - 1)`` (``kappa`` rounded up; None: untied)
        self.kappa = None
        tied_last = cell.read.last and first is None
        if tied_last:
            with flint.ctx.workprec(64):
                ratio = flint.arb(laws.last_distance_ratio(cell, 1, laws.ARB))
                self.kappa = arb_ceil(ratio)
                self.p_max = -arb_floor(flint.arb(cell.d).sqrt() + 1)
        self.n = np.arange(L + 1, dtype=np.float64)
        ki = Iv(self.k)
        self.k_prev, self.k_next = ki[:-1], ki[1:]
        #: Newton's start for ``eta_0``: the disk's centre, or the tied arc's ellipse (nearly
        #: degenerate: Newton from the centre would not reach it)
        #: the radius within which Newton's ``eta_0`` is kept (:data:`EDGE`, :data:`TIED_EDGE`)
        self.edge = TIED_EDGE if tied_last else EDGE
        self.eta = self.edge * last_tied.count_arc(cell, L)[3] if tied_last else np.zeros(2)

    def reweighted(self, k: np.ndarray) -> "_Arc":
        """The same terms with the weights ``k`` (any ``k >= 0`` gives a valid bound)."""
        other = copy.copy(self)
        other.k = k
        ki = Iv(k)
        other.k_prev, other.k_next = ki[:-1], ki[1:]
        return other

    def geometry(self, lam: Jet, p: Jet, first=None, centre=None, h=None):
        """``D`` and either ``N`` (bare) or, per class, ``(|G_c|, e(2 gamma_c))`` (with a gain;
        over a box, ``centre`` holds the directions at its centre and ``h`` its half-widths);
        ``first`` the first point's position where there is one (:func:`last_arc_upper`)."""
        L = self.L
        if first is None:
            x = -p + self.n
        else:  # x_0 = n_* - p; the gaps of the parameter: 1 - n_*, then 1
            x = concatenate([first - p, -p + self.n[1:]])
        l2 = lam.square()
        S = l2 + x.square()
        r = S.sqrt()
        # chords c = 0..L-1: e^{i dtheta_c} = (lam^2 + x_c x_{c+1} + i lam (x_{c+1} - x_c)) / (r_c r_{c+1})
        rr = r[..., :-1] * r[..., 1:]
        sin_d = lam / rr if first is None else lam * concatenate([1.0 - first, Jet(np.ones(L - 1))]) / rr
        cos_d = (l2 + x[..., :-1] * x[..., 1:]) / rr
        half_cos = ((cos_d + 1.0) * 0.5).sqrt()
        D = (half_cos / sin_d * (2 * self.k / self.R)).sum()
        # turns c = 1..L-1: e^{i Omega_c} = (S_c - 1 + 2 i lam) / (r_{c-1} r_{c+1}) on the unit
        # grid; (lam^2 + x_0 x_2 + i lam (x_2 - x_0)) / (r_0 r_2) at c = 1 after a first point
        rpm = r[..., :-2] * r[..., 2:]
        if first is None:
            cos_o = (S[..., 1:-1] - 1.0) / rpm
            span = 2.0
        else:
            cos_o = concatenate([l2 + x[..., :1] * x[..., 2:3], S[..., 2:-1] - 1.0]) / rpm
            span = concatenate([2.0 - first, Jet(np.full(L - 2, 2.0))])
        c2 = ((cos_o + 1.0) * 0.5).sqrt()  # cos(Omega/2)
        s2 = lam * span / rpm / (c2 * 2.0)  # sin(Omega/2)
        if not self.gain:
            sin_h2 = s2.square() / ((c2 + 1.0) * 2.0)  # sin^2 h
            size = (sin_h2 * (self.k_prev * self.k_next * 4.0)
                    + (self.k_prev - self.k_next).square()).sqrt()
            return D, size.sum() + (Iv(self.k[0]) + Iv(self.k[L - 1]))
        dk, sk = self.k_prev - self.k_next, self.k_prev + self.k_next
        cos_h = ((c2 + 1.0) * 0.5).sqrt()
        P, Q = cos_h * dk, s2 / (cos_h * 2.0) * sk * -1.0  # G_c = (P + iQ) e(theta_c + pi/2 + eps_c)
        size = concatenate([Iv(self.k[0]), (P.square() + Q.square()).sqrt(), Iv(self.k[L - 1])])
        if centre is None:
            e = self._directions(lam, x, l2, S, rpm, cos_d, sin_d, P, Q, size, first is not None)
        else:
            e = self._turned(lam, x, S, P, Q, size, centre, h)
        return D, (size, e)

    def _directions(self, lam, x, l2, S, rpm, cos_d, sin_d, P, Q, size, first=False):
        """``e(2 gamma_c)`` by its closed form (at a box's centre): ``-e(2 theta_c) e(2 eps_c)
        e(2 beta_c)`` with ``beta_c = arg(P + iQ)``; at the ends ``-e(2 theta_0) e(dtheta_0)`` and
        ``-e(2 theta_L) e(-dtheta_{L-1})``.  After a first point (``first``) the turn at ``c = 1``
        has ``e^{4 i eps_1} = (lam + i x_0)(lam + i x_2)(lam - i x_1)^2 / (r_0 r_2 S_1)``, expanded."""
        L = self.L
        inner, Si = x[..., 1:-1], S[..., 1:-1]
        g = size[..., 1:-1]
        beta = (P / g, Q / g)
        xi2 = inner.square()
        den = rpm * Si  # e^{4 i eps_c} = (S^2 + lam^2 - x^2 - 2 i lam x) / (r_{c-1} r_{c+1} S)
        re, im = Si.square() + l2 - xi2, lam * inner * -2.0
        if first:
            x0, x1, x2 = x[..., :1], x[..., 1:2], x[..., 2:3]
            a, b, s = l2 - x0 * x2, l2 - x1.square(), x0 + x2
            re = concatenate([a * b + l2 * x1 * s * 2.0, re[..., 1:]])
            im = concatenate([lam * (s * b - x1 * a * 2.0), im[..., 1:]])
        ce = ((re / den + 1.0) * 0.5).sqrt()
        eps = (ce, im / den / (ce * 2.0))
        theta = ((l2 - xi2) / Si, lam * inner * 2.0 / Si)
        e = _neg(_times(_times(theta, eps), _times(beta, beta)))
        ends = []
        for j, chord, sign in ((0, 0, 1.0), (L, L - 1, -1.0)):
            xj, Sj = x[..., j:j + 1], S[..., j:j + 1]
            e2 = ((l2 - xj.square()) / Sj, lam * xj * 2.0 / Sj)
            ends.append(_neg(_times(e2, (cos_d[..., chord:chord + 1], sin_d[..., chord:chord + 1] * sign))))
        return tuple(concatenate([ends[0][i], e[i], ends[1][i]]) for i in range(2))

    def _turned(self, lam, x, S, P, Q, size, centre, h):
        """``e(2 gamma_c)`` over a box as a jet: the centre's directions ``centre`` turned by
        ``2 delta``, ``|delta| <= sum_i |d gamma / d v_i| h_i`` (mean value theorem), with
        ``d theta_c = (-x_c, -lam) d(lam, p) / S_c``, ``eps_c`` the second difference of
        ``theta`` over 4, ``d beta = (P dQ - Q dP) / |G|^2``; at the ends ``gamma_0 = theta_0 +
        dtheta_0 / 2 + pi/2``, ``gamma_L = theta_L - dtheta_{L-1} / 2 + pi/2``."""
        g2 = size.v[..., 1:-1].square()
        dtheta = (-x.v / S.v, -lam.v / S.v)
        if len(h) == 3:  # d theta_0 / d n_* = lam / S_0, the other points do not move
            dtheta += (_cat([lam.v / S.v[..., :1], S.v[..., 1:] * 0.0]),)
        dgamma = []
        for i in range(len(h)):
            t = dtheta[i]
            mid = t[..., 1:-1] + (t[..., 2:] + t[..., :-2] - t[..., 1:-1] * 2.0) * 0.25
            dbeta = (P.v * Q.g[i] - Q.v * P.g[i]) / g2
            dgamma.append(_cat([(t[..., :1] + t[..., 1:2]) * 0.5, mid + dbeta, (t[..., -2:-1] + t[..., -1:]) * 0.5]))
        reach = Iv(0.0)
        for dg, hi in zip(dgamma, h):
            reach = reach + abs(dg) * Iv(hi[:, None])
        turn = Iv(-reach.hi, reach.hi) * 2.0
        rot = (Iv(1.0) - Iv(0.0, np.asarray(turn.hi)).square() * 0.5, turn)  # cos t >= 1 - t^2/2, |sin t| <= |t|
        rot = (Iv(rot[0].lo, np.ones_like(rot[0].lo)), rot[1])
        value = _times((centre[0].v, centre[1].v), rot)
        grads = lambda comp, sign: tuple(comp * (dg * (2.0 * sign)) for dg in dgamma)
        return (Jet(value[0], grads(value[1], -1.0)), Jet(value[1], grads(value[0], 1.0)))

    def ellipse(self, G, eta, tangent):
        """``n~(eta)`` and ``grad n~(eta)`` (jets) for the terms ``G = (|G_c|, e(2 gamma_c))``
        (``eta`` an array ``(boxes, 2)``): the root of every term where ``tangent`` is nan, its
        tangent bound ``(s^2 + y)/(2 s)`` where ``tangent`` holds ``s > 0`` (module docstring)."""
        size, (e1, e2) = G
        y = e1 * eta[:, :1] + e2 * eta[:, 1:] + 1.0
        kept = np.isnan(tangent)
        s = Iv(np.where(kept, 1.0, tangent))
        root = _replaced(y, ~kept, 1.0).sqrt()  # 1 where the tangent stands in for the root
        keep, line = kept.astype(np.float64), (~kept).astype(np.float64)
        Nc = size * root * keep + size * ((y + s.square()) / (s * 2.0)) * line
        half = size / (root * 2.0) * keep + size / (s * 2.0) * line
        return Nc.sum(), (half * e1).sum(), (half * e2).sum()

    def tangents(self, G, eta) -> np.ndarray:
        """Per box and class, ``s = sqrt(y_c(eta_0))`` at the centre's terms ``G`` where
        ``y_c = 1 + <e(2 gamma_c), eta_0> < TANGENT_BELOW`` (the term's tangent bound is used
        there), nan elsewhere (the term's root is kept)."""
        e = (G[1][0].v, G[1][1].v)
        y = 1.0 + 0.5 * (e[0].lo + e[0].hi) * eta[:, :1] + 0.5 * (e[1].lo + e[1].hi) * eta[:, 1:]
        return np.where(y < TANGENT_BELOW, np.sqrt(np.maximum(y, TANGENT_FLOOR)), np.nan)

    def curvature(self, G, tangent) -> Jet:
        """``mu = (sum_c |G_c| - |sum_c |G_c| e(2 gamma_c)^2|) / (16 sqrt 2)`` over the kept terms
        (``tangent`` nan) as a jet (module docstring; the square is complex)."""
        size, e = G
        size = size * np.isnan(tangent).astype(np.float64)
        f = _times(e, e)
        spread = ((size * f[0]).sum().square() + (size * f[1]).sum().square()).sqrt()
        return (size.sum() - spread) / (Iv(16.0) * Iv(2.0).sqrt())

    def newton(self, G) -> np.ndarray:
        """Per box, an ``eta_0`` near the maximiser of ``n`` for the centre's terms ``G`` (in
        the disk; an array ``(boxes, 2)``)."""
        mid = lambda j: 0.5 * (j.v.lo + j.v.hi)
        size, e = mid(G[0]), np.stack([mid(G[1][0]), mid(G[1][1])], axis=1)
        eta = np.broadcast_to(self.eta, (size.shape[0], 2)).copy()
        for _ in range(NEWTON_STEPS):
            root = np.sqrt(np.maximum(1 + np.einsum("bin,bi->bn", e, eta), 1e-12))
            grad = np.einsum("bin,bn->bi", e, size / (2 * root))
            hess = -np.einsum("bin,bjn,bn->bij", e, e, size / (4 * root**3))
            with np.errstate(all="ignore"):
                try:
                    step = np.linalg.solve(hess, -grad[..., None])[..., 0]
                except np.linalg.LinAlgError:
                    break
            eta = np.where(np.isfinite(step), eta + step, eta)
            norm = np.linalg.norm(eta, axis=1, keepdims=True)
            eta = np.where(norm > self.edge, eta * (self.edge / np.maximum(norm, 1e-300)), eta)
        return eta

    def boxes(self, l0, l1, p0, p1, n0=None, n1=None) -> np.ndarray:
        """(W) over the boxes ``[l0, l1] x [p0, p1]`` (arrays, ``l0 > 0``; ``x [n0, n1]`` the first
        point's position where there is one), rounded up (module docstring)."""
        col = lambda v: np.asarray(v, dtype=np.float64)[:, None]
        ends = [(col(l0), col(l1)), (col(p0), col(p1))]
        if self.first is not None:
            ends.append((col(n0), col(n1)))
        mids = [0.5 * (a + b) for a, b in ends]
        h = tuple(np.maximum((Iv(b) - c).hi, (Iv(c) - a).hi)[:, 0] for (a, b), c in zip(ends, mids))
        unit = lambda i: tuple(Iv(1.0 if j == i else 0.0) for j in range(len(ends)))
        centre = tuple(Jet(Iv(c)) for c in mids)
        whole = tuple(Jet(Iv(a, b), unit(i)) for i, (a, b) in enumerate(ends))
        Dc, Tc = self.geometry(*centre)
        Db, Tb = self.geometry(*whole, centre=Tc[1] if self.gain else None, h=h)
        if not self.gain:
            return np.minimum(mean_value_upper(Tc / Dc, Tb / Db, h), upper((Tb / Db).v))
        eta = self.newton(Tc)
        tangent = self.tangents(Tc, eta)
        nc, *gc = self.ellipse(Tc, eta, tangent)
        nb, *gb = self.ellipse(Tb, eta, tangent)
        first = np.minimum(mean_value_upper(nc / Dc, nb / Db, h), upper((nb / Db).v))
        grad2 = Iv(0.0)
        for at_centre, over_box in zip(gc, gb):
            hi = mean_value_upper(at_centre, over_box, h)
            lo = -mean_value_upper(-at_centre, -over_box, h)
            grad2 = grad2 + Iv(np.maximum(np.abs(hi), np.abs(lo))).square()
        mu_box = self.curvature(Tb, tangent)
        mu = np.maximum(mu_box.v.lo, -mean_value_upper(-self.curvature(Tc, tangent), -mu_box, h))
        mu = np.where(np.isfinite(mu) & (mu > 0), mu, np.nan)
        second = grad2 / (Iv(mu) * Db.v * 2.0)
        return upper((Iv(first) + second) * (self.a / Iv(2.0).sqrt()))

    def cut(self, box):
        """``box`` with ``lam`` cut to the last read's tie ``lam <= kappa (-p_0 - 1)`` (rounded up;
        the box itself where there is no tie), or None where nothing of it is left."""
        if self.kappa is None:
            return box
        l0, l1, p0, p1 = box
        with flint.ctx.workprec(64):
            top = arb_ceil(flint.arb(self.kappa) * (-flint.arb(p0) - 1))
        return None if top <= l0 else (l0, min(l1, top), p0, p1)

    def crude(self, l0: float, l1: float, p0: float, p1: float, *_) -> flint.arb:
        """The closed form of :mod:`bounds.margin` at the box's worst point (module docstring);
        after a first point that of the points ``1..L`` alone (the arc of ``L - 1`` at the foot
        ``p - 1``, mirrored to ``p - 1 <= (L - 1)/2``: :func:`last_arc_upper`)."""
        if self.first is None:
            return _closed_form(self.a, self.R, self.L, l0, l1, p0, p1)
        L = self.L - 1
        q0, q1 = p0 - 1.0, p1 - 1.0
        if q0 > L / 2:
            q0, q1 = L - q1, L - q0
        return _closed_form(self.a, self.R, L, l0, l1, q0, q1)


def _closed_form(a: float, R: float, L: int, l0: float, l1: float, p0: float, p1: float) -> flint.arb:
    """The closed form of :mod:`bounds.margin` for the arc of ``L`` at its worst point of the box
    ``[l0, l1] x [p0, p1]`` (module docstring; ``p0 <= L/2``)."""
    ps = flint.arb(min(p1, L / 2))
    E = L * (ps - flint.arb(L) / 2) ** 2 + flint.arb(L) ** 3 / 12 - flint.arb(L) / 3
    a0, a1 = flint.arb(l0), flint.arb(l1)
    if float(E.mid()) > 0:
        best = (E / L).sqrt().max(a0).min(a1)
        den = L * best + E / best
    else:
        den = L * a0 + E / a0 if l0 > 0 else flint.arb(0)
    if l0 > 0 and 0 <= float(ps.mid()) <= L:
        theta = (ps / a0).atan() + ((L - ps) / a0).atan()
    elif p1 < 0:
        theta = (a1 / flint.arb(-p1)).atan()
    else:
        theta = flint.arb.pi()
    den = den.max(flint.arb(L) / 2)
    return flint.arb(a) * R * (1 + theta / 2) / den


def _times(a, b):
    """The complex product of pairs ``(re, im)`` (jets, intervals or floats)."""
    return (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0])


def _replaced(x: Jet, where: np.ndarray, value: float) -> Jet:
    """``x`` with the entries ``where`` replaced by the constant ``value``."""
    pick = lambda iv, c: Iv(np.where(where, c, iv.lo), np.where(where, c, iv.hi))
    return Jet(pick(x.v, value), tuple(pick(g, 0.0) for g in x.g))


class _Least:
    """Several certificates (:class:`_Arc` with other weights) over one domain: a box's bound is
    the least of theirs, each being valid for every geometry of the box."""

    def __init__(self, arcs):
        self.arcs, self.L = arcs, arcs[0].L

    def boxes(self, *cols) -> np.ndarray:
        # fmin: a set whose enclosure fails on a box (nan) leaves the box to the others
        return np.fmin.reduce([arc.boxes(*cols) for arc in self.arcs], axis=0)

    def crude(self, *box) -> flint.arb:
        return self.arcs[0].crude(*box)

    def cut(self, box):
        return self.arcs[0].cut(box)


def _tied_family(arc: _Arc, cell: Cell, L: int):
    """With a gain, the certificates of the greedy heads on the tied arcs at the feet
    :data:`TIED_FEET` times the construction's (its ``omega, chi``), the least of them on every
    box (:class:`_Least`): one weight set is tight only near the arc it is read from, and with the
    construction's alone the search stalls at feet up to ~1.5 times its own, where the sup of (W)
    with its weights exceeds the margin of the arcs it is evaluated at by some 4% (``d = 8``)."""
    if not arc.gain:
        return arc
    F, omega, chi = last_tied.count_shape(cell, L)
    n = np.arange(L + 1, dtype=np.float64)
    arcs = (last_tied.tied_arc(cell, L, f * F, omega, chi) for f in TIED_FEET)
    return _Least([arc.reweighted(_weights(y, lam, n - foot)) for lam, foot, y in arcs])


def _cat(parts) -> Iv:
    return Iv(np.concatenate([x.lo for x in parts], axis=-1), np.concatenate([x.hi for x in parts], axis=-1))


def _neg(a):
    return (-a[0], -a[1])


def arc_upper(cell: Cell, L: int) -> float:
    """A float ``U`` with ``m <= U`` for every parameter set of the arc cell ``cell`` with every
    vector of norm at most 1 (module docstring); ``inf`` where ``L < 4`` (no certificate)."""
    if L < 4:
        return float("inf")
    check_float_mode()
    arc = _Arc(cell, L)
    lam_c, span = arc.q * L, 1e-9 * L
    centre = (lam_c - span, lam_c + span, arc.p - span, arc.p)
    with flint.ctx.workprec(64):
        if arc.kappa is None:
            tail = arb_ceil(flint.arb(arc.a) * arc.R * (1 + flint.arb.pi() / 2) / (4 * L * L))
            root = (0.0, 4.0 * L, L / 2 - 2.0 * L, arc.p_max)
        else:  # the tied domain (module docstring), beyond p = -FAR L the closed form
            k, far = flint.arb(arc.kappa), FAR * L
            tail = arb_ceil(flint.arb(arc.a) * arc.R * (1 + k.atan() / 2) * k / (L * far * (1 + k * k)))
            root = arc.cut((0.0, float(far), -float(far), arc.p_max))
            arc = _tied_family(arc, cell, L)
    return _search(arc, centre, root, tail, _halves)


def _search(arc: _Arc, centre, root, tail: float, halves) -> float:
    """The branch and bound of the module docstring from the box ``root``: the largest leaf
    bound (or ``tail``, the bound outside the root), splitting by ``halves`` until every leaf is
    within ``1 + TOLERANCE`` of the certificate's value on the small box ``centre`` (or
    :data:`MAX_BOXES`); ``inf`` where that value is not finite."""
    # infinite ends (a box where an enclosure fails) make nan, which only weakens a bound
    with flint.ctx.workprec(64), np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        reference = float(arc.boxes(*([c] for c in centre))[0])
        if not math.isfinite(reference):
            return float("inf")
        stop = reference * (1 + TOLERANCE)

        def bounds(boxes):
            values = np.array([arb_ceil(arc.crude(*b)) for b in boxes])
            open_ = [i for i, b in enumerate(boxes) if values[i] > stop and b[0] > 0]
            if open_:
                cols = np.array([boxes[i] for i in open_]).T
                values[open_] = np.minimum(values[open_], arc.boxes(*cols))
            return values

        heap = [(-float(bounds([root])[0]), root)]
        split, batch_size = 0, max(8, min(1024, BATCH_ENTRIES // (arc.L + 1)))
        while split < MAX_BOXES and -heap[0][0] > stop:
            batch = []
            while heap and -heap[0][0] > stop and len(batch) < batch_size:
                batch.append(heapq.heappop(heap)[1])
            split += len(batch)
            children = [c for box in batch for c in map(arc.cut, halves(box)) if c is not None]
            for value, child in zip(bounds(children), children):
                heapq.heappush(heap, (-float(value), child))
        return max(-heap[0][0], tail)


def _halves(box, weights=(1.0, 1.0)):
    """The two halves of a box ``(l0, l1, p0, p1, ...)`` (pairs of ends, one per side) across its
    widest side, side ``i``'s width counted ``weights[i]`` times (the first widest on a tie)."""
    sides = [box[i:i + 2] for i in range(0, len(box), 2)]
    widths = [w * (b - a) for w, (a, b) in zip(weights, sides)]
    k = widths.index(max(widths))
    a, b = sides[k]
    mid = 0.5 * (a + b)
    return tuple(tuple(v for j, side in enumerate(sides) for v in (half if j == k else side))
                 for half in ((a, mid), (mid, b)))


# ---------------------------------------------------------------------- the count 0 at the last read
#: a side of the first point's position counts as this many count units of ``lam`` or ``p`` when
#: :func:`last_arc_upper` picks the side of a box to halve (a heuristic: any partition is a proof)
FIRST_WEIGHT = 0.5


def zero_range(cell: Cell) -> tuple[float, float]:
    """``(n_lo, n_hi)``, floats rounded outward: the position ``n_* = -1/(2 rho)`` of the count 0
    on the arc of the counts ``1..L`` read last after post-norm (softmax, :func:`last_arc_upper`)
    for every parameter set with embeddings of norm at most 1.

    *Proof.*  ``rho = exp(tau <e_a, e_a - e_s>)`` and ``|e_a|^2 - |e_a| |e_s| <= <e_a, e_a - e_s>
    <= |e_a|^2 + |e_a| |e_s|``: with ``|e_a|, |e_s| <= 1`` the left side is at least ``|e_a|^2 -
    |e_a| >= -1/4`` and the right at most 2, so ``rho`` lies in ``[exp(-tau/4), exp(2 tau)]`` and
    ``n_*`` in ``[-exp(tau/4)/2, -exp(-2 tau)/2]``, ``tau = 1/sqrt(d)``."""
    with flint.ctx.workprec(64):
        tau = 1 / flint.arb(cell.d).sqrt()
        return arb_floor(-(tau / 4).exp() / 2), arb_ceil(-(-2 * tau).exp() / 2)


def last_certificate(cell: Cell, L: int):
    """``(k, q, p, n_*)``: the weights of the last read's head
    (:class:`constructions.last_post.LastArcHead`) on its points ``n_*, 1, ..., L`` read as a
    dual certificate (:func:`_weights`), its ``q = lam / L``, its foot ``p`` and the position
    ``n_*`` of its count 0."""
    des = classification.design(cell)
    shape = des.arc_shape(L)
    foot, first = des.foot_at(L), -float(des.head_u(L))
    x = np.concatenate([[first], np.arange(1, L + 1, dtype=np.float64)]) - foot
    return _weights(des.arc_points(L, shape), shape[0] * L, x), shape[0], foot, first


def last_arc_upper(cell: Cell, L: int) -> float:
    """A float ``U >= m`` for every parameter set of ``cell`` (softmax attention with post-norm,
    ``eps = 0``, the count task read last; classification with every vector of norm at most 1),
    ``L >= 5``, by the dual certificate (W) of all ``L + 1`` outputs; ``inf`` below.

    *The outputs* (:mod:`constructions.last_post`).  ``z_1..z_L`` are the points ``n = 1..L`` of
    an arc ``R unit(lam, n - p)`` and ``z_0`` its point at ``n_* = -1/(2 rho)``, which lies in
    :func:`zero_range` (below 1: the points are in the order of the classes).  So (W) holds with
    the offsets ``x = (n_*, 1, ..., L) - p``: the chords and turns of the module docstring with
    the first gap ``1 - n_*`` (:meth:`_Arc.geometry`), and its supremum over ``(lam, p, n_*)`` is
    proven by the branch and bound over boxes of the three, ``n_*`` a third variable of the
    mean-value form (``d theta_0 / d n_* = lam / S_0``).  Bare, the bound is largest at the
    smallest ``n_*`` for every arc, so ``n_*`` is fixed there: ``n_*`` enters (W) only through
    the first chord and the first turn; as ``n_*`` decreases ``theta_0`` decreases, the chord
    ``l_0 = 2R sin((theta_1 - theta_0)/2)`` grows (``D`` falls) and the half-turn ``h_1 = (theta_2
    - theta_0)/4`` grows in ``(0, pi/4)``, so ``|G_1|^2 = (k_0 - k_1)^2 + 4 k_0 k_1 sin^2 h_1``
    grows (``N`` rises), and ``|G_0| = k_0`` stays.

    *The domain.*  The points ``1..L`` alone are the arc of ``L' = L - 1`` at the foot ``p - 1``,
    whose margin is at least ``m`` (fewer conditions, and a head of those classes), so outside
    ``lam <= 4L'``, ``|p - 1 - L'/2| <= 2L'`` the closed form of the module docstring for ``L'``
    (and its mirror image) bounds ``m`` by ``a R (1 + pi/2)/(4 L'^2)``, and inside it bounds
    every box too (:meth:`_Arc.crude`); no mirror symmetry is used for (W), as ``z_0`` has
    none."""
    if L < 5:
        return float("inf")
    check_float_mode()
    n_lo, n_hi = zero_range(cell)
    if not cell.affine.gain:
        n_hi = n_lo
    arc = _Arc(cell, L, (n_lo, n_hi))
    Lp = L - 1
    lam_c, span = arc.q * L, 1e-9 * L
    centre = (lam_c - span, lam_c + span, arc.p - span, arc.p + span, n_lo, n_lo)
    root = (0.0, 4.0 * Lp, 1 + Lp / 2 - 2.0 * Lp, 1 + Lp / 2 + 2.0 * Lp, n_lo, n_hi)
    with flint.ctx.workprec(64):
        tail = arb_ceil(flint.arb(arc.a) * arc.R * (1 + flint.arb.pi() / 2) / (4 * Lp * Lp))
    return _search(arc, centre, root, tail, _thirds)


def _thirds(box):
    """:func:`_halves` of a box ``(l0, l1, p0, p1, n0, n1)``, the third side counted
    :data:`FIRST_WEIGHT` times."""
    return _halves(box, (1.0, 1.0, FIRST_WEIGHT))
