"""The precision wall: the largest count a cell still reaches when its pass runs in a format.

Every verdict is that of the rounded pass of :mod:`verify.rounded` (the format *is* the
arithmetic, so its numbers are the result, not a screen of an exact one).

**Regression** (:func:`regression_walls`), for each format ``F``:

* ``L_wall_construction`` -- the largest ``L`` such that, for **every** ``L' <= L``, the
  construction of :mod:`constructions.regression` for ``L'`` at its ``B_min(L')`` counts to
  ``L'`` in ``F``.  The construction changes with ``L'``, so "counts at ``L'``" need not be
  monotone; the prefix is what a user choosing ``L`` can rely on.  ``L_last_construction`` is
  the largest ``L`` at which it counts at all (on the scanned prefix: the scan stops once
  every format has failed, so it is at least the wall).  The budget is
  ``B(L) = (1 + RTOL) B_min(L)`` with ``B_min`` the closed form of
  :func:`constructions.closed_forms.formula` where it holds and the float64 optimum of the
  reduced problem (:meth:`constructions.regression.RegressionDesign.estimate`) elsewhere:
  ``bounds.search`` certifies ``B_min`` in ball arithmetic, but ``verify`` sits below
  ``bounds`` and may not import it, so the wall uses the same construction at the same
  budget up to the sweep's bisection tolerance (``RTOL`` is the sweep's default ``rtol``;
  ``L = 1``, where ``B_min = 0`` is an infimum, uses the sweep's witness budget
  (:func:`verify.certify.witness_budget`: ``1e-3``, doubled until the witness's read-out has
  the margin ``WITNESS_MARGIN = 1e-6``, about the margin of the constructions at
  ``(1 + RTOL) B_min``, so that ``L = 1`` is scanned on the footing of every other ``L``);
  tests/test_precision.py checks both against ``bounds.search``).  At that budget the construction's margin is only about ``RTOL``
  relative, so a format whose rounding exceeds it fails at once: the certified optimum has no
  room for rounding.

  *The one-sided arc* (linear attention with post-RMSNorm) has no closed form: each
  ``B_min(L)`` is the fixed point of a float search
  (:meth:`constructions.regression.FootDesign.estimate`) and each construction a search over its
  shape (:func:`constructions.one_sided.best_shape`).  The scan runs them at every ``L`` in
  increasing order, which is what makes that affordable: the fixed point at ``L`` starts from
  the one at ``L - 1`` and the shape search from its shape (:func:`constructions.one_sided._warm`),
  and the least shape is the edge of the admissible ones, a root of the smooth Remez margin
  (:func:`constructions.one_sided._edge`) -- the same functions the sweep calls, started nearer
  their answers.
* ``L_wall_best`` -- the largest ``L`` that some *searched member* of the construction
  family (the construction for a target ``L_t`` at a budget ``B >= B_min(L_t)``) counts to in
  ``F``.  Counting to ``L`` implies counting to every ``L' < L`` (same parameters), so this is
  monotone by definition; a larger budget buys margin (relative slack) but costs absolute
  precision (larger vectors round more coarsely), which the search weighs by running each
  member.  The search (:func:`_targets`, :data:`BUDGET_RATIO`, :data:`BUDGET_STEPS`): targets
  ``1..32`` then geometric with ratio ``2^(1/8)`` up to ``Lmax`` (and ``L*`` where finite), each at budgets
  ``(1 + RTOL) B_min 2^k``, ``k = 0..6``, upward until a member counts to its
  target; a format stops being searched at targets beyond ``2 L + EXPLORE`` (``L`` its best so far)
  or beyond its integer ceiling ``2^p`` (no parameters count past it, below).  The result is
  therefore a lower bound on the wall of the whole family in ``F`` (the members tried are
  reported), and ``L_wall_best >= L_wall_construction`` (the construction members are
  included).
* ``reason`` -- why the format stops the family there, diagnosed from the stages of a pass
  (:func:`diagnose`) of the member that goes furthest towards a larger target, at its first
  failing count (:func:`_why_it_stops`); the first of

  ``overflow``                 a parameter or a stage is not finite (inf, or NaN: float8_e4m3fn
                               has no infinity);
  ``variance_zero``            a norm statistic rounds to 0 (with eps = 0 the norm divides by 0);
  ``exp_underflow``            ``p_a = exp(sigma_a - m)`` rounds to 0: the counted tokens get no
                               weight;
  ``not_representable``        no number of ``F`` lies within 1/2 of ``n`` (``n > 2^p``, odd);
  ``sum_stagnates``            the running softmax denominator ``Z`` or every coordinate of the
                               numerator ``N`` no longer changes when one more term is added;
  ``weights_round_together``   the attention output ``N_n / Z_n`` rounds to its value at ``n - 1``;
  ``absorbed``                 ``A`` moves but ``e_s + A`` rounds to the residual at ``n - 1``;
  ``norm_rounds_together``     the post-norm output is the same at ``n - 1`` and ``n``;
  ``readout_rounds_together``  ``z`` moves but the read-out rounds to the same ``y``;
  ``construction_fails``       the member fails at ``n`` in exact arithmetic too (mp50);
  ``rounding_error``           none of these: the accumulated rounding error exceeds the margin;
  ``no_construction``          no parameters count to the next ``L`` in this cell
                               (bare pre-norm beyond ``L*``);
  ``none``                     it counts at every ``L <= Lmax``.

*The integer ceiling.*  ``y`` is stored in ``F``, so ``L <= 2^p`` in every regression wall
(:attr:`verify.formats.Format.integer_ceiling`): a theorem, tested.  No other order between
formats is guaranteed: a coarser rounding can cancel an error that a finer one keeps, so
neither "more bits never hurt" nor "accumulating in float32 never hurts" is asserted.

**Classification** (:func:`classification_walls`): the unit-norm head of
:mod:`constructions.classification` at each ``L`` of the grid of powers of two (a head and its
pass cost ``(L+1)^2 d``, so not every ``L``); ``L_wall_construction`` is the largest grid ``L``
such that every grid ``L' <= L`` classifies.  The family has one head per ``L`` and scaling a
head by a power of two rounds identically until it over- or underflows, so there is no
budget to search: ``L_wall_best`` is the same number.  Each row reports the smallest logit
margin ``m`` of the head (float64 pass), the largest logit ``S`` and ``bits_needed =
ceil(log2(2 S / m))``: a ``p``-bit format rounds each logit by up to ``S 2^-p``, so below that
many bits two logits can swap (an estimate, not a proof; the rows show it against the walls).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import mpmath
import numpy as np
import sympy

from constructions import classification, closed_forms, laws, regression, zoom
from constructions.cell import MAX_B, Cell
from constructions.symbols import L as L_SYMBOL
from verify.formats import Arith, Format
from verify.forward import reduced
from verify.certify import witness_budget
from verify.rounded import Pass, float_values, run

#: relative distance of the construction wall's budget above B_min (the sweep's default rtol)
RTOL = 1e-6
#: the best-budget search: budgets (1 + RTOL) B_min BUDGET_RATIO^k, k = 0..BUDGET_STEPS
BUDGET_RATIO = 2.0
BUDGET_STEPS = 6
#: the relative bracket around the closed form's extremal shape searched for the construction
SHAPE_BRACKET = 5e-3
#: targets 1..SMALL_TARGETS, then geometric with ratio TARGET_RATIO up to Lmax
SMALL_TARGETS = 32
TARGET_RATIO = 2 ** (1 / 8)
#: a format is searched at targets up to twice its best count so far plus this
EXPLORE = 16
#: the largest Lmax accepted: regression scans every L (one construction each), classification
#: the powers of two (a head of (L+1) d numbers and (L+1)^2 d logit terms per format each)
MAX_LMAX = {"regression": 1 << 14, "classification": 1 << 12}


@dataclass
class Wall:
    """The findings for one format."""

    fmt: Format
    construction: int | None = None  # L_wall_construction (None: not decided yet)
    last_construction: int = 0
    construction_reason: str | None = None
    construction_detail: str = ""
    construction_failure: dict | None = None  # {"L", "n"} of the first failing construction
    best: int = 0
    member: dict | None = None  # {"L_target", "B"} reaching best
    reason: str | None = None
    detail: str = ""
    tried: int = 0
    members: list = field(default_factory=list)  # (c, L_target, B) of every member run
    done: bool = False  # the best-budget search reached the ceiling of this format

    def limit(self, Lmax: int) -> int:
        """No count beyond ``min(Lmax, 2^p)`` can be reached (regression)."""
        return min(Lmax, self.fmt.integer_ceiling)


# ---------------------------------------------------------------------------- B_min(L)
class Budgets:
    """``B_min(L)`` of a regression cell: the closed form where it holds, else the float64
    estimate (None where nothing counts)."""

    def __init__(self, cell: Cell):
        self.cell = cell
        self.design = regression.design(cell)
        self.form = closed_forms.formula(cell)
        self.builds = {}
        self.pieces = [] if self.form is None else [
            (p, sympy.lambdify(L_SYMBOL, p.B_min, "numpy")) for p in self.form.pieces]
        self.shapes = [] if self.form is None or self.design.family == "line" else [
            (p, sympy.lambdify(L_SYMBOL, p.extremal["rho"] if "rho" in p.extremal
                               else sympy.sqrt(p.extremal["lambda_sq"]), "numpy"))
            for p in self.form.pieces]
        self.cache = {}

    def construction(self, L: int, B: float):
        """The construction for ``L`` at budget ``B`` (:meth:`~constructions.regression.RegressionDesign.build`).

        Where the closed form names the extremal shape ``t*`` (the corner ``rho*``, the arc
        ``lam*``), the best shape at a budget just above ``B_min`` lies next to it: it is
        searched in ``[t*/(1 + SHAPE_BRACKET), (1 + SHAPE_BRACKET) t*]`` (a zoom like
        ``best_shape``'s, without its global grid of 513 shapes, whose cost grows with ``L``); if
        no shape there has positive slack, the full search decides.
        """
        piece = next((f for p, f in self.shapes if p.holds(L)), None)
        if piece is not None:
            t0 = float(piece(float(L)))
            lo, hi = self.design.domain(L, B)
            a, b = max(lo, t0 / (1 + SHAPE_BRACKET)), min(hi, max(t0, lo) * (1 + SHAPE_BRACKET))
            if a <= b:
                t, slack = zoom.maximize(lambda tt: self.design.slack(tt, L, B), a, b, points=17, rounds=5)
                if slack > 0 and self._admissible(L, B, t):
                    return self.design.build(L, B, shape=t)
        return self.build(L, B)

    def build(self, L: int, B: float):
        """The member of the family for ``L`` at budget ``B`` (``design.build``, memoised: the
        best-budget search and the diagnosis run members the construction scan built)."""
        if (L, B) not in self.builds:
            self.builds[L, B] = self.design.build(L, B)
        return self.builds[L, B]

    def _admissible(self, L: int, B: float, t: float) -> bool:
        """The counting interval at shape ``t`` is open within the capacity, in mpmath (50
        digits): ``lo(t) < min(hi(t), cap(t, B))`` (the float64 slack is only a screen)."""
        with mpmath.workdps(50):
            tv = mpmath.mpf(t)
            lo, hi = self.design.interval(tv, L)
            return bool(lo < min(hi, self.design.capacity_mp(tv, mpmath.mpf(B))))

    def beyond_reach(self, L: int) -> bool:
        """No parameters count to ``L``: the closed form ends at a finite ``L*`` (bare pre-norm)
        and ``L`` is beyond it, or (``eps = 0``) post-norm below its smallest width
        (:func:`constructions.laws.smallest_d`) maps every input to one of two points, so no
        ``L >= 2`` counts."""
        if self.cell.post and self.cell.eps == 0 and self.cell.d < laws.smallest_d(self.cell):
            return L >= 2
        return self.form is not None and self.form.L_max is not None and L > self.form.L_max

    def b_min(self, L: int):
        if L not in self.cache:
            value = None
            if not self.beyond_reach(L):
                piece = next(((p, f) for p, f in self.pieces if p.holds(L)), None)
                value = float(piece[1](float(L))) if piece else self.design.estimate(L)
            self.cache[L] = value
        return self.cache[L]

    @functools.cached_property
    def witness_budget(self) -> float:
        """The budget of the ``L = 1`` construction, where ``B_min = 0`` is an infimum: the
        sweep's witness (:func:`verify.certify.witness_budget`)."""
        return witness_budget(self.build)

    def construction_budget(self, L: int):
        if L == 1:
            return self.witness_budget
        b = self.b_min(L)
        return None if b is None else b * (1 + RTOL)


# ---------------------------------------------------------------------------- diagnosis
def _finite(x) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x).astype(np.float64))))


