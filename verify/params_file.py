"""Parameter files: one parameter set of the model, as exact JSON or as safetensors.

**JSON** (any file name not ending in ``.safetensors``)::

    {"cell":    {"attention": "softmax", "variant": "post_learned", "norm": "layernorm",
                 "affine": "gain_bias", "readout": "regression", "d": 8, "eps": 0.0,
                 "task": "count", "read": "bos"},
     "vectors": {"e_s": [...], "e_a": [...], "g": [...], "beta": [...], "w": [...]},
     "scalars": {"w0": "-0.5"}}

``cell`` has the keys of :meth:`constructions.cell.Cell.keys`; ``variant`` is required, every
other key takes the default of :class:`~constructions.cell.Cell` (as the sweep's options do).
``vectors`` and ``scalars`` are the cell's own (:meth:`~constructions.cell.Cell.vector_names`,
:meth:`~constructions.cell.Cell.scalar_names`): ``e_b`` for the ``select`` task, ``g`` and
``beta`` as the affine has them, ``w`` and ``w0`` for regression, ``u`` (``L+1`` lists of
``d`` numbers) and ``b`` (``L+1`` numbers) for classification.

Every entry is a JSON number or a string holding a decimal number (``"-1.25e-3"``), and it
means *the decimal it spells*, never a float's rounding of it: the text is kept
(``parse_float``/``parse_int`` hooks) and converted exactly (:func:`exact_number`).  A decimal
``c 10^e`` is a binary number iff ``5^-e`` divides ``c`` (``e < 0``); then it is stored
exactly.  Otherwise (``0.1``) it is rounded to the nearest binary number of
``P = max(256, ceil(digits log2 10) + 64)`` bits, relative error below ``2^-P``, far below the
decimal's own last digit, and counted as *rounded*; the verdict is then that of the rounded numbers.
Every parameter set the toolkit writes (:func:`to_json`) uses exact decimals
(:func:`exact_decimal`): a binary number ``m 2^-k`` is the decimal ``m 5^k 10^-k``, whose digits
end.  ``eps`` and ``d`` are the cell's: ``eps`` is a double (the cell stores a float), ``d``
an integer.

**safetensors** (a file name ending in ``.safetensors``): the tensors of a PyTorch
``state_dict`` of this layer, under the names of :data:`TENSORS`, and the cell in the
metadata (string values, the same keys as JSON's ``cell``; the key ``format`` that
``safetensors.torch`` writes is ignored)::

    embedding.weight  nn.Embedding(2 or 3, d).weight   rows e_s, e_a (, e_b for select)
    norm.weight       nn.LayerNorm / nn.RMSNorm weight  g     (affine gain, gain_bias)
    norm.bias         nn.LayerNorm bias                 beta  (affine gain_bias)
    readout.weight    nn.Linear(d, 1).weight (1, d)     w     (regression)
                      nn.Linear(d, L+1).weight (L+1, d) u     (classification)
    readout.bias      (1,): w0 (regression); (L+1,): b (classification)

Dtypes F64, F32, F16 and BF16 are read exactly (every such float is a binary number; BF16 is
the upper half of an F32); other dtypes are refused.  :func:`to_safetensors` writes F64: the
parameter set rounded to the nearest double in every entry.

**A select-task file judged on the count task** (``task="count"`` over a file whose cell has
``task: select``): the file is read as its own cell, and its ``e_b`` is left out (named in
``ignored``).  That is the same judgement: the count task's inputs ``(s, a^n)`` are select
inputs without a ``b`` token, and in the model an output depends on the embeddings of the tokens
its input holds only (the attention sums over its positions), so no count input reads ``e_b``;
``B(theta)`` is then that of the vectors the count task has.  (The other way, ``task="select"`` over a count file, needs an
``e_b`` the file does not have: an error.)

Every defect of a file is a :class:`ParamsFileError` (a ``ValueError``) whose one-line message
names the field.
"""

