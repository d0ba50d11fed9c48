"""The constructions of :mod:`constructions.regression` as derivations: named sympy quantities.

:meth:`constructions.regression.RegressionDesign.steps` lists a cell's construction as
:class:`Step` s, each a sympy expression in the arguments ``B, L, t, A, C``
(:data:`constructions.symbols.ARGS`) and the earlier quantities; vectors are combinations of the
frame ``c_1, p, one`` (and ``e_1``, ``q``) of :mod:`constructions.basis`, inner products
``inner(u, v)``.  :func:`program` turns the steps into the straight-line program the design
compiles, :func:`resolve` into exact :class:`~constructions.basis.FrameVector` s.  The
constructions themselves (what each family's steps build, and why) are stated in
:mod:`constructions.regression`; this module is their symbolic side, loaded only where symbols
are needed (the numeric paths run the generated program, :mod:`constructions.codegen`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from constructions import basis, laws
from constructions.basis import FrameVector
from constructions.cell import Cell
from constructions.regression import FOOT_SLACK_BITS, family
from constructions.symbols import (BETA, C1, E1, E_A, E_S, G, H_A, H_S, ONE, Q, W, W0, A, B, C, F, H,
                                   L, N_1, P, S, V, V_norm, X, alpha, beta_1, ell, eta, gamma,
                                   inner, kappa, mu, nu, omega, psi, r, rho, sigma, t, tau, xi)


def _branches(expr) -> list:
    """``expr`` as the list whose minimum it is (a positive factor distributes over ``Min``)."""
    if isinstance(expr, sympy.Min):
        return list(expr.args)
    if isinstance(expr, sympy.Mul):
        mins = [f for f in expr.args if isinstance(f, sympy.Min)]
        if len(mins) == 1:
            rest = expr / mins[0]
            return [rest * arg for arg in mins[0].args]
    return [expr]


def capacity_branches(cell: Cell) -> list:
    """``cap(t, B)`` (:func:`constructions.laws.capacity`) as the minimum of these sympy
    expressions, each increasing in ``B``: in ``B`` and the score gap ``sigma = sqrt(d) log t``
    for the segment, in ``B`` alone otherwise."""
    if family(cell) == "segment":
        return [B * gap for gap in _branches(laws.value_gap(cell, B, sigma))]
    return _branches(laws.capacity(cell, t, B))


@dataclass(frozen=True)
class Step:
    """One named quantity of a construction: ``symbol = value``, with what it is.

    ``value`` is a sympy expression in :data:`~constructions.symbols.ARGS` and the symbols of
    earlier steps; a vector step (``vector``) is linear in the frame symbols and earlier vector
    steps.  ``key`` names the result in :meth:`RegressionDesign.frame` and
    :meth:`RegressionDesign.evaluate` (the parameter names, ``_h_s``/``_h_a`` for the token
    values); ``meaning`` is plain words.
    """

    symbol: sympy.Basic
    value: sympy.Basic
    meaning: str
    key: str | None = None
    vector: bool = False


def _vec(symbol, value, meaning, key=None) -> Step:
    return Step(symbol, sympy.sympify(value), meaning, key, True)


def _embedding_scale(cell: Cell) -> Step:
    """The norm of the embeddings where the norm makes them scale-free.

    With ``eps = 0`` any positive norm does: half the budget, at most 1/2.  With ``eps > 0``
    the norm is only approximately scale-free, best for large inputs: half the budget.
    """
    value = sympy.Min(B, 1) / 2 if cell.eps == 0 else B / 2
    return Step(nu, value, f"the norm of the embeddings, free because {cell.kind.name} removes their scale")


def _score_gap(cell: Cell) -> Step:
    return Step(sigma, sympy.sqrt(cell.d) * sympy.log(t),
                "the score gap between the tokens s and a, seen from s, sqrt(d) log rho")


def _temperature(cell: Cell) -> Step:
    return Step(tau, cell.tau, "the score temperature, 1/sqrt(d)")


def axes(cell: Cell) -> tuple:
    """``(top, across)``: the unit embedding direction whose normalisation has the largest first
    coordinate, and a unit vector orthogonal to it with zero first coordinate whose image is
    orthogonal to the top's.

    LayerNorm: ``(c_1, p)`` (``N(c_1) = sqrt(d) c_1``, first coordinate ``sqrt(d-1)``; both
    centred, so ``N(a c_1 + b p) = sqrt(d) (a c_1 + b p)`` for ``a^2 + b^2 = 1``; ``p`` needs
    ``d >= 3``).  RMSNorm: ``(e_1, q)`` (``N(e_1) = sqrt(d) e_1``, first coordinate ``sqrt(d)``;
    RMSNorm of a unit vector is ``sqrt(d)`` times it, and ``q`` exists at every ``d >= 2``).
    In both cases the first coordinate of ``N(a top + b across)`` is ``a M``, ``M`` the kind's
    :meth:`~constructions.cell.NormKind.max_coordinate`.
    """
    return (C1, P) if cell.kind.centred else (E1, Q)


def _segment_steps(cell: Cell) -> list[Step]:
    d = cell.d
    sd = sympy.sqrt(d)
    w0_meaning = "the read-out bias, so that y(0) = C"
    name = cell.kind.name
    if not cell.pre:
        return [
            _score_gap(cell),
            Step(X, laws.value_gap(cell, B, sigma), "the distance between h_s and h_a: the largest at budget B"),
            Step(r, X - B, "the norm of e_s"),
            _vec(E_A, B * C1, "the embedding of a", "e_a"),
            _vec(E_S, -r * C1, "the embedding of s, opposite to e_a", "e_s"),
            _vec(H_S, E_S, "the value of s (no norm: the embedding)", "_h_s"),
            _vec(H_A, E_A, "the value of a", "_h_a"),
            _vec(W, (A / X) * C1, "the read-out, along h_a - h_s", "w"),
            Step(W0, C - 2 * inner(W, E_S), w0_meaning, "w0"),
        ]
    top, across = axes(cell)
    bias_w0 = Step(W0, C - inner(W, E_S) - inner(W, H_S), w0_meaning, "w0")
    read = [_vec(W, -(A / X) * E1, "the read-out, along h_a - h_s", "w"), bias_w0]
    if laws.rigid(cell):
        cos_g, sin_g = sympy.cos(gamma), sympy.sin(gamma)
        return [
            _score_gap(cell),
            _embedding_scale(cell),
            Step(cos_g, 1 - sigma / d, "the cosine of the angle between h_s and h_a"),
            Step(sin_g, sympy.sqrt(sympy.Max(0, 1 - cos_g**2)), "its sine"),
            _vec(E_S, nu * top, "the embedding of s", "e_s"),
            _vec(E_A, nu * (cos_g * top + sin_g * across), "the embedding of a", "e_a"),
            _vec(H_S, sd * top, f"the value of s, its {name}", "_h_s"),
            _vec(H_A, sd * (cos_g * top + sin_g * across), f"the value of a, its {name}", "_h_a"),
            _vec(W, -(A / (2 * sigma)) * (H_S - H_A), "the read-out, along h_a - h_s", "w"),
            bias_w0,
        ]
    head = [_score_gap(cell), _embedding_scale(cell),
            Step(X, laws.value_gap(cell, B, sigma), "the distance between h_s and h_a: the largest at budget B")]
    if laws.on_a_line(cell):
        return head + [
            _vec(E_S, nu * C1, "the embedding of s", "e_s"),
            _vec(E_A, -nu * C1, "the embedding of a, opposite", "e_a"),
            _vec(G, (X / 2) * E1, "the gain: N(e_s) = (1, -1) = -N(e_a), so the values are g and -g", "g"),
            _vec(H_S, (X / 2) * E1, "the value of s, g N(e_s)", "_h_s"),
            _vec(H_A, -(X / 2) * E1, "the value of a, g N(e_a)", "_h_a"),
        ] + read
    M = cell.kind.max_coordinate(d)
    bias = cell.affine.bias
    out = head + [
        Step(N_1, X / B - M, f"the first coordinate of the {name} of e_s"),
        Step(alpha, N_1 / M, f"the cosine between e_s and {top}"),
    ]
    if bias:
        out.append(Step(beta_1, sigma / X - B * N_1, "the bias, along e_1"))
    shift = beta_1 if bias else 0
    out += [
        _vec(E_S, nu * (alpha * top + sympy.sqrt(sympy.Max(0, 1 - alpha**2)) * across), "the embedding of s", "e_s"),
        _vec(E_A, -nu * top, "the embedding of a", "e_a"),
        _vec(G, B * E1, f"the {name} gain", "g"),
    ]
    if bias:
        out.append(_vec(BETA, beta_1 * E1, f"the {name} bias", "beta"))
    plus = " + beta" if bias else ""
    return out + [
        _vec(H_S, (B * N_1 + shift) * E1, f"the value of s, g N(e_s){plus}", "_h_s"),
        _vec(H_A, (shift - B * M) * E1, f"the value of a, g N(e_a){plus}", "_h_a"),
    ] + read


#: ``2^-FOOT_SLACK_BITS`` (:data:`constructions.regression.FOOT_SLACK_BITS`), exactly
FOOT_SLACK = sympy.Rational(1, 2**FOOT_SLACK_BITS)


def _foot_steps(cell: Cell) -> list[Step]:
    """Linear attention with post-RMSNorm: the one-sided arc of :mod:`constructions.one_sided`.

    With ``along = sin psi top + cos psi across`` and ``perp = cos psi top - sin psi across``
    (orthonormal), ``e_a = B along`` and ``e_s = nu (F along + lam perp)/sqrt(F^2 + lam^2)``
    give ``<e_s, e_a> = nu B F/sqrt(F^2 + lam^2) > 0``, the foot ``n0 = -(1 + tau nu^2)/(tau B^2)
    = -F`` (:func:`constructions.laws.foot_distance`) and ``|P + F Q|/|Q| = lam``; the residual is
    then a positive multiple of ``lam perp + (n + F) along``, and the read-out along ``top`` sees
    ``A f(n)`` (:data:`constructions.one_sided.SHAPE`).
    """
    top, across = axes(cell)
    along = sympy.sin(psi) * top + sympy.cos(psi) * across
    perp = sympy.cos(psi) * top - sympy.sin(psi) * across
    return [
        _temperature(cell),
        Step(F, laws.foot_distance(cell, B) + FOOT_SLACK,
             "the distance of the foot of the residual line before the count 0: just beyond the "
             "nearest the budget allows"),
        Step(nu, sympy.sqrt(FOOT_SLACK) * B, "the norm of e_s, which sets how far beyond that limit"),
        _vec(E_A, B * along, "the embedding of a, of norm B, along the residual line", "e_a"),
        _vec(E_S, nu * (F * along + t * perp) / sympy.sqrt(F**2 + t**2),
             "the embedding of s, at the angle that puts the line at distance lambda", "e_s"),
    ]


def arc_readout_steps(cell: Cell) -> list[Step]:
    """The read-out of the arc at amplitude ``A`` (both reads): ``w = (A/sqrt(d)) top`` bare;
    with a gain ``w = g = S e_1``, ``S = sqrt(A/(sqrt(d) reach))``, since ``w * g = S^2 e_1``
    projects on the arc's plane as ``S^2 reach`` along ``top`` (``reach`` the kind's
    :meth:`axis_reach`), and the bias 0."""
    sd = sympy.sqrt(cell.d)
    top, _ = axes(cell)
    if not cell.affine.gain:
        return [_vec(W, (A / sd) * top, f"the read-out, along {top}", "w")]
    reach = cell.kind.axis_reach(cell.d)
    out = [Step(S, sympy.sqrt(A / (sd * reach)), "the norm of w and of g, which share the amplitude"),
           _vec(W, S * E1, "the read-out", "w"),
           _vec(G, S * E1, f"the {cell.kind.name} gain", "g")]
    if cell.affine.bias:
        out.append(_vec(BETA, sympy.Integer(0), f"the {cell.kind.name} bias", "beta"))
    return out


def _arc_steps(cell: Cell) -> list[Step]:
    """Embeddings with the normalised residual ``z(n)`` a positive multiple of
    ``lam across + (n - L/2) top`` (:func:`axes`), or for a foot tied to the budget the one-sided
    arc (:func:`_foot_steps`)."""
    d = cell.d
    sd = sympy.sqrt(d)
    top, across = axes(cell)
    foot = laws.foot_distance(cell, B) is not None
    out = _foot_steps(cell) if foot else [
        _vec(V, t * across - (L / 2) * top, "the residual line at n = 0, up to scale"),
        Step(V_norm, sympy.sqrt(t**2 + L**2 / 4), "its norm"),
        _embedding_scale(cell),
        _temperature(cell),
    ]
    if cell.attention == "softmax":
        # r(n) ~ 2 rho e_s + n (e_s + e_a): put e_s = kappa v/(2 rho), e_s + e_a = kappa top;
        # rho = exp(tau <e_s, e_s - e_a>) = exp(ell) fixes kappa; ell keeps both norms <= nu
        # (the attention ratio is at most e = exp(1))
        out += [
            Step(ell, sympy.Min(1, nu**2 / (sd * (1 / sympy.sqrt(2) + sympy.E * sympy.sqrt(2) / V_norm) ** 2)),
                 "the log attention ratio, at most 1 and small enough for both embeddings to have "
                 "norm at most nu (e is exp(1))"),
            Step(rho, sympy.exp(ell), "the attention ratio of s over a"),
            Step(kappa, sympy.sqrt(ell / (tau * (V_norm**2 / (2 * rho**2) + L / (4 * rho)))),
                 "the scale of the residual line, fixed by the attention ratio"),
            _vec(E_S, (kappa / (2 * rho)) * V, "the embedding of s", "e_s"),
            _vec(E_A, kappa * top - E_S, "the embedding of a", "e_a"),
        ]
    elif not foot:
        # LayerNorm (RMSNorm ties the foot to the budget: _foot_steps):
        # r(n) = (1 + tau|e_s|^2) e_s + n tau <e_s,e_a> e_a with e_s = xi v + eta one,
        # e_a = mu c_1 + eta one; mu solves tau mu (eta^2 - xi mu L/2) = (1 + tau |e_s|^2) xi,
        # real iff 2 tau xi L omega <= tau^2 eta^4: with xi <= eta/(2|V|), omega <= (1 + 5 tau
        # eta^2/4) xi, so xi <= eta^2/(4 sqrt(L sqrt d) g) suffices where 1 + 5 tau eta^2/4 <= 8 g^2:
        # g = 1 at eps = 0 (eta <= 1/4), g = sqrt(1 + tau eta^2) with eps > 0 (eta = B/4 unbounded)
        guard = 1 if cell.eps == 0 else sympy.sqrt(1 + tau * eta**2)
        out += [
            Step(eta, nu / 2, "the component of both embeddings along one"),
            Step(xi, sympy.Min(eta / (2 * V_norm), eta**2 / (4 * sympy.sqrt(L * sd) * guard), eta**3 / (8 * sd)),
                 "the scale of v in e_s, small enough for the norm bound and a real root mu"),
            Step(omega, (1 + tau * (xi**2 * V_norm**2 + eta**2)) * xi, "the coefficient of v in the residual"),
            Step(mu, 2 * omega / (tau * eta**2 + sympy.sqrt(tau**2 * eta**4 - 2 * tau * xi * L * omega)),
                 "the c_1 component of e_a, the smaller root that puts the residual line in place"),
            _vec(E_S, xi * V + eta * ONE, "the embedding of s", "e_s"),
            _vec(E_A, mu * C1 + eta * ONE, "the embedding of a", "e_a"),
        ]
    out += arc_readout_steps(cell)
    out.append(Step(W0, C, "the read-out bias", "w0") if foot
               else Step(W0, L / 2, "the read-out bias, the middle count", "w0"))
    return out


def _line_steps(cell: Cell) -> list[Step]:
    d = cell.d
    sd = sympy.sqrt(d)
    out = [_temperature(cell)]
    if not cell.pre:
        out += [_vec(E_S, B * C1, "the embedding of s", "e_s"),
                _vec(H_S, E_S, "the value of s (no norm: the embedding)", "_h_s"),
                _vec(W, (A / (tau * B**3)) * C1, "the read-out", "w")]
    elif laws.rigid(cell):
        top, _ = axes(cell)
        out += [_embedding_scale(cell),
                _vec(E_S, nu * top, "the embedding of s", "e_s"),
                _vec(H_S, sd * top, f"the value of s, its {cell.kind.name}", "_h_s"),
                _vec(W, (A / d) * top, "the read-out", "w")]
    else:
        top, _ = axes(cell)
        name = cell.kind.name
        H_unit, _ = laws.value_reach(cell)
        out += [_embedding_scale(cell),
                Step(H, B * H_unit, "the norm of the token values, the largest at budget B"),
                _vec(E_S, nu * top, "the embedding of s", "e_s"),
                _vec(G, B * E1, f"the {name} gain", "g")]
        if cell.affine.bias:
            out.append(_vec(BETA, B * E1, f"the {name} bias", "beta"))
        out += [_vec(H_S, H * E1, "the value of s, g N(e_s)" + (" + beta" if cell.affine.bias else ""), "_h_s"),
                _vec(W, (A / (tau * H**3)) * E1, "the read-out", "w")]
    out += [_vec(E_A, E_S, "the embedding of a, equal to e_s", "e_a"),
            _vec(H_A, H_S, "the value of a, equal to h_s", "_h_a"),
            # y(0) = <w, e_s> + tau <h_s, h_s> <w, h_s> + w0
            Step(W0, C - inner(W, E_S) - tau * inner(H_S, H_S) * inner(W, H_S),
                 "the read-out bias, so that y(0) = C", "w0")]
    return out


def program(steps: list[Step], width: int) -> tuple[list, dict]:
    """The steps as a straight-line program: ``(variable, expression)`` assignments in order, and
    the keyed results in those variables.

    Each scalar step gets one variable and each vector step three (its ``f, r, s``), so
    evaluating the program costs a few operations per step and nothing is inlined twice.
    """
    rename, vectors, assignments, out = {}, {}, [], {}
    for j, step in enumerate(steps):
        value = basis.inner_products(step.value.xreplace(rename), width, vectors)
        if step.vector:
            names = sympy.symbols(f"v{j}f v{j}r v{j}s")
            assignments += zip(names, FrameVector.of(value, width, vectors).pattern)
            result = vectors[step.symbol] = FrameVector(width, names)
        else:
            result = rename[step.symbol] = sympy.Symbol(f"q{j}")
            assignments.append((result, value))
        if step.key is not None:
            out[step.key] = result
    return assignments, out


def resolve(steps: list[Step], width: int) -> dict:
    """The keyed steps with every named quantity substituted: expressions in the arguments only.

    Vectors become :class:`~constructions.basis.FrameVector` s, scalars sympy expressions.
    """
    scalars, vectors, out = {}, {}, {}
    for step in steps:
        expr = basis.inner_products(step.value, width, vectors).xreplace(scalars)
        if step.vector:
            value = vectors[step.symbol] = FrameVector.of(expr, width, vectors)
        else:
            value = scalars[step.symbol] = expr
        if step.key is not None:
            out[step.key] = value
    return out