def _same(x, n) -> bool:
    return bool(np.array_equal(np.asarray(x[n]).astype(np.float64), np.asarray(x[n - 1]).astype(np.float64)))


def _stagnant_since(x, n: int) -> int:
    """The first ``k >= 1`` from which ``x[k] = x[k+1] = ... = x[n]`` (counts ``1..n`` share
    one running sum; ``x[0]`` belongs to the input without ``a``)."""
    k = n
    while k > 1 and _same(x, k):
        k -= 1
    return k


def diagnose(ps: Pass, n: int, params) -> tuple[str, str]:
    """``(reason, detail)`` for the failure of the pass ``ps`` at the count ``n`` (module docstring)."""
    ar = ps.arith
    F = ar.store.name
    where = F if not ar.mixed else f"{F} (accumulating in {ar.work.name})"
    for name, v in ps.params.items():
        if not _finite(v):
            return "overflow", f"the parameter {name} overflows {F} (largest finite {ar.store.max:g})"
    for t, stat in ps.pre_stat.items():
        if float(stat) == 0:
            return "variance_zero", f"the pre-norm statistic of token {t} rounds to 0 in {where}"
    for t in ("s", "a"):
        if not _finite(ps.h[t]) or not _finite(ps.sigma[t]):
            return "overflow", f"the value or the score of token {t} overflows in {where}"
    if ps.p is not None and n >= 1 and float(ar.stored(ps.p[1])) == 0:
        gap = float(ps.sigma["a"]) - float(ps.sigma["s"])
        return "exp_underflow", (f"p_a = exp(sigma_a - sigma_s) = exp({gap:.4g}) rounds to 0 in {where}: "
                                 "the counted tokens get no weight")
    stages = [("the softmax denominator Z", ps.Z), ("the attention numerator N", ps.N),
              ("the attention output A", ps.A), ("the residual r", ps.r)]
    if ps.stat is not None:
        if float(ps.stat[n]) == 0:
            return "variance_zero", f"the post-norm statistic of r at n = {n} rounds to 0 in {where}"
        stages += [("the post-norm statistic", ps.stat), ("the post-norm output z", ps.z)]
    out = ps.y if ps.y is not None else ps.logits
    stages.append(("the read-out", out))
    for label, arr in stages:
        if arr is not None and not _finite(arr[n]):
            return "overflow", f"{label} overflows at n = {n} in {where}"
    if ps.y is not None and not ar.store.representable_within_half(n):
        spacing = 2.0 ** (math.floor(math.log2(n)) - ar.store.bits + 1)  # n is a normal number here
        return "not_representable", (f"no {F} number lies within 1/2 of n = {n} (the read-out y is "
                                     f"stored in {F}, spacing {spacing:g} there)")
    if n >= 2:
        if ps.Z is not None and _same(ps.Z, n):
            since = _stagnant_since(ps.Z, n)
            return "sum_stagnates", (f"the running softmax denominator stopped growing at n = {since}: "
                                     f"Z + p_a rounds to Z = {float(ps.Z[n]):g} in {ar.work.name}, so the "
                                     "read-out drifts off the curve the parameters were built for")
        if _same(ps.N, n):
            since = _stagnant_since(ps.N, n)
            return "sum_stagnates", (f"the running attention numerator stopped growing at n = {since}: "
                                     f"N + P_a h_a rounds to N in every coordinate ({ar.work.name})")
    if n >= 1 and _same(out, n):
        if _same(ps.A, n):
            return "weights_round_together", (f"the attention output N_n/Z_n rounds to the same {F} "
                                              f"vector at n = {n - 1} and n = {n}")
        if _same(ps.r, n):
            return "absorbed", f"A moves but e_s + A rounds to the same residual at n = {n - 1} and {n} in {F}"
        if ps.stat is not None and _same(ps.z, n):
            return "norm_rounds_together", f"the post-norm output is the same at n = {n - 1} and {n} in {F}"
        return "readout_rounds_together", f"z moves but the read-out rounds to the same value at n = {n - 1} and {n}"
    return _against_exact(ps, n, params, where)