from __future__ import annotations

import decimal
import json
import math
import re

import mpmath
import numpy as np
import safetensors
import safetensors.numpy

from constructions.cell import COUNT, Cell, Params
from verify.certify import certify

SAFETENSORS_SUFFIX = ".safetensors"
#: the keys of a file's cell, in the order they are written
CELL_KEYS = tuple(Cell().keys())
#: the most significant digits, and the largest decimal exponent in magnitude, of a number
#: read from a file (every double, even a subnormal one, has an exact decimal well inside:
#: at most 767 significant digits, exponents -1074..308)
MAX_DIGITS = 4_000
MAX_EXPONENT = 10_000
#: the fewest bits a decimal that is not a binary number is rounded to
ROUNDING_BITS = 256
#: the PyTorch names of the tensors, and what each holds
TENSORS = ("embedding.weight", "norm.weight", "norm.bias", "readout.weight", "readout.bias")
#: safetensors dtypes read, as little-endian numpy dtypes of the bits (BF16: see _tensor)
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")


class ParamsFileError(ValueError):
    """A parameter file that cannot be read: the message is one line and names the field."""


class _Text(str):
    """A JSON number, kept as the text it was written with."""


class _NonFinite(str):
    """A JSON ``NaN``, ``Infinity`` or ``-Infinity`` (Python's extension of JSON)."""


# --------------------------------------------------------------------------- exact numbers


def _mpf_exact(man: int, exp: int) -> mpmath.mpf:
    """``man 2^exp`` as an mpf, exactly (whatever the working precision)."""
    return mpmath.mp.make_mpf(mpmath.libmp.from_man_exp(man, exp))


def exact_number(value, field: str) -> tuple[mpmath.mpf, bool]:
    """``(x, exact)``: the number a file entry spells, and whether ``x`` is it exactly.

    ``value`` is the text of a JSON number or a decimal string (module docstring).  A decimal
    ``c 10^e`` (``c`` without trailing zeros) is ``c 10^e`` exactly for ``e >= 0``; for
    ``e = -k < 0`` it is ``(c / 5^k) 2^-k``, a binary number iff ``5^k | c``, else it is
    rounded to nearest at ``max(256, ceil(digits log2 10) + 64)`` bits (``from_rational``, one
    rounding).
    """
    if isinstance(value, _NonFinite):
        raise ParamsFileError(f"{field}: not a finite number ({value})")
    if isinstance(value, bool) or not isinstance(value, str):
        raise ParamsFileError(f"{field}: expected a number, got {_show(value)}")
    if not _DECIMAL.match(value):
        raise ParamsFileError(f"{field}: not a decimal number: {_short(repr(str(value)))}")
    sign, digits, exponent = decimal.Decimal(value).as_tuple()
    if len(digits) > MAX_DIGITS:
        raise ParamsFileError(f"{field}: more than {MAX_DIGITS} significant digits")
    c = int("".join(map(str, digits)))
    if c == 0:
        return mpmath.mpf(0), True
    if abs(exponent + len(digits)) > MAX_EXPONENT:
        raise ParamsFileError(f"{field}: {_short(value)} is beyond 10^+-{MAX_EXPONENT}")
    while c % 10 == 0:
        c, exponent = c // 10, exponent + 1
    c = -c if sign else c
    if exponent >= 0:
        return _mpf_exact(c * 10**exponent, 0), True
    k = -exponent
    q, r = divmod(c, 5**k)
    if r == 0:
        return _mpf_exact(q, -k), True
    bits = max(ROUNDING_BITS, math.ceil(len(digits) * math.log2(10)) + 64)
    return mpmath.mp.make_mpf(mpmath.libmp.from_rational(c, 10**k, bits, "n")), False


