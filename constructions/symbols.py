"""The sympy symbols of the constructions, their closed forms and their derivations.

Every symbol is defined here once, with one set of assumptions (to sympy, two symbols of the
same name but different assumptions are different symbols, and substitutions between modules
would silently miss).  Quantities the model fixes to be positive are ``positive``; counts and
gaps are integers.

The constructions are sympy expressions in the five *arguments* :data:`ARGS`: the budget
``B``, the count ``L``, the shape ``t`` and amplitude ``A`` of the cell's family and the free
constant ``C`` of the read-out (:mod:`constructions.regression`).  Vectors in the span of the
orthonormal frame of :mod:`constructions.basis` are written as linear combinations of the
*vector symbols* :data:`C1`, :data:`P`, :data:`ONE`, :data:`E1`, :data:`Q` and of named vectors such as
:data:`E_S`, with inner products :data:`inner` ``(u, v)`` (an undefined sympy function, so that
``sympy.srepr`` of any derivation step evaluates back in sympy's own namespace).
"""

from __future__ import annotations

import sympy

_pos = dict(positive=True)
_count = dict(integer=True, positive=True)

# --------------------------------------------------------------------------- the problem
#: the count to reach: the read-out must be correct for n = 0..L
L = sympy.Symbol("L", **_count)
#: one count, 0..L
n = sympy.Symbol("n", integer=True, nonnegative=True)
#: the width of the layer (derivations print it symbolically next to its value)
d = sympy.Symbol("d", **_count)
#: the budget: the largest Euclidean norm allowed for a trainable vector
B = sympy.Symbol("B", **_pos)
#: the shape of the family: rho (segment) or lambda (arc); unused by the line
t = sympy.Symbol("t", **_pos)
#: the amplitude of the family: D (segment), b (arc) or K (line)
A = sympy.Symbol("A", **_pos)
#: the free constant of the read-out
C = sympy.Symbol("C", real=True)
#: the arguments of every construction, in the order the compiled constructions take them
ARGS = (B, L, t, A, C)
#: the fixed score temperature 1/sqrt(d)
tau = sympy.Symbol("tau", **_pos)

# --------------------------------------------------------------------------- the families
#: segment: the attention ratio exp(score_s - score_a)
rho = sympy.Symbol("rho", **_pos)
#: segment: the read-out amplitude <w, h_a - h_s>
D = sympy.Symbol("D", **_pos)
#: segment: the score gap <h_s, h_s - h_a> = sqrt(d) log rho
sigma = sympy.Symbol("sigma", nonnegative=True)
#: segment: a gap i - j between two counts (lower constraint) and the upper one's
k = sympy.Symbol("k", **_count)
kk = sympy.Symbol("k'", **_count)
#: arc: the distance of the line of residuals from the origin, in counts
lam = sympy.Symbol("lambda", **_pos)
#: arc: the read-out amplitude
b = sympy.Symbol("b", **_pos)
#: arc: the offset n - L/2 of a count right of the middle (a positive half-integer or integer)
x = sympy.Symbol("x", **_pos)
#: line: the slope tau <h_s, h_a> <w, h_a> of the read-out
K = sympy.Symbol("K", **_pos)

# --------------------------------------------------------------------------- vectors
#: the orthonormal frame (constructions.basis), the first standard basis vector, and the unit
#: vector of span(c_1, one) orthogonal to e_1
C1, P, ONE, E1, Q = sympy.symbols("c_1 p one e_1 q", commutative=True)
#: the trainable vectors and the token values
E_S, E_A, G, BETA, W, H_S, H_A = sympy.symbols("e_s e_a g beta w h_s h_a")
#: the read-out bias (a free scalar)
W0 = sympy.Symbol("w_0", real=True)
#: inner product of two vectors (undefined: printed as <u, v>)
inner = sympy.Function("inner")