def _against_exact(ps: Pass, n: int, params, where: str) -> tuple[str, str]:
    """The member in exact arithmetic (mpmath, 50 digits) at ``n``: a failure there is the
    construction's; otherwise rounding error beyond the margin."""
    with mpmath.workdps(50):
        exact = reduced(params, [n], backend="mp50")
    if ps.y is not None:
        y = float(ps.y[n])
        ye = float(exact[0])
        margin = 0.5 - abs(ye - n)
        if margin <= 0:
            return "construction_fails", f"y({n}) = {ye:.6g} in exact arithmetic: the member itself fails there"
        k = min(17, max(9, 3 + math.ceil(-math.log10(margin))))  # digits that show the margin
        return "rounding_error", (f"y({n}) = {y:.{k}g} in {where}, exact {ye:.{k}g}: the rounding error "
                                  f"{y - ye:.3g} exceeds the margin {margin:.3g}")
    lg = np.array([float(v) for v in exact[0]])
    own = lg[n]
    others = np.delete(lg, n)
    margin = own - others.max()
    if margin <= 0:
        return "construction_fails", f"count {n} is not the unique argmax in exact arithmetic"
    got = ps.margins()[n]
    return "rounding_error", (f"the logit margin at n = {n} is {margin:.3g} exactly but {got:.3g} in {where}: "
                              "the rounding of the logits exceeds it")