def exact_decimal(x) -> str:
    """The exact decimal of a binary number (an mpf, float or int), every digit: ``m 2^-k``
    is ``m 5^k 10^-k``.  :func:`exact_number` reads it back to the same number."""
    x = mpmath.mpf(x) if not isinstance(x, mpmath.mpf) else x
    if not mpmath.isfinite(x):
        raise ValueError(f"not a finite number: {x}")
    sign, man, exp, _ = x._mpf_
    if not man:
        return "0"
    with decimal.localcontext() as ctx:  # enough digits for m 5^k, so no operation rounds
        ctx.prec = man.bit_length() + abs(exp) + 2
        ctx.Emin, ctx.Emax = decimal.MIN_EMIN, decimal.MAX_EMAX
        ctx.traps[decimal.Inexact] = True
        value = (decimal.Decimal(-man if sign else man) * decimal.Decimal(2) ** exp).normalize()
        return str(value).replace("E", "e")


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _show(value) -> str:
    """A file value as it was written (numbers as their text, strings quoted), shortened."""
    if isinstance(value, (_Text, _NonFinite)):
        return _short(str(value))
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    try:
        return _short(json.dumps(value))
    except (TypeError, ValueError):
        return _short(repr(value))


# --------------------------------------------------------------------------- the cell


def _cell(keys: dict, where: str, task=None, read=None) -> Cell:
    """The cell of a file's keys (``task``/``read`` override them), or a ParamsFileError."""
    unknown = sorted(set(keys) - set(CELL_KEYS))
    if unknown:
        raise ParamsFileError(f"{where}: unknown key {unknown[0]!r} (the keys are {', '.join(CELL_KEYS)})")
    if "variant" not in keys:
        raise ParamsFileError(f"{where}: missing key 'variant'")
    keys = dict(keys)
    for name, value in (("task", task), ("read", read)):
        if value is not None:
            keys[name] = value
    for name in ("attention", "variant", "norm", "affine", "readout", "task", "read"):
        if name in keys and type(keys[name]) is not str:
            raise ParamsFileError(f"{where}.{name}: expected a string, got {_show(keys[name])}")
    if "d" in keys:
        d = keys["d"]
        if not (isinstance(d, str) and re.fullmatch(r"-?\d{1,7}", d)):
            raise ParamsFileError(f"{where}.d: expected an integer, got {_show(d)}")
        keys["d"] = int(d)
    if "eps" in keys:
        eps = keys["eps"]
        if not (isinstance(eps, str) and _DECIMAL.match(eps)):
            raise ParamsFileError(f"{where}.eps: expected a number, got {_show(eps)}")
        if float(eps) == 0 and exact_number(eps, f"{where}.eps")[0] != 0:
            raise ParamsFileError(f"{where}.eps: {_short(eps)} is not 0 but rounds to 0 as a double")
        keys["eps"] = float(eps)
    try:
        return Cell(**keys)
    except ValueError as exc:
        raise ParamsFileError(f"{where}: {exc}") from None


def _cells(keys: dict, where: str, task=None, read=None) -> tuple[Cell, Cell]:
    """``(the cell the file is read as, the cell it is judged as)``: the same, but where the
    count task is asked of a file of another task (a select file, module docstring), which is
    read as its own task."""
    judged = _cell(keys, where, task, read)
    if task is not None and judged.task == COUNT:
        own = _cell(keys, where, None, read)
        if own.task != COUNT:
            return own, judged
    return judged, judged


def _judged_as(params: Params, cell: Cell, ignored: list | None) -> Params:
    """``params`` as a parameter set of ``cell`` (of :func:`_cells`): the vectors ``cell`` does not
    have (``e_b``) left out and their names appended to ``ignored`` (a list, or None)."""
    if params.cell == cell:
        return params
    keep = cell.vector_names()
    if ignored is not None:
        ignored.extend(n for n in params.vectors if n not in keep)
    return _params(cell, {n: v for n, v in params.vectors.items() if n in keep}, params.scalars,
                   "vectors")