# --------------------------------------------------------------------------- named quantities
#: the norm of the embeddings where LayerNorm makes them scale-free
nu = sympy.Symbol("nu", **_pos)
#: segment: the distance |h_s - h_a|
X = sympy.Symbol("X", **_pos)
#: segment, no norm: the norm of e_s
r = sympy.Symbol("r", nonnegative=True)
#: segment, bare pre-norm: the angle between h_s and h_a
gamma = sympy.Symbol("gamma", nonnegative=True)
#: segment, learned pre-norm: the first coordinate of N(e_s), its cosine with c_1, the bias
N_1 = sympy.Symbol("N_1", real=True)
alpha = sympy.Symbol("alpha", real=True)
beta_1 = sympy.Symbol("beta_1", real=True)
#: arc: the direction of the residual line at n = 0 and its norm
V = sympy.Symbol("v")
V_norm = sympy.Symbol("|v|", **_pos)
#: arc, softmax: log of the attention ratio, and the scale of the residual line
ell = sympy.Symbol("ell", **_pos)
kappa = sympy.Symbol("kappa", **_pos)
#: arc, linear: the all-ones component of the embeddings, the scale of v in e_s, the
#: coefficient of e_s in the residual, and the c_1 component of e_a
eta = sympy.Symbol("eta", **_pos)
xi = sympy.Symbol("xi", **_pos)
omega = sympy.Symbol("omega", **_pos)
mu = sympy.Symbol("mu", **_pos)
#: one-sided arc (linear attention, post-RMSNorm): the distance F of the foot of the residual
#: line before the count 0, and the angle psi of the read-out from the line's normal
F = sympy.Symbol("F", **_pos)
psi = sympy.Symbol("psi", real=True)
#: line, learned pre-norm: the norm of the token values
H = sympy.Symbol("H", **_pos)
#: post_learned: the norm of w and of g
S = sympy.Symbol("S", **_pos)

# --------------------------------------------------------------------------- derivation notation
#: a generic vector (the argument of LayerNorm in the derivations)
U = sympy.Symbol("u")
#: functions the derivations name (undefined; constructions.derive prints them)
y, z, LN, mean, var, coord = (sympy.Function(name) for name in ("y", "z", "N", "mean", "var", "coord"))
B_min, D_lo, D_hi, b_lo, b_hi = (sympy.Function(name) for name in ("B_min", "D_lo", "D_hi", "b_lo", "b_hi"))
cap, budget = sympy.Function("cap"), sympy.Function("budget")
#: segment: the bound on the amplitude from one gap k (lower) or k' (upper)
lo_k, hi_k = sympy.Function("lo_k"), sympy.Function("hi_k'")
#: extremum over an index: (expression, index, low, high) or (expression, index, condition)
maximum, minimum, infimum, argmax = (sympy.Function(name) for name in ("maximum", "minimum", "infimum", "argmax"))
#: the extremal point of the closed forms
rho_star, D_star, k_star, kk_star = sympy.symbols("rho^* D^* k^* k'^*", positive=True)
x_star, lam_star, b_star = sympy.symbols("x^* lambda^* b^*", positive=True)
lam_star_sq = sympy.Symbol("lambda^*2", nonnegative=True)
lam_x_sq = sympy.Symbol("lambda_x^2", real=True)
K_min = sympy.Symbol("K_min", positive=True)
L_star = sympy.Symbol("L^*", integer=True, positive=True)
#: the constant of the leading term B_min(L) ~ c(d) L^p, a function of the width
lead_c = sympy.Function("c")
#: a coordinate index, a class, the margin, the positions and slopes of a classification head
i = sympy.Symbol("i", integer=True, positive=True)
c = sympy.Symbol("c", integer=True, nonnegative=True)
m = sympy.Symbol("m", positive=True)
storage = sympy.Symbol("storage", integer=True, positive=True)
U_c, b_c, delta = sympy.symbols("u_c b_c delta")
x_pos, k_slope = sympy.Function("x"), sympy.Function("k")