# ---------------------------------------------------------------------------- regression
def _stop(w: Wall, previous: int, L: int, ps, c: int, params) -> None:
    """The format fails at count ``c + 1`` of the pass ``ps`` at ``L``: its construction wall is
    the ``L`` before, with the diagnosed reason."""
    w.construction = previous
    w.construction_failure = {"L": L, "n": c + 1}
    w.construction_reason, w.construction_detail = diagnose(ps, c + 1, params)


def _targets(Lmax: int, reach: int | None = None) -> list[int]:
    """The targets of the best-budget search (module docstring), and the cell's last countable
    ``L*`` (``reach``) if it is finite."""
    out = set(range(1, min(SMALL_TARGETS, Lmax) + 1)) | ({reach} if reach and reach <= Lmax else set())
    x = float(SMALL_TARGETS)
    while x < Lmax:
        out.add(int(round(x)))
        x *= TARGET_RATIO
    out.add(Lmax)
    return sorted(out)


def _record(wall: Wall, c: int, L_t: int, B: float) -> None:
    if c > wall.best or wall.member is None:
        wall.best, wall.member = max(c, 0), {"L_target": L_t, "B": B}


def regression_walls(cell: Cell, Lmax: int, ariths: dict, progress=None) -> dict:
    """``{format name: Wall}`` for a regression cell (module docstring).

    ``ariths`` maps format names to :class:`~verify.formats.Arith`; ``progress(total)``, if
    given, returns an object with ``update(k)`` and ``close()`` (a tqdm bar).
    """
    budgets = Budgets(cell)
    walls = {name: Wall(ar.store) for name, ar in ariths.items()}
    bar = progress(Lmax) if progress else None
    # (a) the construction at B_min, at every L, until every format has failed
    alive = set(walls)
    previous = 0
    for L in range(1, Lmax + 1):
        B = budgets.construction_budget(L)
        if B is None:
            for name in alive:
                w = walls[name]
                w.construction = previous
                w.construction_reason = "no_construction"
                w.construction_detail = (f"no parameters count to L = {L} in this cell (bare pre-norm beyond L*, "
                                         "or post-norm below its smallest width)")
            alive = set()
            break
        params = budgets.construction(L, B)
        values = float_values(params)
        for name in sorted(alive):
            w, ar = walls[name], ariths[name]
            ps = run(params, L, ar, values)
            c = ps.counts_up_to()
            _record(w, min(c, L), L, B)
            if c >= L:
                w.last_construction = L
            else:
                _stop(w, previous, L, ps, c, params)
                alive.discard(name)
        previous = L
        if bar:
            bar.update(1)
        if not alive:
            break
    for name in alive:
        walls[name].construction = Lmax
        walls[name].construction_reason = "none"
        walls[name].construction_detail = f"the construction counts at every L <= {Lmax}"
    if bar:
        bar.close()
    # (b) the best budget of the family
    targets = _targets(Lmax, budgets.form.L_max if budgets.form is not None else None)
    bar = progress(len(targets)) if progress else None
    for w in walls.values():
        w.done = w.best >= w.limit(Lmax)
    for L_t in targets:
        if bar:
            bar.update(1)
        active = [n for n, w in walls.items()
                  if not w.done and L_t <= w.fmt.integer_ceiling and L_t <= 2 * w.best + EXPLORE]
        if not active:
            continue
        base = budgets.b_min(L_t) if L_t > 1 else budgets.witness_budget
        if base is None:
            continue
        for k in range(BUDGET_STEPS + 1):
            B = base * (1 + RTOL) * BUDGET_RATIO ** k
            if B > MAX_B or not active:
                break
            params = budgets.build(L_t, B)
            values = float_values(params)
            for name in list(active):
                w = walls[name]
                ps = run(params, min(Lmax, w.fmt.integer_ceiling + 1), ariths[name], values)
                c = ps.counts_up_to()
                w.tried += 1
                w.members.append((c, L_t, B))
                _record(w, c, L_t, B)
                if c >= L_t:
                    active.remove(name)
                w.done = w.best >= w.limit(Lmax)
    if bar:
        bar.close()
    for name, w in walls.items():
        w.reason, w.detail = _why_it_stops(w, budgets, Lmax, ariths[name])
    return walls


