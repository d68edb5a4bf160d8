"""Diagnoses of wrong program results: each typical slip of a sharded program is named by its own
code, and its sentence names the factor or the mesh axis at fault. Programs run on random float
inputs (never arange or zeros) on the 8 simulated devices that tests/conftest.py sets up; the
reference model of each small problem must still pass."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from autograder.grading.judge import judge_programs
from autograder.messages import _PROGRAM
from autograder.programs import diagnose_array, export, judge_report, run, wrong_numbers
from autograder.questions import Chapter, Operand, Program, ProgramSpec, Slip
from autograder.verdict import Status
from course.devices import mesh

# Data parallelism's weight gradient: dW[D, F] = In[B_X, D]^T . dH[B_X, F], replicated (one AllReduce).
B, D, F = 64, 16, 32
DP = ProgramSpec(mesh=(("X", 8),), einsum="bd,bf->df",
                 operands=(Operand((B, D), ("X", None)), Operand((B, F), ("X", None))),
                 out_spec=(), collectives={"all-reduce": 1}, rtol=1e-3, atol=1e-3 * np.sqrt(B))
# The book's case 3 on a 2 x 4 mesh: A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K], an AllReduce over Y.
I, J, K = 16, 64, 32
CASE3 = ProgramSpec(mesh=(("X", 2), ("Y", 4)), einsum="ij,jk->ik",
                    operands=(Operand((I, J), ("X", "Y")), Operand((J, K), ("Y", None))),
                    out_spec=("X", None), collectives={"all-reduce": 1}, rtol=1e-3, atol=1e-3 * np.sqrt(J))
# An AllGather of f32[64, 32] @ P('X', None) to every device.
GATHER = ProgramSpec(mesh=(("X", 8),), einsum="ab->ab", operands=(Operand((64, 32), ("X", None)),),
                     out_spec=(), collectives={"all-gather": 1})
# Counts: per row, the sum of int32 entries; judged exactly whatever the tolerance says.
COUNTS = ProgramSpec(mesh=(("X", 8),), einsum="ij->i", operands=(Operand((64, 16), ("X", None), "int32"),),
                     out_spec=("X",), collectives={}, rtol=0.1, atol=2.0)


def smap(spec, block, in_specs, out_specs, check_vma=True):
    return jax.shard_map(block, mesh=mesh(**dict(spec.mesh)), in_specs=in_specs, out_specs=out_specs,
                         check_vma=check_vma)


def dp_local(x_block, g_block):  # [B/X, D], [B/X, F] -> dW[D, F]{U_X}: this device's tokens only
    return x_block.T @ g_block


def dp_grad(x, g):
    return smap(DP, lambda a, b: jax.lax.psum(dp_local(a, b), "X"), (P("X", None), P("X", None)), P())(x, g)


def dp_grad_psum_twice(x, g):
    """Sums the already summed gradient again: 8 equal copies."""
    def block(a, b):
        return jax.lax.psum(jax.lax.psum(dp_local(a, b), "X"), "X")
    return smap(DP, block, (P("X", None), P("X", None)), P(), check_vma=False)(x, g)


def dp_grad_no_psum(x, g):
    """Never sums over the devices: the replicated result is one device's partial sum."""
    return smap(DP, dp_local, (P("X", None), P("X", None)), P(), check_vma=False)(x, g)


def dp_grad_negated(x, g):
    return -dp_grad(x, g)


def dp_grad_transposed(x, g):
    return smap(DP, lambda a, b: jax.lax.psum(b.T @ a, "X"), (P("X", None), P("X", None)), P())(x, g)


def case3(a, b):
    return smap(CASE3, lambda x, y: jax.lax.psum(x @ y, "Y"), (P("X", "Y"), P("Y", None)), P("X", None))(a, b)


def case3_no_psum(a, b):
    return smap(CASE3, lambda x, y: x @ y, (P("X", "Y"), P("Y", None)), P("X", None), check_vma=False)(a, b)


def case3_pmean(a, b):
    return smap(CASE3, lambda x, y: jax.lax.pmean(x @ y, "Y"), (P("X", "Y"), P("Y", None)), P("X", None))(a, b)


def case3_psum_twice(a, b):
    def block(x, y):
        return jax.lax.psum(jax.lax.psum(x @ y, "Y"), "Y")
    return smap(CASE3, block, (P("X", "Y"), P("Y", None)), P("X", None), check_vma=False)(a, b)


def gather(x):
    return smap(GATHER, lambda b: jax.lax.all_gather(b, "X", axis=0, tiled=True), P("X", None), P(),
                check_vma=False)(x)


def gather_rolled(x):
    """Every block one place down: the order blocks arrived in, not the order of their devices."""
    return jnp.roll(gather(x), 8, axis=0)


def gather_first_block(x):
    """Every block is device 0's."""
    return jnp.tile(gather(x)[:8], (8, 1))


def counts(x):
    return smap(COUNTS, lambda b: jnp.sum(b, axis=1), P("X", None), P("X"))(x)


