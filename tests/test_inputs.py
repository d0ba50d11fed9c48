"""The inputs of every task and read position, and the judge over them, against brute force.

Brute force: every token string ``s x_1..x_m`` over the task's tokens with ``m <= L``, run
through the explicit token-by-token pass; an input's class is its counts and its last token.
"""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.cell import Cell, Params
from tests.helpers import random_params, to_mp
from verify import counts_to, explicit
from verify.inputs import Input, InputSet
from verify.judge import MAX_INPUTS, check_cost

TASK_READS = [(t, r) for t in ("count", "select") for r in ("bos", "last")]


def _sequences(cell: Cell, L: int):
    for m in range(L + 1):
        for body in itertools.product(cell.task.tokens, repeat=m):
            yield "s" + "".join(body)


def _brute_inputs(cell: Cell, L: int) -> set:
    out = set()
    for seq in _sequences(cell, L):
        query = seq[-1] if cell.read.last else "s"
        out.add((seq.count("a"), seq.count("b"), query))
    return out


def _listed(inputs: InputSet) -> list:
    n_a, n_b, q = inputs.chunk(0, inputs.size)
    return [(int(a), int(b), "sab"[int(k)]) for a, b, k in zip(n_a, n_b, q)]


@pytest.mark.parametrize("task,read", TASK_READS)
@pytest.mark.parametrize("L", [1, 2, 3, 6])
def test_the_inputs_are_every_distinct_input_once(task, read, L):
    cell = Cell(task=task, read=read, d=3)
    inputs = InputSet(cell, L)
    listed = _listed(inputs)
    assert len(listed) == inputs.size == len(set(listed))
    assert set(listed) == _brute_inputs(cell, L)
    lengths = [a + b for a, b, _ in listed]
    assert lengths == sorted(lengths)  # shortest first


@settings(max_examples=60, deadline=None)
@given(task_read=st.sampled_from(TASK_READS), L=st.integers(1, 300), data=st.data())
def test_any_slice_is_the_slice_of_the_list(task_read, L, data):
    cell = Cell(task=task_read[0], read=task_read[1], d=3)
    inputs = InputSet(cell, L)
    start = data.draw(st.integers(0, inputs.size - 1))
    stop = data.draw(st.integers(start + 1, inputs.size + 5))
    whole = _listed(inputs)
    n_a, n_b, q = inputs.chunk(start, stop)
    assert [(int(a), int(b), "sab"[int(k)]) for a, b, k in zip(n_a, n_b, q)] == whole[start:stop]
    label = inputs.label(start)
    if inputs.by_count:
        assert label == whole[start][0]
    else:
        assert label == Input(*whole[start])


def _brute_judge(params: Params, L: int):
    """(failing inputs in list order, worst |y - n| and where) by the explicit mp50 pass."""
    cell = params.cell
    order = {x: i for i, x in enumerate(_listed(InputSet(cell, L)))}
    seen = {}
    for seq in _sequences(cell, L):
        key = (seq.count("a"), seq.count("b"), seq[-1] if cell.read.last else "s")
        if key in seen:
            continue
        with mpmath.workdps(50):
            seen[key] = abs(to_mp(explicit(params, seq, "mp50")) - key[0])
    failing = sorted((k for k, err in seen.items() if err >= 0.5), key=order.get)
    worst = max(seen, key=seen.get)
    return failing, worst


def _as_key(label, cell):
    return (label, 0, "s") if isinstance(label, int) else tuple(label)


@pytest.mark.parametrize("task,read", TASK_READS)
@pytest.mark.parametrize("attention,variant", [("softmax", "none"), ("linear", "post_learned"),
                                               ("softmax", "pre_bare")])
def test_the_judge_agrees_with_brute_force_on_random_parameters(task, read, attention, variant):
    rng = np.random.default_rng(hash((task, read, attention, variant)) % 2**32)
    L = 5
    for _ in range(3):
        cell = Cell(attention, variant, d=4, task=task, read=read)
        p = random_params(cell, rng)
        # shift the bias so that the read-out is right at some inputs and wrong at others
        p = Params(cell, p.vectors, {"w0": p.scalars["w0"] + 1.5 * rng.normal()})
        failing, worst = _brute_judge(p, L)
        res = counts_to(p, L, "arb256")
        assert res.verdict == ("fails" if failing else "counts")
        if failing:
            assert _as_key(res.first_failure, cell) == failing[0]
        assert _as_key(res.worst_error_at, cell) == worst


def _selective_linear(read: str, shift: float = 0.0) -> Params:
    """Linear attention, no norm, d = 3, that counts the a tokens among b tokens at the BOS read.

    ``e_s = (1, 1, 0)``, ``e_a = (0, 1, 0)``, ``e_b = (0, 0, 1)``: the scores against ``s`` are
    ``2 tau, tau, 0``, so ``A = 2 tau e_s + n_a tau e_a`` (b has score 0: it adds nothing) and
    with ``w = (0, c, 0)``, ``y = c (1 + 2 tau + n_a tau) + w0``: ``y = n_a`` for ``c = 1/tau``
    and ``w0 = -c (1 + 2 tau)``.
    """
    cell = Cell("linear", "none", d=3, task="select", read=read)
    tau = 1 / np.sqrt(3)
    c = np.sqrt(3)
    vectors = {"e_s": [1, 1, 0], "e_a": [0, 1, 0], "e_b": [0, 0, 1], "w": [0, c, 0]}
    return Params(cell, vectors, {"w0": -c * (1 + 2 * tau) + shift})


def test_a_selective_counter_counts_and_its_shift_fails():
    """A parameter set that counts the select task at the BOS read is certified, and the
    same set shifted by 0.6 fails, first at the empty input; both agree with brute force."""
    p = _selective_linear("bos")
    assert not _brute_judge(p, 6)[0]
    assert counts_to(p, 6, "arb256").certified
    assert counts_to(p, 600, "arb256").certified
    bad = _selective_linear("bos", shift=0.6)
    res = counts_to(bad, 6, "arb256")
    assert res.verdict == "fails" and res.first_failure == Input(0, 0, "s")
    assert _brute_judge(bad, 6)[0][0] == (0, 0, "s")


def test_the_input_limit_is_refused_up_front():
    cell = Cell(task="select", read="last", d=3)
    L = next(L for L in range(1, 10**5) if InputSet(cell, L).size > MAX_INPUTS)
    check_cost(cell, L - 1)
    with pytest.raises(ValueError, match="MAX_INPUTS"):
        check_cost(cell, L)