def _why_it_stops(w: Wall, budgets: Budgets, Lmax: int, ar: Arith) -> tuple[str, str]:
    """The reason of a best wall: at the integer ceiling, why its member fails at ``2^p + 1``;
    otherwise why the *nearest miss* fails -- the member for a larger target that got furthest
    (smallest target, then budget, among ties), at its first failing count.  (The best member
    itself usually stops at its own target, where it fails in exact arithmetic too: that says
    where the member ends, not what stops the format.)"""
    if w.best >= Lmax:
        return "none", f"counts at every L <= {Lmax}"
    if budgets.beyond_reach(w.best + 1):
        return "no_construction", f"no parameters count to L = {w.best + 1} in this cell"
    misses = [m for m in w.members if m[1] > w.best]
    if w.best >= w.fmt.integer_ceiling or not misses:
        L_t, B = w.member["L_target"], w.member["B"]
    else:
        _, L_t, B = min(misses, key=lambda m: (-m[0], m[1], m[2]))
    params = budgets.build(L_t, B)
    ps = run(params, min(Lmax, w.fmt.integer_ceiling + 1), ar)
    n = ps.counts_up_to() + 1
    reason, detail = diagnose(ps, n, params)
    return reason, f"{detail} (the member for L = {L_t} at B = {B:.4g})"


