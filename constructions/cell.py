"""The model: an architecture cell and its parameters (the single source of truth).

A *cell* fixes the architecture of one single-head attention layer of width ``d``:

* ``attention`` -- ``softmax`` or ``linear``;
* ``norm`` -- LayerNorm placement: ``none``, ``pre_bare``, ``pre_learned``, ``post_bare``,
  ``post_learned``;
* ``readout`` -- ``regression`` (``y = <w, z> + w0``) or ``classification``
  (logits ``<u_c, z> + b_c`` for the counts ``c = 0..L``);
* ``eps`` -- the LayerNorm epsilon, ``N(v) = (v - mean v) / sqrt(var v + eps)``;
* ``distractor`` -- whether the vocabulary has the distractor token ``b``.

*Parameters* are the trainable vectors of a cell (``e_s, e_a[, e_b][, g, beta]`` and ``w`` or
the rows ``u_0..u_L``) and its free scalars (``w0`` or ``b_0..b_L``).  They are stored exactly,
as binary floating-point numbers of arbitrary precision (``mpmath.mpf``), so that every backend
(numpy float64/32/16, mpmath, ball arithmetic) sees the same numbers.

``B(theta)`` (:meth:`Params.bound`) is the largest Euclidean norm among the trainable vectors;
the scalars are not bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mpmath
import numpy as np
import sympy

ATTENTIONS = ("softmax", "linear")
NORMS = ("none", "pre_bare", "pre_learned", "post_bare", "post_learned")
READOUTS = ("regression", "classification")
#: the largest width accepted: parameters are stored as d-long vectors of exact numbers and
#: every backend converts them, so the cost of a verification grows like d
MAX_D = 1 << 16


@dataclass(frozen=True)
class Cell:
    """One architecture cell of the model (README, "The model in brief").  Validated on construction."""

    attention: str = "softmax"
    norm: str = "none"
    readout: str = "regression"
    d: int = 8
    eps: float = 0.0
    distractor: bool = False

    def __post_init__(self):
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; choose from {', '.join(ATTENTIONS)}")
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm placement {self.norm!r}; choose from {', '.join(NORMS)}")
        if self.readout not in READOUTS:
            raise ValueError(f"unknown read-out {self.readout!r}; choose from {', '.join(READOUTS)}")
        if isinstance(self.d, bool) or not isinstance(self.d, (int, np.integer)):
            raise ValueError(f"d must be an integer, got {self.d!r}")
        if self.d < 2:
            raise ValueError(f"d must be at least 2, got {self.d}")
        if self.d > MAX_D:
            raise ValueError(f"d must be at most {MAX_D} (the toolkit's limit on the width), got {self.d}")
        try:
            eps = float(self.eps)
        except (TypeError, ValueError):
            raise ValueError(f"eps must be a finite number >= 0, got {self.eps!r}") from None
        if not math.isfinite(eps) or eps < 0:
            raise ValueError(f"eps must be a finite number >= 0, got {self.eps!r}")
        object.__setattr__(self, "d", int(self.d))
        object.__setattr__(self, "eps", eps)

    @property
    def tau(self):
        """The fixed score temperature ``1/sqrt(d)`` (exact as a sympy number)."""
        return 1 / sympy.sqrt(self.d)

    @property
    def pre(self) -> bool:
        return self.norm.startswith("pre")

    @property
    def post(self) -> bool:
        return self.norm.startswith("post")

    @property
    def learned(self) -> bool:
        return self.norm.endswith("learned")

    def vector_names(self) -> tuple[str, ...]:
        """Names of the trainable vectors (``u`` is the matrix of rows ``u_0..u_L``)."""
        names = ["e_s", "e_a"] + (["e_b"] if self.distractor else [])
        if self.learned:
            names += ["g", "beta"]
        names += ["w"] if self.readout == "regression" else ["u"]
        return tuple(names)

    def scalar_names(self) -> tuple[str, ...]:
        """Names of the free scalars (``b`` is the vector of biases ``b_0..b_L``)."""
        return ("w0",) if self.readout == "regression" else ("b",)

    def describe(self) -> str:
        return f"{self.attention}/{self.norm}/{self.readout} (d={self.d}, eps={self.eps:g})"


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
    if isinstance(x, sympy.Basic):
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
