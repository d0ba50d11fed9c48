"""Parameter files (:mod:`verify.params_file`): exact numbers, round trips of both formats over
random parameter sets of random cells, the PyTorch name map and the dtypes read.

Expectations are computed independently: exact values with :class:`fractions.Fraction`, the
nearest double by comparing neighbours, safetensors files assembled byte by byte from the
format (an 8-byte header length, a JSON header, the raw little-endian data).
"""

from __future__ import annotations

import json
import math
import struct
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import safetensors.numpy
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.cell import Params
from helpers import ARCHS, arch_cell
from verify import params_file
from verify.params_file import ParamsFileError, exact_decimal, exact_number


def frac(x: mpmath.mpf) -> Fraction:
    sign, man, exp, _ = x._mpf_
    v = Fraction(man) * Fraction(2) ** exp
    return -v if sign else v


binary = st.builds(lambda m, e: mpmath.mp.make_mpf(mpmath.libmp.from_man_exp(m, e)),
                   st.integers(-(2**200), 2**200), st.integers(-400, 100))
entries = st.one_of(binary, st.floats(-1e6, 1e6, allow_nan=False).map(mpmath.mpf), st.just(mpmath.mpf(0)))


@st.composite
def cells(draw):
    arch = draw(st.sampled_from(ARCHS))
    return arch_cell(arch, d=draw(st.integers(2, 5)), eps=draw(st.sampled_from([0.0, 1e-5, 0.5])),
                     task=draw(st.sampled_from(["count", "select"])), read=draw(st.sampled_from(["bos", "last"])))


@st.composite
def param_sets(draw, values=entries):
    cell = draw(cells())
    d = cell.d
    vec = lambda: np.array(draw(st.lists(values, min_size=d, max_size=d)), dtype=object)  # noqa: E731
    vectors = {n: vec() for n in cell.vector_names() if n != "u"}
    if cell.readout == "regression":
        scalars = {"w0": draw(values)}
    else:
        classes = draw(st.integers(2, 5))
        vectors["u"] = np.array([vec() for _ in range(classes)], dtype=object)
        scalars = {"b": np.array(draw(st.lists(values, min_size=classes, max_size=classes)), dtype=object)}
    return Params(cell, vectors, scalars)


def flat(params: Params) -> dict:
    """Every entry by name and index."""
    out = {}
    for group in (params.vectors, params.scalars):
        for name, v in group.items():
            for idx, x in np.ndenumerate(np.asarray(v, dtype=object)):
                out[(name, idx)] = x
    return out


def same(p: Params, q: Params) -> bool:
    return p.cell == q.cell and flat(p).keys() == flat(q).keys() and all(
        frac(a) == frac(flat(q)[k]) for k, a in flat(p).items())


@given(param_sets())
@settings(max_examples=40)
def test_json_round_trip_is_exact(params):
    text = params_file.to_json(params)
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-finite {c}"))
    assert set(doc) == {"cell", "vectors", "scalars"} and doc["cell"] == params.cell.keys()
    back, rounded = params_file.from_json(text)
    assert rounded == 0 and same(params, back)


def nearest_double(x: Fraction) -> float:
    """The double nearest ``x``: of the floats around ``float(x)``, the closest."""
    f = float(x)
    candidates = [math.nextafter(f, -math.inf), f, math.nextafter(f, math.inf)]
    return min(candidates, key=lambda c: abs(Fraction(c) - x))


@given(param_sets())
@settings(max_examples=40)
def test_safetensors_round_trip_is_the_nearest_double(params):
    back, rounded = params_file.from_safetensors(params_file.to_safetensors(params))
    assert rounded == 0 and back.cell == params.cell
    got = flat(back)
    for key, x in flat(params).items():
        want = nearest_double(frac(x))
        # the nearest double, or the other one of a tie (x = -(2^53 + 1) lies halfway)
        assert abs(frac(got[key]) - frac(x)) == abs(Fraction(want) - frac(x))
        # no double is closer (ties: either)
        assert abs(Fraction(want) - frac(x)) <= abs(Fraction(math.nextafter(want, math.inf)) - frac(x))
        assert abs(Fraction(want) - frac(x)) <= abs(Fraction(math.nextafter(want, -math.inf)) - frac(x))
    assert same(back, params_file.rounded_to_double(params))


@given(param_sets(st.floats(-1e300, 1e300, allow_nan=False).map(mpmath.mpf)))
@settings(max_examples=20)
def test_doubles_survive_safetensors_exactly(params):
    back, _ = params_file.from_safetensors(params_file.to_safetensors(params))
    assert same(params, back)


@given(binary)
def test_exact_decimal_is_the_number(x):
    text = exact_decimal(x)
    assert Fraction(text) == frac(x)  # Fraction parses the decimal exactly
    y, exact = exact_number(text, "f")
    assert exact and frac(y) == frac(x)


@given(st.integers(-(10**40), 10**40), st.integers(-60, 60))
def test_a_decimal_is_read_exactly_or_rounded_closely(c, e):
    text = f"{c}e{e}"
    value = Fraction(c) * Fraction(10) ** e
    y, exact = exact_number(text, "f")
    dyadic = value.denominator & (value.denominator - 1) == 0  # a power of two
    assert exact == dyadic
    if exact:
        assert frac(y) == value
    else:
        assert abs(frac(y) - value) <= abs(value) * Fraction(1, 2**params_file.ROUNDING_BITS)