def counts_off_by_one(x):
    return counts(x).at[5].add(1)


def counts_psum(x):
    """Gathers the rows, counts all of them on every device, then sums those 8 equal copies."""
    def block(b):  # [64/X, 16]
        everyone = jax.lax.psum(jnp.sum(jax.lax.all_gather(b, "X", axis=0, tiled=True), axis=1), "X")  # [64]
        return jax.lax.dynamic_slice_in_dim(everyone, jax.lax.axis_index("X") * b.shape[0], b.shape[0])
    return smap(COUNTS, block, P("X", None), P("X"), check_vma=False)(x)


def selfcheck(spec, fn, seed=0):
    return judge_report(spec, run(spec, fn, seed, make_mesh=mesh), seed)


@pytest.mark.parametrize(("spec", "model"), [(DP, dp_grad), (CASE3, case3), (GATHER, gather), (COUNTS, counts)],
                         ids=["dp", "case3", "gather", "counts"])
def test_the_models_pass(spec, model):
    assert selfcheck(spec, model).ok
    assert selfcheck(spec, model, seed=20260101).ok


# slip, its code, words its sentence must contain
SLIPS = [
    (DP, dp_grad_psum_twice, "scaled:8", ["8x", "number of devices along X", "psum too many"]),
    (DP, dp_grad_no_psum, "partial_sum:X", ["partial sum", "'b'", "psum", "over X"]),
    (DP, dp_grad_negated, "scaled:-1", ["sign"]),
    (DP, dp_grad_transposed, "transposed", ["rows and columns swapped"]),
    (CASE3, case3_no_psum, "partial_sum:Y", ["'j'", "along Y (4 shares", "over Y missing"]),
    (CASE3, case3_pmean, "scaled:1/4", ["1/4", "number of devices along Y", "psum", "pmean"]),
    (CASE3, case3_psum_twice, "scaled:4", ["4x", "along Y"]),
    (GATHER, gather_rolled, "misplaced_blocks:X", ["wrong place", "8 blocks", "block 0 holds what belongs at block 7"]),
    (GATHER, gather_first_block, "same_block:X", ["block 0", "axis_index"]),
    (COUNTS, counts_off_by_one, "wrong_values", ["1 of 64 counts", "compared exactly", "index (5,)"]),
    (COUNTS, counts_psum, "scaled:8", ["8x", "along X"]),
]


@pytest.mark.parametrize(("spec", "slip", "code", "words"), SLIPS, ids=[s[1].__name__ for s in SLIPS])
def test_each_slip_is_named(spec, slip, code, words):
    for seed in (0, 20260101):  # the self-check's inputs and the grader's: the same diagnosis
        v = selfcheck(spec, slip, seed)
        assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, code), v
        assert wrong_numbers(v.diagnosis)
        for w in words:
            assert w in v.message, (w, v.message)


def test_the_grader_says_what_the_selfcheck_says(tmp_path):
    """The jailed grader runs the exported program on its own inputs and judges it with the same code."""
    q = Program(qid="ch99-t1-dp-grad", points=1, prompt="dW", spec=DP, model=dp_grad,
                slips=(Slip(dp_grad_psum_twice, "scaled:8"),))
    chapter = Chapter("ch99_test", "test", (q,))
    blob = export(DP, dp_grad_psum_twice, make_mesh=mesh)
    v = judge_programs(chapter, [{"qid": q.qid, "answer": blob}], tmp_path)[q.qid]
    s = selfcheck(DP, dp_grad_psum_twice)
    assert v.diagnosis == s.diagnosis == "scaled:8"
    assert "psum too many" in v.message


# --- the arrays alone: no program needed ------------------------------------------------------------

RNG = np.random.default_rng(3)
WANT = RNG.standard_normal((16, 16))


@pytest.mark.parametrize(("got", "code", "words"), [
    (2 * WANT, "scaled:2", ["twice"]),
    (WANT / 2, "scaled:1/2", ["half"]),
    (-8 * WANT, "scaled:-8", ["-8 times", "sign"]),
    (3 * WANT, "scaled:3", ["3 times"]),
    (WANT / np.sqrt(8), "scaled:1/sqrt(8)", ["1/sqrt(8) times", "1/sqrt(H)"]),
    (WANT * np.sqrt(32), "scaled:sqrt(32)", ["sqrt(32) times"]),  # not 181/32, a fraction as near as the tolerance
    (WANT.T, "transposed", ["rows and columns swapped"]),
    (np.zeros_like(WANT), "zeros", ["0"]),
    (np.where(np.eye(16, dtype=bool), np.nan, WANT), "not_finite", ["16 of 256", "(0, 0)"]),
    (WANT + np.where(np.eye(16) > 0, 1.0, 0.0), "wrong_values", ["16 of 256", "index (0, 0)"]),
], ids=["2", "1/2", "-8", "3", "1/sqrt(8)", "sqrt(32)", "T", "zeros", "nan", "diagonal"])
def test_array_findings(got, code, words):
    f = diagnose_array(got.astype(np.float32), WANT, 1e-4, 1e-4, (("X", 4), ("Y", 4)))
    assert f is not None and f.code == code, f
    assert all(w in f.message for w in words), f.message