# ---------------------------------------------------------------------------- classification
def classification_grid(Lmax: int) -> list[int]:
    out, L = [], 2
    while L < Lmax:
        out.append(L)
        L *= 2
    return out + [Lmax]


def classification_walls(cell: Cell, Lmax: int, ariths: dict, progress=None):
    """``({format name: Wall}, rows)`` for a classification cell (module docstring)."""
    head = classification.design(cell)
    grid = classification_grid(Lmax)
    for L in grid:
        classification.check_size(cell, L)
    walls = {name: Wall(ar.store) for name, ar in ariths.items()}
    rows = []
    alive = set(walls)
    bar = progress(len(grid)) if progress else None
    previous = 0
    ref = Arith.of("float64")
    for L in grid:
        params = head.build(L)
        exact64 = run(params, L, ref)
        margins = exact64.margins()
        m = float(np.min(margins))
        S = float(np.max(np.abs(exact64.logits.astype(np.float64))))
        rows.append({"L": L, "margin": m, "logit_scale": S,
                     "bits_needed": math.ceil(math.log2(2 * S / m)) if m > 0 else None})
        for name in sorted(alive):
            w, ar = walls[name], ariths[name]
            ps = exact64 if ar == ref else run(params, L, ar)
            c = ps.counts_up_to()
            if c >= L:
                w.last_construction = w.best = L
                w.member = {"L_target": L, "B": 1.0}
            else:
                _stop(w, previous, L, ps, c, params)
                alive.discard(name)
        previous = L
        if bar:
            bar.update(1)
        if not alive:
            break
    if bar:
        bar.close()
    for name, w in walls.items():
        if name in alive:
            w.construction, w.construction_reason = Lmax, "none"
            w.construction_detail = f"the head classifies at every grid L <= {Lmax}"
        w.best = w.construction
        w.reason, w.detail = w.construction_reason, w.construction_detail
    return walls, rows
