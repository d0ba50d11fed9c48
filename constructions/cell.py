"""The model: an architecture cell and its parameters (the single source of truth).

A *cell* fixes the architecture of one single-head attention layer of width ``d``.  It is
composed of parts, each an object that says what it does:

* ``attention`` -- ``softmax`` or ``linear``;
* ``placement`` (:class:`Placement`) -- where the norm sits: ``none``, ``pre`` (on the token
  values, ``h = LN(e)``) or ``post`` (on the residual, ``z = LN(r)``);
* ``kind`` (:class:`NormKind`) -- which norm: LayerNorm ``N(v) = (v - mean v)/sqrt(var v + eps)``
  (population variance) or RMSNorm ``N(v) = v/sqrt(mean(v^2) + eps)`` (no centring);
* ``affine`` (:class:`Affine`) -- ``bare`` (``N(v)``), ``gain`` (``g * N(v)``) or ``gain_bias``
  (``g * N(v) + beta``);
* ``readout`` -- ``regression`` (``y = <w, z> + w0``) or ``classification``
  (logits ``<u_c, z> + b_c`` for the counts ``c = 0..L``);
* ``eps`` -- the norm's epsilon;
* ``task`` (:class:`Task`) -- ``count`` (inputs ``(s, a^n)``) or ``select`` (inputs
  ``(s, x_1..x_m)`` over ``{a, b}``: count the ``a`` tokens; the vocabulary has the distractor ``b``);
* ``read`` (:class:`Read`) -- where the count is read: ``bos`` (position 0, query ``h_0``,
  residual ``e_s + A``) or ``last`` (the last position ``m`` under a causal mask: query ``h_m``,
  residual ``e_{x_m} + A``).

The five *variant* names of the command line decode into a placement and an affine in one
place (:data:`VARIANTS`): ``none``, ``pre_bare``, ``post_bare`` and ``pre_learned``,
``post_learned``, where *learned* is the kind's usual affine (:attr:`NormKind.learned`:
``gain_bias`` for LayerNorm, ``gain`` for RMSNorm) unless ``affine`` says otherwise.

*Parameters* are the trainable vectors of a cell (``e_s, e_a[, e_b]``, the affine's ``g[, beta]``
and ``w`` or the rows ``u_0..u_L``) and its free scalars (``w0`` or ``b_0..b_L``).  They are
stored exactly, as binary floating-point numbers of arbitrary precision (``mpmath.mpf``), so
that every backend (numpy float64/32/16, mpmath, ball arithmetic) sees the same numbers.

``B(theta)`` (:meth:`Params.bound`) is the largest Euclidean norm among the trainable vectors;
the scalars are not bounded.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import mpmath
import numpy as np

ATTENTIONS = ("softmax", "linear")
READOUTS = ("regression", "classification")
#: the largest width accepted: parameters are stored as d-long vectors of exact numbers and
#: every backend converts them, so the cost of a verification grows like d
MAX_D = 1 << 16
#: the largest count accepted anywhere (constructions, the judge): every count ``0..L`` is
#: evaluated, in chunks, so the cost grows like ``L``
MAX_L = 1 << 20
#: the largest budget a construction is built at (its exponentials and squares stay in range)
MAX_B = 1e150


@dataclass(frozen=True)
class NormKind:
    """A normalisation ``N`` of ``R^d`` (``eps`` as in the cell).

    ``centred``: LayerNorm subtracts the mean first, so its image is the centred hyperplane
    (dimension ``d - 1``) and it is undefined (``eps = 0``) on constant vectors; RMSNorm does
    not, its image is all of ``R^d`` and it is undefined only at 0.  With ``eps = 0`` both map
    onto the sphere of radius ``sqrt(d)`` in their image and are invariant under positive scaling.
    """

    name: str
    centred: bool
    learned: str  # the name of the affine a "learned" variant means for this kind

    @property
    def degenerate(self) -> str:
        """The inputs on which ``N`` with ``eps = 0`` is undefined, in words."""
        return "a constant vector" if self.centred else "the zero vector"

    def centre(self, v, d):
        """``v - mean(v)`` along the last axis (LayerNorm) or ``v`` itself (RMSNorm); any numbers."""
        return v - v.sum(axis=-1, keepdims=True) / d if self.centred else v

    def image_dim(self, d: int) -> int:
        """Dimension of the space ``N`` maps onto."""
        return d - 1 if self.centred else d

    def max_coordinate(self, d, sqrt=None):
        """``max |N(v)_i|`` over ``v`` (``eps = 0``): ``sqrt(d-1)`` (LayerNorm, at ``v = e_1``:
        ``N(e_1) = sqrt(d) c_1``) or ``sqrt(d)`` (RMSNorm, ``N(e_1) = sqrt(d) e_1``).

        *Proof.*  ``|N(v)| = sqrt(d)``; for LayerNorm ``N(v)`` is centred and a centred vector
        of norm ``sqrt(d)`` has ``x_1 = -(x_2 + ... + x_d)``, so ``x_1^2 <= (d-1)(d - x_1^2)``.
        """
        sqrt = _sympy_sqrt if sqrt is None else sqrt
        return sqrt(d - 1) if self.centred else sqrt(d)

    def axis_reach(self, d, sqrt=None):
        """Norm of the part of a basis vector ``e_i`` inside the image: ``sqrt((d-1)/d)`` or 1."""
        sqrt = _sympy_sqrt if sqrt is None else sqrt
        return sqrt(d - 1) / sqrt(d) if self.centred else 1


def _sympy_sqrt(v):
    """The exact square root (sympy, imported on first use: the verdict needs no symbols)."""
    import sympy

    return sympy.sqrt(v)


LAYERNORM = NormKind("layernorm", centred=True, learned="gain_bias")
RMSNORM = NormKind("rmsnorm", centred=False, learned="gain")
KINDS = {k.name: k for k in (LAYERNORM, RMSNORM)}


@dataclass(frozen=True)
class Affine:
    """What follows the norm: ``N(v)``, ``g * N(v)`` or ``g * N(v) + beta``."""

    name: str
    gain: bool
    bias: bool

    @property
    def vectors(self) -> tuple[str, ...]:
        """The trainable vectors it adds."""
        return ("g",) * self.gain + ("beta",) * self.bias


BARE = Affine("bare", gain=False, bias=False)
GAIN = Affine("gain", gain=True, bias=False)
GAIN_BIAS = Affine("gain_bias", gain=True, bias=True)
AFFINES = {a.name: a for a in (BARE, GAIN, GAIN_BIAS)}


@dataclass(frozen=True)
class Placement:
    """Where the norm sits: on the token values (``pre``), on the residual (``post``), or nowhere."""

    name: str

    @property
    def values(self) -> bool:
        """``h_j = LN(e_{x_j})``."""
        return self.name == "pre"

    @property
    def output(self) -> bool:
        """``z = LN(r)``."""
        return self.name == "post"


NONE, PRE, POST = Placement("none"), Placement("pre"), Placement("post")


@dataclass(frozen=True)
class Task:
    """What is counted: ``count`` the ``a`` tokens of ``(s, a^n)``, or ``select`` the ``a`` tokens among
    ``a`` tokens and ``b`` tokens of ``(s, x_1..x_m)``."""

    name: str

    @property
    def distractor(self) -> bool:
        """Whether the vocabulary has the distractor token ``b``."""
        return self.name == "select"

    @property
    def tokens(self) -> str:
        """The tokens that may follow ``s``."""
        return "ab" if self.distractor else "a"


COUNT, SELECT = Task("count"), Task("select")
TASKS = {t.name: t for t in (COUNT, SELECT)}


@dataclass(frozen=True)
class Read:
    """Where the count is read: at ``s`` (``bos``) or at the last position (``last``, causal)."""

    name: str

    @property
    def last(self) -> bool:
        """The query and the residual are those of the last token ``x_m`` (``s`` when ``m = 0``)."""
        return self.name == "last"


BOS, LAST = Read("bos"), Read("last")
READS = {r.name: r for r in (BOS, LAST)}
#: the variant names: placement and whether the affine is learned (None: no norm)
VARIANTS = {"none": (NONE, None), "pre_bare": (PRE, False), "pre_learned": (PRE, True),
            "post_bare": (POST, False), "post_learned": (POST, True)}
NORMS = tuple(VARIANTS)  # the variant names, as the command line spells them


def _choice(kind: str, value, options) -> None:
    if value not in options:
        raise ValueError(f"unknown {kind} {value!r}; choose from {', '.join(options)}")


@dataclass(frozen=True, init=False)
class Cell:
    """One architecture cell of the model (README, "The model in brief").  Validated on construction.

    ``Cell(attention, variant, readout, d, eps, norm="layernorm", affine=None, task="count",
    read="bos")``: ``variant`` is one of :data:`NORMS`, ``norm`` a :data:`KINDS` name,
    ``affine`` an :data:`AFFINES` name for a learned variant (default: the kind's usual one;
    ``bare`` for a variant without one, so that ``Cell(**cell.keys()) == cell``),
    ``task`` a :data:`TASKS` name and ``read`` a :data:`READS` name.
    """

    attention: str
    placement: Placement
    kind: NormKind
    affine: Affine
    readout: str
    d: int
    eps: float
    task: Task
    read: Read

    def __init__(self, attention="softmax", variant="none", readout="regression", d=8, eps=0.0,
                 norm="layernorm", affine=None, task="count", read="bos"):
        _choice("attention", attention, ATTENTIONS)
        _choice("norm placement (variant)", variant, NORMS)
        _choice("read-out", readout, READOUTS)
        _choice("norm kind", norm, tuple(KINDS))
        _choice("task", task, tuple(TASKS))
        _choice("read position", read, tuple(READS))
        placement, learned = VARIANTS[variant]
        kind = KINDS[norm]
        if affine == "bare" and not learned:
            affine = None  # what keys() names the affine of a variant without one
        if affine is not None:
            _choice("affine", affine, tuple(AFFINES))
            if not learned:
                raise ValueError(f"the variant {variant} has no learned affine; --affine applies "
                                 "to pre_learned and post_learned")
            if affine == "bare":
                raise ValueError("a learned affine is gain or gain_bias; use the *_bare variant")
        aff = BARE if not learned else AFFINES[affine or kind.learned]
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise ValueError(f"d must be an integer, got {d!r}")
        if d < 2:
            raise ValueError(f"d must be at least 2, got {d}")
        if d > MAX_D:
            raise ValueError(f"d must be at most {MAX_D} (the toolkit's limit on the width), got {d}")
        if isinstance(eps, (bool, str, np.bool_)):
            raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
        try:
            eps_f = float(eps) + 0.0  # -0.0 becomes 0.0
        except (TypeError, ValueError):
            raise ValueError(f"eps must be a finite number >= 0, got {eps!r}") from None
        if not math.isfinite(eps_f) or eps_f < 0:
            raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
        for name, value in (("attention", attention), ("placement", placement), ("kind", kind),
                            ("affine", aff), ("readout", readout), ("d", int(d)), ("eps", eps_f),
                            ("task", TASKS[task]), ("read", READS[read])):
            object.__setattr__(self, name, value)

    def replace(self, **changes) -> "Cell":
        """This cell with some parts changed (``readout="regression"``, ``d=3``, ...)."""
        args = dict(attention=self.attention, variant=self.variant, readout=self.readout, d=self.d,
                    eps=self.eps, norm=self.kind.name,
                    affine=self.affine.name if self.affine.gain else None, task=self.task.name,
                    read=self.read.name)
        args.update(changes)
        return Cell(**args)

    @property
    def variant(self) -> str:
        """The variant name (:data:`NORMS`) of the placement and affine."""
        if self.placement is NONE or self.placement == NONE:
            return "none"
        return f"{self.placement.name}_{'learned' if self.affine.gain else 'bare'}"

    @property
    def distractor(self) -> bool:
        """Whether the vocabulary has the distractor ``b`` (the ``select`` task)."""
        return self.task.distractor

    @property
    def tau(self):
        """The fixed score temperature ``1/sqrt(d)`` (exact as a sympy number)."""
        return 1 / _sympy_sqrt(self.d)

    @property
    def pre(self) -> bool:
        return self.placement.values

    @property
    def post(self) -> bool:
        return self.placement.output

    @property
    def normed(self) -> bool:
        """Whether the cell has a norm (pre or post)."""
        return self.pre or self.post

    @property
    def learned(self) -> bool:
        return self.affine.gain

    def vector_names(self) -> tuple[str, ...]:
        """Names of the trainable vectors (``u`` is the matrix of rows ``u_0..u_L``)."""
        names = ["e_s", "e_a"] + (["e_b"] if self.distractor else [])
        names += list(self.affine.vectors)
        names += ["w"] if self.readout == "regression" else ["u"]
        return tuple(names)

    def scalar_names(self) -> tuple[str, ...]:
        """Names of the free scalars (``b`` is the vector of biases ``b_0..b_L``)."""
        return ("w0",) if self.readout == "regression" else ("b",)

    def keys(self) -> dict:
        """The cell as the command line and the JSON output name it."""
        return {"attention": self.attention, "variant": self.variant, "norm": self.kind.name,
                "affine": self.affine.name, "readout": self.readout, "d": self.d, "eps": self.eps,
                "task": self.task.name, "read": self.read.name}

    def describe(self) -> str:
        parts = "" if self.placement == NONE else f", {self.kind.name} {self.affine.name}"
        return f"{self.attention}/{self.variant}/{self.readout} (d={self.d}, eps={self.eps:g}{parts})"


def architectures(readouts=READOUTS, **parts) -> list[Cell]:
    """Every architecture: attention x placement x norm kind x affine x read-out, once each
    (without a norm the kind is immaterial: one cell).  ``parts`` fixes the others (``d``,
    ``eps``, ``task``, ``read``)."""
    cells = []
    for readout in readouts:
        for attention in ATTENTIONS:
            for variant, (placement, learned) in VARIANTS.items():
                kinds = ("layernorm",) if placement is NONE else tuple(KINDS)
                for kind in kinds:
                    affines = (None,) if not learned else ("gain", "gain_bias")
                    for affine in affines:
                        cells.append(Cell(attention, variant, readout, norm=kind, affine=affine,
                                          **parts))
    return cells


def to_mpf(x) -> mpmath.mpf:
    """Convert a number (int, float, str, mpf, sympy number) to an mpf at the current precision."""
    if isinstance(x, mpmath.mpf):
        return x
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"expected a number, got {x!r}")
    if isinstance(x, (int, np.integer)):
        with mpmath.workprec(max(53, int(x).bit_length())):  # exact, whatever its size
            return mpmath.mpf(int(x))
    if isinstance(x, (float, np.floating)):
        return mpmath.mpf(float(x))  # exact: every float is an mpf
    if isinstance(x, str):
        return mpmath.mpf(x)
    sympy = sys.modules.get("sympy")  # a sympy number exists only once sympy is loaded
    if sympy is not None and isinstance(x, sympy.Basic):
        value = sympy.N(x, mpmath.mp.dps + 5)
        if not value.is_real:
            raise ValueError(f"expected a real number, got {x!r}")
        return mpmath.mpf(value)
    raise ValueError(f"expected a number, got {x!r}")


def _exact_array(name: str, values, shape: tuple[int, ...]) -> np.ndarray:
    """An object array of mpf with the given shape; finite entries only."""
    try:
        arr = np.array(values, dtype=object)
    except Exception as exc:  # ragged input
        raise ValueError(f"{name}: cannot read as an array ({exc})") from None
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    out = np.empty(shape, dtype=object)
    for idx, x in np.ndenumerate(arr):
        v = to_mpf(x)
        if not mpmath.isfinite(v):
            raise ValueError(f"{name} has a non-finite entry {x!r} at index {idx}")
        out[idx] = v
    return out


@dataclass(frozen=True)
class Params:
    """The trainable vectors and free scalars of a cell, validated and stored exactly.

    ``vectors`` maps each name of ``cell.vector_names()`` to a length-``d`` vector (``u`` to an
    ``(L+1, d)`` matrix); ``scalars`` maps ``w0`` to a number or ``b`` to ``L+1`` numbers.
    Any vector the cell does not use, or a missing one, is a ``ValueError``.
    """

    cell: Cell
    vectors: dict = field(repr=False)
    scalars: dict = field(repr=False)

    def __post_init__(self):
        cell = self.cell
        if not isinstance(cell, Cell):
            raise ValueError("cell must be a Cell")
        vectors, scalars = dict(self.vectors), dict(self.scalars)
        want_v, want_s = set(cell.vector_names()), set(cell.scalar_names())
        for kind, got, want in (("vector", vectors, want_v), ("scalar", scalars, want_s)):
            extra, missing = sorted(set(got) - want), sorted(want - set(got))
            if extra:
                raise ValueError(f"{cell.describe()} does not use the {kind}(s) {', '.join(extra)}")
            if missing:
                raise ValueError(f"{cell.describe()} needs the {kind}(s) {', '.join(missing)}")
        d = cell.d
        if cell.readout == "classification":
            u = np.array(vectors["u"], dtype=object)
            if u.ndim != 2 or u.shape[0] < 2 or u.shape[1] != d:
                raise ValueError(f"u must have shape (L+1, {d}) with L >= 1, got {u.shape}")
            classes = u.shape[0]
        clean_v = {}
        for name in cell.vector_names():
            shape = (classes, d) if name == "u" else (d,)
            clean_v[name] = _exact_array(name, vectors[name], shape)
        clean_s = {}
        if cell.readout == "regression":
            clean_s["w0"] = _exact_array("w0", scalars["w0"], ())[()]
        else:
            clean_s["b"] = _exact_array("b", scalars["b"], (classes,))
        object.__setattr__(self, "vectors", clean_v)
        object.__setattr__(self, "scalars", clean_s)

    @property
    def classes(self) -> int | None:
        """Number of classes ``L+1`` of a classification head (None for regression)."""
        return self.vectors["u"].shape[0] if "u" in self.vectors else None

    def norms(self) -> dict:
        """Euclidean norm of every trainable vector, as mpf (``u_c`` listed one by one)."""
        out = {}
        for name, v in self.vectors.items():
            rows = v if v.ndim == 2 else [v]
            for c, row in enumerate(rows):
                key = f"u_{c}" if v.ndim == 2 else name
                out[key] = mpmath.sqrt(mpmath.fsum(x * x for x in row))
        return out

    def bound(self) -> mpmath.mpf:
        """``B(theta)``: the largest Euclidean norm among the trainable vectors."""
        return max(self.norms().values())

    def storage(self) -> int:
        """Number of trainable scalars (vector entries plus free scalars)."""
        return sum(v.size for v in self.vectors.values()) + sum(
            np.size(s) for s in self.scalars.values()
        )