def test_axis_sizes_are_named_and_ties_say_or():
    f = diagnose_array(4 * WANT, WANT, 1e-4, 1e-4, (("X", 4), ("Y", 4)))
    assert f.code == "scaled:4" and "along X or Y" in f.message
    f = diagnose_array(WANT / 16, WANT, 1e-4, 1e-4, (("X", 4), ("Y", 4)))
    assert f.code == "scaled:1/16" and "along X and Y" in f.message


def test_a_near_miss_is_no_factor():
    """One wrong entry in an otherwise doubled result is not 'twice': every entry must agree."""
    got = 2 * WANT
    got[3, 4] += 1.0
    assert diagnose_array(got, WANT, 1e-4, 1e-4).code == "wrong_values"
    assert diagnose_array(WANT * 1.01, WANT, 1e-4, 1e-4).code == "wrong_values"  # noise, not 101/100
    assert diagnose_array(WANT * (1 + 1e-6), WANT, 1e-4, 1e-4) is None


def test_a_result_off_by_rounding_alone_asks_about_precision():
    """A result computed in bfloat16 misses float32's tolerance by its rounding in most entries: the sentence asks
    about precision, which a result wrong by its logic (one row of ones added) is never asked."""
    rounded = np.asarray(jnp.asarray(WANT, jnp.bfloat16) @ jnp.asarray(WANT, jnp.bfloat16), np.float32)
    f = diagnose_array(rounded, WANT @ WANT, 1e-5, 1e-5)
    assert f.code == "wrong_values" and "lower precision" in f.message and "rtol 1e-05" in f.message, f.message
    f = diagnose_array(rounded, WANT @ WANT, 1e-5, 2e-5)
    assert "(rtol 1e-05, atol 2e-05)" in f.message, f.message  # the tolerance as the question sets it
    wrong = WANT + np.where(np.arange(16)[:, None] == 3, 1.0, 0.0)
    assert "precision" not in diagnose_array(wrong, WANT, 1e-5, 1e-5).message


def test_integers_are_compared_exactly():
    want = RNG.integers(-9, 10, (8, 8)).astype(np.float64)
    got = want.astype(np.int32)
    assert diagnose_array(got, want, 0.5, 5.0) is None
    got[2, 3] += 1
    f = diagnose_array(got, want, 0.5, 5.0)  # a float tolerance this loose would have passed it
    assert f.code == "wrong_values" and "1 of 64 counts" in f.message and "got" in f.message


def test_text_or_complex_results_are_the_wrong_type():
    assert diagnose_array(WANT.astype(np.complex64), WANT, 1e-4, 1e-4).code == "wrong_type"
    assert diagnose_array(np.full((16, 16), "a"), WANT, 1e-4, 1e-4).code == "wrong_type"


def test_every_code_has_a_sentence():
    """The codes move to messages.py with their sentences: none may lack one."""
    codes = [c for _, _, c, _ in SLIPS] + ["wrong_shape", "wrong_type", "not_finite", "zeros", "transposed",
                                           "scaled:2", "scaled:1/2", "scaled:3", "scaled:-8", "scaled:1/sqrt(8)"]
    heads = {k.split(":")[0].split("+")[0] for k in _PROGRAM}
    assert all(c.split(":")[0] in heads and wrong_numbers(c) for c in codes)
    assert not wrong_numbers("wrong_sharding") and not wrong_numbers("collectives:all-gather")


@pytest.mark.parametrize(("einsum", "said"), [
    ("ab->ab", "the expected result (the whole input array)"),
    ("kab->ab", "the expected result (the input summed over its 'k' dimension)"),
    ("xyab->ab", "the expected result (the input summed over its 'x', 'y' dimensions)"),
    ("bd,df->bf", "the expected result (the einsum bd,df->bf)"),
    ("the MLP block relu(x @ w_in) @ w_out", "the MLP block relu(x @ w_in) @ w_out"),
])
def test_a_wrong_result_names_what_was_expected_in_words(einsum, said):
    """A ring AllGather read "the result differs from ab->ab": an einsum of one operand is no formula the student
    wrote (review of ch03 CX4)."""
    from autograder.programs import expected_words

    assert expected_words(einsum) == said


def test_a_python_error_in_a_program_names_the_students_line():
    """"could not be lowered: ValueError: axis 1 is out of bounds" gave no line: in a ring of fifteen lines a tired
    student could not tell which call failed. The line the kernel recorded is quoted."""
    from autograder.programs import not_a_program

    v = not_a_program({"error": "ValueError: axis 1 is out of bounds for array of dimension 1",
                       "at": "out = jnp.concatenate(cur, 1)"}, ["X"])
    assert v.message == ("Your function could not be lowered: ValueError: axis 1 is out of bounds for array of "
                         "dimension 1 (at `out = jnp.concatenate(cur, 1)`)."), v.message
