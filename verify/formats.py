"""Real number formats and the rounded arithmetic a forward pass runs in.

A :class:`Format` is an IEEE-style binary floating-point format: ``bits`` significand bits
(the implicit leading bit included), a largest finite value, subnormals, and either
infinities (``float8_e5m2``, ``bfloat16``, ``float16``, ``float32``, ``float64``) or none
(``float8_e4m3fn``: an overflow is NaN).  numpy supplies ``float16/32/64`` and ``ml_dtypes``
the narrow formats (``float8_e4m3fn``, ``float8_e5m2``, ``bfloat16``) as numpy dtypes.

**Rounding.**  An :class:`Arith` holds two formats: ``store`` (``F``, where values are kept:
parameters, token values, attention outputs, residuals, norm outputs, the read-out) and
``work`` (``G``, where sums, the softmax and the norm statistics are computed; ``G = F`` when
the whole pass runs in ``F``).  Every arithmetic result is rounded to its format, to nearest
with ties to even:

* ``+ - * /`` are numpy's operations on arrays of the format's dtype.  numpy computes
  ``float16`` in ``float32`` and ``ml_dtypes`` computes its formats in ``float32``, rounding
  each result once to the format; for ``+ - * /`` and ``sqrt`` this *double rounding* is
  innocuous (the result is the correctly rounded one) whenever the wider precision has at
  least ``2p + 2`` bits for a ``p``-bit target (Figueroa's theorem): ``24 >= 2*11 + 2``
  (float16), ``24 >= 2*8 + 2`` (bfloat16) and the fp8 formats.  float32 and float64 are
  native IEEE arithmetic.  So every such result is the correctly rounded exact result.
* ``exp`` and ``sqrt`` (:meth:`Arith.exp`, :meth:`Arith.sqrt`) are computed in float64 and
  rounded to ``G``: ``sqrt`` is then correctly rounded (53 >= 2*24 + 2); ``exp`` is the float64
  library value rounded, which is the correctly rounded value unless the exact one lies within
  an ulp of float64 of a rounding boundary of ``G``.
* a conversion (:meth:`Arith.to_store`, :meth:`Arith.to_work`) rounds once (ml_dtypes and
  numpy round float64 and float32 inputs directly to the target, not through an intermediate).
  Parameters, stored exactly as mpf, are converted through their float64 value (as the
  toolkit's float backends do): that is the correctly rounded value unless the exact one lies
  within a float64 ulp of a midpoint of ``F``.
* sums of many terms are **sequential, left to right**: ``s_1 = t_1``, ``s_k = fl(s_{k-1} +
  t_k)`` (:meth:`Arith.running`, :meth:`Arith.total`), computed by ``np.add.accumulate`` on the
  dtype, which rounds every partial sum to the dtype (tests/test_precision.py checks it against
  a Python loop that rounds each partial sum explicitly).

Overflow gives ``inf`` (NaN for ``float8_e4m3fn``), underflow gradual through the subnormals
and then 0; callers silence floating-point warnings (``np.errstate``: the pass diagnoses
overflow and underflow from the values).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class Format:
    """One binary floating-point format (module docstring)."""

    name: str
    dtype: np.dtype

    @property
    def info(self):
        return ml_dtypes.finfo(self.dtype) if self.dtype.name in _NARROW else np.finfo(self.dtype)

    @property
    def bits(self) -> int:
        """Significand bits ``p``, the implicit bit included."""
        return int(self.info.nmant) + 1

    @property
    def max(self) -> float:
        return float(self.info.max)

    @property
    def integer_ceiling(self) -> int:
        """``2^p``: every integer ``0..2^p`` is a number of the format, and ``2^p + 1`` is at
        distance 1 from both its neighbours ``2^p`` and ``2^p + 2`` (the spacing on
        ``[2^p, 2^(p+1))`` is 2), so no number of the format lies within 1/2 of it.  (The
        format's largest value is above ``2^p`` for every format here.)"""
        return 1 << self.bits

    def round(self, x) -> np.ndarray:
        """``x`` (float64 or narrower values) rounded to the format, as an array of its dtype
        (an overflow warning is the caller's to silence: the pass runs under ``np.errstate``)."""
        return np.asarray(x).astype(self.dtype, copy=False)

    def representable_within_half(self, n) -> np.ndarray:
        """Whether some number of the format lies strictly within 1/2 of each integer ``n``.

        The nearest number of the format to ``n`` is ``round(n)`` (round to nearest), so this is
        ``|round(n) - n| < 1/2``, decided exactly in float64 (``n <= 2^53``)."""
        n = np.asarray(n, dtype=np.float64)
        with np.errstate(all="ignore"):
            return np.abs(self.round(n).astype(np.float64) - n) < 0.5


_NARROW = ("float8_e4m3fn", "float8_e5m2", "bfloat16")
#: the formats, narrowest first
FORMATS = tuple(Format(name, np.dtype(getattr(ml_dtypes, name)) if name in _NARROW else np.dtype(name))
                for name in ("float8_e4m3fn", "float8_e5m2", "bfloat16", "float16", "float32", "float64"))
BY_NAME = {f.name: f for f in FORMATS}
#: the formats ``--accumulate`` accepts as the working format ``G``
ACCUMULATE = ("float32",)


def get_format(name: str) -> Format:
    if name not in BY_NAME:
        raise ValueError(f"unknown number format {name!r}; choose from {', '.join(BY_NAME)}")
    return BY_NAME[name]


@dataclass(frozen=True)
class Arith:
    """Rounded arithmetic: values stored in ``store`` (``F``), computed in ``work`` (``G``).

    ``Arith.of(F)`` runs everything in ``F``; ``Arith.of(F, G)`` accumulates in ``G`` where
    ``G`` is wider than ``F`` (otherwise in ``F``: a wider store than work format is not a
    mixed mode).
    """

    store: Format
    work: Format

    @classmethod
    def of(cls, store: Format | str, accumulate: Format | str | None = None) -> "Arith":
        store = get_format(store) if isinstance(store, str) else store
        if accumulate is None:
            return cls(store, store)
        work = get_format(accumulate) if isinstance(accumulate, str) else accumulate
        return cls(store, work if work.bits > store.bits else store)

    @property
    def mixed(self) -> bool:
        return self.work != self.store

    def to_store(self, x) -> np.ndarray:
        return self.store.round(x)

    def to_work(self, x) -> np.ndarray:
        return self.work.round(x)

    def stored(self, x) -> np.ndarray:
        """A value kept in ``F`` and read back into ``G`` (exact: ``F`` is within ``G``)."""
        return self.to_work(self.to_store(x))

    def constant(self, value: float) -> np.ndarray:
        """A constant of the kernel (``tau``, ``eps``, ``d``) in ``G``, rounded from float64."""
        return self.work.round(np.float64(value))

    def exp(self, x) -> np.ndarray:
        return self.work.round(np.exp(np.asarray(x).astype(np.float64)))

    def sqrt(self, x) -> np.ndarray:
        return self.work.round(np.sqrt(np.asarray(x).astype(np.float64)))

    def running(self, terms, axis: int = 0) -> np.ndarray:
        """Sequential partial sums of ``terms`` (``G`` values) along ``axis``, each rounded to ``G``."""
        return np.add.accumulate(self.to_work(terms), axis=axis)

    def total(self, terms) -> np.ndarray:
        """The sequential sum along the last axis, left to right, in ``G`` (the last of the
        partial sums of :meth:`running`; for a short axis the same additions one by one)."""
        terms = self.to_work(terms)
        if terms.shape[-1] > 64:
            return self.running(terms, axis=-1)[..., -1]
        acc = terms[..., 0]
        for k in range(1, terms.shape[-1]):
            acc = acc + terms[..., k]
        return acc