def test_a_json_number_is_the_decimal_it_spells():
    text = json.dumps({"cell": {"variant": "none", "d": 2},
                       "vectors": {"e_s": [0.1, 9007199254740993], "e_a": [0, 1],
                                   "w": [exact_decimal(0.1), "1e-400"]},
                       "scalars": {"w0": -2.5e-3}})
    params, rounded = params_file.from_json(text)
    e_s, w = params.vectors["e_s"], params.vectors["w"]
    assert rounded == 3  # 0.1, 1e-400 and -2.5e-3 are not binary numbers
    assert frac(e_s[0]) != Fraction(0.1)  # not the float 0.1 ...
    assert abs(frac(e_s[0]) - Fraction(1, 10)) < Fraction(1, 2**250)  # ... the decimal
    assert frac(e_s[1]) == 2**53 + 1  # beyond float precision, kept
    assert frac(w[0]) == Fraction(0.1)  # the float's exact decimal is the float
    assert 0 < frac(w[1]) < Fraction(1, 10**399)
    assert abs(frac(params.scalars["w0"]) + Fraction(1, 400)) < Fraction(1, 2**260)


META = {"variant": "post_learned", "readout": "regression", "d": "4", "affine": "gain_bias"}


def test_pytorch_state_dict_names():
    """The README's name map, assembled by hand: rows of the embedding, norm weight and bias,
    a 1 x d read-out and its bias of one entry."""
    rng = np.random.default_rng(7)
    emb, g, beta, w, w0 = (rng.normal(size=(2, 4)), rng.normal(size=4), rng.normal(size=4),
                           rng.normal(size=(1, 4)), rng.normal(size=1))
    data = safetensors.numpy.save({"embedding.weight": emb, "norm.weight": g, "norm.bias": beta,
                                   "readout.weight": w, "readout.bias": w0}, metadata=META)
    params, _ = params_file.from_safetensors(data)
    want = {"e_s": emb[0], "e_a": emb[1], "g": g, "beta": beta, "w": w[0]}
    for name, v in want.items():
        assert [float(x) for x in params.vectors[name]] == list(v)
    assert float(params.scalars["w0"]) == w0[0]
    # select: a third embedding row is e_b
    emb3 = rng.normal(size=(3, 4))
    data = safetensors.numpy.save({"embedding.weight": emb3, "norm.weight": g, "norm.bias": beta,
                                   "readout.weight": w, "readout.bias": w0},
                                  metadata={**META, "task": "select", "format": "pt"})
    params, _ = params_file.from_safetensors(data)
    assert [float(x) for x in params.vectors["e_b"]] == list(emb3[2])


def _hand_file(dtype: str, shapes: dict, raw: dict, metadata: dict) -> bytes:
    """A safetensors file from the format itself."""
    header, offset, blob = {"__metadata__": metadata}, 0, b""
    for name, shape in shapes.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw[name])]}
        offset += len(raw[name])
        blob += raw[name]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


@pytest.mark.parametrize("dtype", ["F16", "F32", "BF16"])
def test_narrow_dtypes_are_read_exactly(dtype):
    rng = np.random.default_rng(3)
    shapes = {"embedding.weight": (2, 4), "norm.weight": (4,), "norm.bias": (4,),
              "readout.weight": (1, 4), "readout.bias": (1,)}
    raw, want = {}, {}
    for name, shape in shapes.items():
        size = int(np.prod(shape))
        if dtype == "BF16":  # the upper half of float32 bits: value = bits << 16 as a float32
            bits = rng.integers(0x3000, 0x4800, size=size).astype("<u2") | (rng.integers(0, 2, size) << 15).astype("<u2")
            raw[name] = bits.tobytes()
            want[name] = [struct.unpack("<f", struct.pack("<I", int(b) << 16))[0] for b in bits]
        else:
            vals = rng.normal(size=size).astype("<f2" if dtype == "F16" else "<f4")
            raw[name] = vals.tobytes()
            want[name] = [float(v) for v in vals]
    params, _ = params_file.from_safetensors(_hand_file(dtype, shapes, raw, META))
    V = params.vectors
    got = {"embedding.weight": list(V["e_s"]) + list(V["e_a"]), "norm.weight": list(V["g"]),
           "norm.bias": list(V["beta"]), "readout.weight": list(V["w"]),
           "readout.bias": [params.scalars["w0"]]}
    for name in shapes:
        assert [frac(x) for x in got[name]] == [Fraction(v) for v in want[name]]


@pytest.mark.parametrize("arch", ARCHS[:: 3])
def test_every_cell_reads_back_from_its_keys(arch):
    cell = arch_cell(arch, d=3)
    assert params_file._cell(json.loads(json.dumps(cell.keys()), parse_int=str, parse_float=str), "cell") == cell


def test_errors_are_value_errors_naming_the_field():
    with pytest.raises(ParamsFileError, match=r"vectors\.w\[0\]"):
        params_file.from_json(json.dumps({"cell": {"variant": "none", "d": 2},
                                          "vectors": {"e_s": [1, 0], "e_a": [0, 1], "w": ["x", 0]},
                                          "scalars": {"w0": 0}}))
    assert issubclass(ParamsFileError, ValueError)