def _params(cell: Cell, vectors: dict, scalars: dict, where: str) -> Params:
    try:
        return Params(cell, vectors, scalars)
    except ValueError as exc:
        raise ParamsFileError(f"{where}: {exc}") from None


# --------------------------------------------------------------------------- JSON


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ParamsFileError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _numbers(value, field: str, depth: int, tally: list) -> np.ndarray:
    """A nested list of file numbers (``depth`` 0: one number) as an object array of mpf."""
    if depth == 0:
        x, exact = exact_number(value, field)
        tally[0] += not exact
        return x
    if not isinstance(value, list):
        what = "a list" if depth == 1 else "a list of lists"
        raise ParamsFileError(f"{field}: expected {what} of numbers, got {_show(value)}")
    rows = [_numbers(v, f"{field}[{i}]", depth - 1, tally) for i, v in enumerate(value)]
    if depth == 2 and len({len(r) for r in rows}) > 1:
        raise ParamsFileError(f"{field}: rows of different lengths")
    out = np.empty((len(rows),) + (rows[0].shape if depth == 2 and rows else ()), dtype=object)
    for i, r in enumerate(rows):
        out[i] = r
    return out


def _section(top: dict, name: str) -> dict:
    if name not in top:
        raise ParamsFileError(f"missing key '{name}'")
    if not isinstance(top[name], dict):
        raise ParamsFileError(f"{name}: expected an object, got {_show(top[name])}")
    return top[name]


