"""The projective arc: what a linear read-out after post-norm can count.

With ``eps = 0`` LayerNorm is invariant under positive scaling, so after post-norm the
normaliser of the attention cancels: for either attention the residual is, up to a positive
factor, ``p + n q`` for two fixed vectors, and after centring and scaling
``z(n) = sqrt(d) * unit(P + n Q)`` lies on an arc of the circle of radius ``sqrt(d)`` in the
plane of the centred vectors ``P, Q``.  In that plane write the line ``P + t Q`` by its distance
``lam |Q|`` from the origin and the parameter ``n0`` of its foot; a regression read-out is then

    y(n) = C + R cos(theta(n) - phi),   theta(n) = atan((n - n0)/lam),

with ``R = sqrt(d) * |w projected on the plane|`` (post_bare).

**Symmetric construction.**  Take ``n0 = L/2``, ``phi = pi/2``, ``C = L/2``; with
``x = n - L/2`` and ``s_x = sqrt(lam^2 + x^2)`` the read-out is ``L/2 + b x / s_x`` and, the
error being odd in ``x``, the count conditions are ``s_x (1 - 1/(2x)) < b < s_x (1 + 1/(2x))``
for every ``x > 0``.  The left side increases with ``x``, so

    b_lo(lam) = sqrt(lam^2 + L^2/4) * (1 - 1/L),
    b_hi(lam) = min_{x in {n - L/2 > 0}} sqrt(lam^2 + x^2) * (1 + 1/(2x)).

Counting needs ``b_lo < b_hi``, which holds only for ``lam`` of order ``L^{3/2}``: expanding,
``b_lo ~ lam (1 - 1/L + L^2/(8 lam^2))`` must stay below ``b_hi ~ lam (1 + O(lam^{-2/3}))``.
So ``R ~ L^{3/2}``: the ``L^{3/2}`` of post-norm.
"""

from __future__ import annotations

import functools

import mpmath
import numpy as np


def b_lo(lam, L, sqrt):
    """The smallest read-out amplitude allowed by the outermost count (plain arithmetic, any
    number type with its ``sqrt``)."""
    return sqrt(lam**2 + L**2 / 4) * (1 - 1 / L)


def b_hi_x(lam, x, sqrt):
    """The largest amplitude allowed by the count at offset ``x`` from the centre."""
    return sqrt(lam**2 + x**2) * (1 + 1 / (2 * x))


@functools.cache
def _symbolic() -> dict:
    """The sympy statements, built on first use (module ``__getattr__``): ``B_LO``, ``B_HI_X``
    (:func:`b_lo`, :func:`b_hi_x` of the symbols), ``SHAPE`` (``y(n) = C + A * SHAPE`` with
    ``C = L/2``, shape ``t = lam``) and the symbols this module names."""
    import sympy

    from constructions.symbols import L, lam, n, t, x

    lo, hi = b_lo(lam, L, sympy.sqrt), b_hi_x(lam, x, sympy.sqrt)
    return {"B_LO": lo, "B_HI_X": hi, "SHAPE": (n - L / 2) / sympy.sqrt(t**2 + (n - L / 2) ** 2),
            "L": L, "lam": lam, "n": n, "t": t, "x": x}


@functools.cache
def compiled() -> dict:
    """``B_LO`` and ``B_HI_X`` compiled for mpmath (``_lo``, ``_hi_x``) and numpy (``_lo_np``,
    ``_hi_np``), built on first use (module ``__getattr__``), without sympy where generated
    (:func:`constructions.codegen.lambdified`)."""
    from constructions import codegen

    def make(expr, args, module):
        def lambdify():
            import sympy

            # ``lambda`` is a Python keyword, which lambdify would replace by a numbered Dummy:
            # named ``lam`` the source is the same in every process
            k = _symbolic()
            lam = sympy.Symbol("lam", positive=True)
            return sympy.lambdify(tuple(lam if a == "lam" else k[a] for a in args),
                                  k[expr].xreplace({k["lam"]: lam}), module)
        return lambdify

    parts = {"_lo": ("B_LO", ("lam", "L"), "mpmath"), "_hi_x": ("B_HI_X", ("lam", "x"), "mpmath"),
             "_lo_np": ("B_LO", ("lam", "L"), "numpy"), "_hi_np": ("B_HI_X", ("lam", "x"), "numpy")}
    return {name: codegen.lambdified(f"arc:{name}", module, make(expr, args, module))
            for name, (expr, args, module) in parts.items()}


def __getattr__(name: str):
    if name in ("_lo", "_hi_x", "_lo_np", "_hi_np"):
        return compiled()[name]
    if name in ("B_LO", "B_HI_X", "SHAPE", "L", "lam", "n", "t", "x"):
        return _symbolic()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def centre(t_value, A_value, L_value: int):
    """The constant of the symmetric construction: the middle count ``L/2`` (the error is odd)."""
    return mpmath.mpf(L_value) / 2


def nearest_offsets(lam_value, L_value: int) -> np.ndarray:
    """The offsets ``x = n - L/2 > 0`` (``n = 0..L``) where ``b_hi`` takes its minimum: a float
    array of four candidates on its first axis (each a valid offset) that include the
    minimiser, per ``lam``.

    ``f(x) = sqrt(lam^2 + x^2)(1 + 1/(2x))`` has ``f'(x) = (2x^3 - lam^2)/(2 x^2 sqrt(lam^2 + x^2))``,
    negative below ``x* = (lam^2/2)^{1/3}`` and positive above: over the offsets
    ``delta, delta + 1, ..., L/2`` (``delta = 1`` for even ``L``, ``1/2`` for odd) its minimum is at
    the last offset below ``x*`` or the first above, clipped to that range.  Those two are among
    ``delta + floor(x* - delta) + j``, ``j = -1..2``, also when ``x*`` is off by a rounding.
    """
    lv = np.asarray(lam_value, dtype=np.float64)
    delta = 1.0 if L_value % 2 == 0 else 0.5
    base = np.floor(np.cbrt(lv * lv / 2) - delta)
    steps = _STEPS.reshape((4,) + (1,) * base.ndim)
    return np.minimum(np.maximum((delta + base) + steps, delta), L_value / 2)  # clipped


#: the steps ``j`` of :func:`nearest_offsets`
_STEPS = np.array([-1.0, 0.0, 1.0, 2.0])


def interval(lam_value, L_value: int):
    """``(b_lo, b_hi)`` at ``lam`` for counting to ``L`` (mpmath, exact minimum over x).

    The minimum over the offsets is located by :func:`nearest_offsets` (in floats) and taken at
    full precision over its candidates.
    """
    lv = mpmath.mpf(lam_value)
    lo = compiled()["_lo"](lv, mpmath.mpf(L_value))  # an mpf L keeps 1 - 1/L exact to working precision
    xs = {float(x) for x in nearest_offsets(float(lv), L_value)}
    hi = min(compiled()["_hi_x"](lv, mpmath.mpf(x)) for x in xs)  # offsets are halves of integers: exact
    return lo, hi


def interval_float(lam_value: np.ndarray, L_value: int):
    """Vectorised float64 version of :func:`interval` (a fast screen): ``O(1)`` work per ``lam``
    at every ``L`` (:func:`nearest_offsets`)."""
    lv = np.asarray(lam_value, dtype=np.float64)
    fns = compiled()
    hi = fns["_hi_np"](lv, nearest_offsets(lv, L_value)).min(axis=0)  # the candidates at once
    return fns["_lo_np"](lv, L_value), hi