def from_json(text: str, task=None, read=None, ignored: list | None = None) -> tuple[Params, int]:
    """``(params, rounded)``: the parameter set of a JSON text and the number of its entries
    that are not binary numbers (rounded, module docstring); the names of vectors left out
    (a select file judged on the count task) are appended to ``ignored``."""
    try:
        top = json.loads(text, parse_float=_Text, parse_int=_Text, parse_constant=_NonFinite,
                         object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ParamsFileError(f"not JSON ({exc})") from None
    except RecursionError:
        raise ParamsFileError("not JSON (nested too deeply)") from None
    if not isinstance(top, dict):
        raise ParamsFileError("expected a JSON object with the keys cell, vectors, scalars")
    extra = sorted(set(top) - {"cell", "vectors", "scalars"})
    if extra:
        raise ParamsFileError(f"unknown key {extra[0]!r} (the keys are cell, vectors, scalars)")
    cell, judged = _cells(_section(top, "cell"), "cell", task, read)
    vectors, scalars = _section(top, "vectors"), _section(top, "scalars")
    for kind, got, want in (("vectors", vectors, cell.vector_names()),
                            ("scalars", scalars, cell.scalar_names())):
        extra, missing = sorted(set(got) - set(want)), [n for n in want if n not in got]
        if extra:
            raise ParamsFileError(f"{kind}.{extra[0]}: not a parameter of {cell.describe()} "
                                  f"(its {kind}: {', '.join(want)})")
        if missing:
            raise ParamsFileError(f"{kind}.{missing[0]}: missing ({cell.describe()} needs {', '.join(want)})")
    tally = [0]
    vec = {n: _numbers(v, f"vectors.{n}", 2 if n == "u" else 1, tally) for n, v in vectors.items()}
    sca = {n: _numbers(v, f"scalars.{n}", 1 if n == "b" else 0, tally) for n, v in scalars.items()}
    return _judged_as(_params(cell, vec, sca, "vectors"), judged, ignored), tally[0]


def to_json(params: Params) -> str:
    """The JSON text of a parameter set, every entry its exact decimal (:func:`exact_decimal`)."""
    def entries(v):
        return [entries(x) for x in v] if isinstance(v, np.ndarray) and v.ndim else exact_decimal(v)

    doc = {"cell": params.cell.keys(),
           "vectors": {n: entries(v) for n, v in params.vectors.items()},
           "scalars": {n: entries(v) for n, v in params.scalars.items()}}
    return json.dumps(doc, indent=1) + "\n"


# --------------------------------------------------------------------------- safetensors


def _layout(cell: Cell) -> dict:
    """The tensors a cell needs: name -> (parameter names it holds, or one name; rows)."""
    readout = ("w", "w0") if cell.readout == "regression" else ("u", "b")
    out = {"embedding.weight": tuple(f"e_{t}" for t in "s" + cell.task.tokens)}
    if cell.affine.gain:
        out["norm.weight"] = "g"
    if cell.affine.bias:
        out["norm.bias"] = "beta"
    out["readout.weight"], out["readout.bias"] = readout
    return out


def _tensor(name: str, spec: dict) -> np.ndarray:
    """A tensor's entries as an object array of mpf (exact), or a ParamsFileError."""
    dtype = spec["dtype"]
    if dtype not in _DTYPES:
        raise ParamsFileError(f"tensor {name}: dtype {dtype} is not read (use one of {', '.join(_DTYPES)})")
    raw = np.frombuffer(bytes(spec["data"]), dtype=_DTYPES[dtype])
    if dtype == "BF16":  # the upper 16 bits of a float32
        raw = (raw.astype("<u4") << 16).view("<f4")
    values = raw.astype(np.float64).reshape(spec["shape"])  # exact: every F16/F32 is a double
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        raise ParamsFileError(f"tensor {name}: not a finite number at index {tuple(int(i) for i in bad[0])}")
    return np.vectorize(mpmath.mpf, otypes=[object])(values) if values.size else values.astype(object)


def _shape_error(name: str, shape, want: str) -> ParamsFileError:
    return ParamsFileError(f"tensor {name}: expected shape {want}, got {tuple(shape)}")


def from_safetensors(data: bytes, task=None, read=None, ignored: list | None = None) -> tuple[Params, int]:
    """``(params, 0)``: the parameter set of a safetensors file's bytes (every entry exact);
    ``ignored`` as in :func:`from_json`."""
    try:
        tensors = dict(safetensors.deserialize(data))
        size = int.from_bytes(data[:8], "little")
        metadata = json.loads(data[8:8 + size]).get("__metadata__") or {}
    except Exception as exc:  # the library's SafetensorError, or bytes that are no header
        raise ParamsFileError(f"not a safetensors file ({str(exc).splitlines()[0] if str(exc) else exc!r})") from None
    metadata = {k: v for k, v in metadata.items() if k != "format"}
    cell, judged = _cells(metadata, "metadata", task, read)
    layout = _layout(cell)
    extra = sorted(set(tensors) - set(layout))
    if extra:
        known = extra[0] in TENSORS
        raise ParamsFileError(f"tensor {extra[0]}: " + (f"not used by {cell.describe()}" if known else
                              f"unknown name (the names are {', '.join(TENSORS)})"))
    missing = [n for n in layout if n not in tensors]
    if missing:
        raise ParamsFileError(f"tensor {missing[0]}: missing ({cell.describe()} needs {', '.join(layout)})")
    d, vectors, scalars = cell.d, {}, {}
    emb = _tensor("embedding.weight", tensors["embedding.weight"])
    tokens = layout["embedding.weight"]
    if emb.shape != (len(tokens), d):
        raise _shape_error("embedding.weight", emb.shape, f"({len(tokens)}, {d}) (rows {', '.join(tokens)})")
    vectors.update(zip(tokens, emb))
    for name in ("norm.weight", "norm.bias"):
        if name in layout:
            v = _tensor(name, tensors[name])
            if v.shape != (d,):
                raise _shape_error(name, v.shape, f"({d},)")
            vectors[layout[name]] = v
    weight = _tensor("readout.weight", tensors["readout.weight"])
    bias = _tensor("readout.bias", tensors["readout.bias"])
    if cell.readout == "regression":
        if weight.shape != (1, d):
            raise _shape_error("readout.weight", weight.shape, f"(1, {d})")
        if bias.shape != (1,):
            raise _shape_error("readout.bias", bias.shape, "(1,)")
        vectors["w"], scalars["w0"] = weight[0], bias[0]
    else:
        if weight.ndim != 2 or weight.shape[1] != d or weight.shape[0] < 2:
            raise _shape_error("readout.weight", weight.shape, f"(L+1, {d}) with L >= 1")
        if bias.shape != (weight.shape[0],):
            raise _shape_error("readout.bias", bias.shape, f"({weight.shape[0]},) (one per row of readout.weight)")
        vectors["u"], scalars["b"] = weight, bias
    return _judged_as(_params(cell, vectors, scalars, "tensors"), judged, ignored), 0


def to_safetensors(params: Params) -> bytes:
    """The safetensors bytes of a parameter set rounded to float64 (nearest, every entry)."""
    layout = _layout(params.cell)
    values = {**params.vectors, **params.scalars}
    tensors = {}
    for name, held in layout.items():
        if isinstance(held, tuple):
            arr = np.stack([values[n] for n in held])
        else:
            arr = np.asarray(values[held], dtype=object)
            if params.cell.readout == "regression" and name.startswith("readout."):
                arr = arr.reshape((1, -1) if name == "readout.weight" else (1,))
        tensors[name] = np.vectorize(_nearest_double, otypes=[np.float64])(arr)
    metadata = {k: str(v) if not isinstance(v, float) else repr(v) for k, v in params.cell.keys().items()}
    return safetensors.numpy.save(tensors, metadata=metadata)


def _nearest_double(x) -> float:
    return mpmath.libmp.to_float(mpmath.mpf(x)._mpf_, rnd="n")


def rounded_to_double(params: Params) -> Params:
    """The parameter set with every entry rounded to the nearest double (what
    :func:`to_safetensors` stores)."""
    def rnd(v):
        return np.vectorize(lambda x: mpmath.mpf(_nearest_double(x)), otypes=[object])(v)

    return Params(params.cell, {n: rnd(v) for n, v in params.vectors.items()},
                  {n: rnd(v) if isinstance(v, np.ndarray) else mpmath.mpf(_nearest_double(v))
                   for n, v in params.scalars.items()})


# --------------------------------------------------------------------------- files


def read(path: str, task=None, read=None, ignored: list | None = None) -> tuple[Params, int]:
    """``(params, rounded)`` from a file: safetensors if its name ends in ``.safetensors``,
    else JSON; ``task``/``read`` (names) override the file's (``ignored`` as in
    :func:`from_json`).  Every defect is a :class:`ParamsFileError` whose message starts with
    the path."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ParamsFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        if path.endswith(SAFETENSORS_SUFFIX):
            return from_safetensors(data, task, read, ignored)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ParamsFileError("not JSON (not UTF-8 text)") from None
        return from_json(text, task, read, ignored)
    except ParamsFileError as exc:
        raise ParamsFileError(f"{path}: {exc}") from None


def witness_files(params: Params, L: int, stem: str) -> tuple[dict, str | None]:
    """``({name: content}, note)``: the files of a witness certified to count to ``L``.

    ``stem.json`` holds it exactly.  ``stem.safetensors`` holds it rounded to float64, a
    different parameter set: it is certified in its own right (:func:`verify.certify.certify`)
    and written only if it counts to ``L`` too; otherwise ``note`` says so.  The caller writes
    the files (:func:`constructions.cli.write_files`).
    """
    files = {f"{stem}.json": to_json(params)}
    try:
        verdict = certify(rounded_to_double(params), L).verdict
    except ValueError:  # an entry beyond the range of doubles
        verdict = "an entry overflows float64"
    if verdict == "counts":
        files[f"{stem}{SAFETENSORS_SUFFIX}"] = to_safetensors(params)
        return files, None
    return files, (f"{stem}{SAFETENSORS_SUFFIX} not written: the witness rounded to float64 "
                   f"does not certify to count to L = {L} ({verdict})")

