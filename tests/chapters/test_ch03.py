"""Chapter 3 (Sharded matrices): the program questions' models as the collective
inspector sees them, and the functions' references against JAX (test_every_chapter.py runs the records and
the book's answers)."""

import math

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding

import solutions.ch03_sharding as ch03
from autograder.checks import judge
from autograder.questions import load_chapter
from course import comms
from course.devices import mesh
from tests.chapter_checks import assert_size, both_judges, inspected, program_inputs, recorded

pytestmark = pytest.mark.ch03
CHAPTER = load_chapter("ch03_sharding")


def test_chapter_size():
    assert_size(CHAPTER, 60, programs=(8, 12))


# --- the programs' models, as the collective inspector sees them ----------------------------------

# What the inspector reports for each sharded-matmul case's model (the chapter's note quotes these).
CASES = {
    "ch03-cx2-case1-local": [],
    "ch03-cx2-case2-allgather": ["1 x all-gather of f32[64,32] over X (57,344 bytes moved per device each)"],
    "ch03-cx2-case3-allreduce": ["1 x all-reduce of f32[32,128] over Y (24,576 bytes moved per device each)"],
    "ch03-cx2-case3-reducescatter": ["1 x reduce-scatter of f32[64,128] over X (28,672 bytes moved per device each)"],
    "ch03-cx2-case4-gather-one": ["1 x all-gather of f32[256,16] over X (114,688 bytes moved per device each)"],
    "ch03-q9-partial-sums": ["1 x reduce-scatter of f32[64,128] over X (28,672 bytes moved per device each)"],
    "ch03-cx4-ring-allgather": ["7 x collective-permute of f32[8,32] over X (1,024 bytes moved per device each)"],
    "ch03-cx4-bidi-allgather": ["14 x collective-permute of f32[4,32] over X (512 bytes moved per device each)"],
}


@pytest.mark.parametrize("qid", sorted(CASES))
def test_inspector_reads_each_case(qid):
    assert inspected(CHAPTER[qid]) == CASES[qid]


def test_case3_model_follows_the_dealt_mesh():
    """A student dealt the {X: 4, Y: 2} mesh is graded on it: case 3's model reads the mesh from its inputs,
    so its AllReduce runs over the 2 devices of Y on blocks of I/4 rows."""
    q = CHAPTER.variant({"ch03-cx2": {"I": 64, "J": 256, "mesh": [4, 2]}})["ch03-cx2-case3-allreduce"]
    assert q.spec.mesh == (("X", 4), ("Y", 2))
    assert inspected(q) == ["1 x all-reduce of f32[16,128] over Y (8,192 bytes moved per device each)"]
    assert judge(q, recorded(q, q.model)).ok


def test_case2_partial_sums_move_four_times_the_bytes():
    """Why case 2's psum variant is the wasteful one: with K = 512 its AllReduce moves 4x the gather."""
    args = program_inputs(CHAPTER["ch03-cx2-case2-allgather"])
    (gather,), (reduce,) = comms.inspect(ch03.case2, *args), comms.inspect(ch03.case2_partial_sums, *args)
    assert reduce.bytes_per_device == 4 * gather.bytes_per_device


# --- the functions' references against JAX and the book -----------------------------------------------

def _pspec(spec):
    return jax.sharding.PartitionSpec(*[None if not a else a if len(a) == 1 else tuple(a) for a in spec])


@pytest.mark.parametrize("probe", [p for p in ch03.BYTES_PROBES if math.prod(p["mesh"].values()) <= 8],
                         ids=lambda p: f"{p['global_shape']}-{p['spec']}-{p['mesh']}")
def test_bookkeeping_matches_jax(probe):
    """local_shape and total_bytes agree with NamedSharding and with the bytes JAX allocates."""
    m = mesh(**probe["mesh"])
    sharding = NamedSharding(m, _pspec(probe["spec"]))
    dtype = {1: np.int8, 2: np.float16, 4: np.float32}[probe["bytes_per_element"]]
    arr = jax.device_put(np.zeros(probe["global_shape"], dtype), sharding)
    shape = ch03.local_shape(probe["global_shape"], probe["spec"], probe["mesh"])
    assert tuple(int(n) for n in shape) == sharding.shard_shape(tuple(probe["global_shape"]))
    assert ch03.total_bytes(**probe) == sum(s.data.nbytes for s in arr.addressable_shards)


@pytest.mark.parametrize(("n", "p"), [(n, p) for n in range(1, 5) for p in range(1, 5)])
def test_allgather_matrix_transposes_to_reducescatter(n, p):
    g, r = ch03.gather_scatter_matrices(n, p)
    assert np.array_equal(g.T, r)
    reference = ch03.gather_scatter_reference(n, p)
    assert g.tolist() == reference[0] and r.tolist() == reference[1]  # in their shapes, as the judges hold them
    shards = np.random.default_rng(n * 10 + p).standard_normal(n * p)
    assert np.allclose(g @ shards, np.tile(shards, p))  # every device ends with all p shards


def test_q10_alltoall_traffic_counts_hops():
    """Q10's per-link AllToAll traffic, by adding the hops of every block on a one-way ring."""
    for d in (2, 4, 8, 16):
        n = 4 * d
        hops = sum((dst - src) % d for src in range(d) for dst in range(d))
        per_link = hops * (n // d) ** 2 / d
        assert per_link == pytest.approx(float(ch03.Q10_ALLTOALL.subs({ch03.N: n, ch03.D: d})))


# --- the ring times ask for the large-N form; the exact (N-1)/N form gets a hint ---------------------


# Each ring time of PQ2, Q2, Q6 and Q7 (wraparound, so the large-N form of CX3), and the factors an exact
# form multiplies it by: (N - 1)/N of one ring of N devices, or of the whole group the collective spans.
def _exact_factors(qid, combo):
    def ring(*ns):
        return sorted({(n - 1) / n for n in ns})
    if qid == "ch03-pq2-ideal":
        return ring(combo["N"])
    if qid in ("ch03-q2-gather-x", "ch03-q2-allreduce-z"):
        return ring(4)
    if qid in ("ch03-q2-gather-xy", "ch03-q2-reshard-x"):
        return ring(4, 16)
    if qid == "ch03-q2-reshard-xy":
        return ring(4, 16, 64)
    if qid == "ch03-q6-a-threshold":
        return ring(combo["mesh"][1])
    if qid == "ch03-q6-b-threshold":
        return ring(combo["mesh"][0])
    if qid == "ch03-q7-comm-time":
        return ring(2, 4)
    return []


RING_SETTINGS = ("ch03-pq2", "ch03-q2", "ch03-q6", "ch03-q7")


@pytest.mark.parametrize("name", RING_SETTINGS)
def test_ring_times_ask_for_the_large_n_form_and_hint_the_exact_one(name):
    """CX3 calls the exact (N-1)/N form right too, so every ring time that uses the large-N form says so in its
    prompt, and the exact form, wherever it is not accepted, is refused with a hint that names the factor, at
    every choice of the setting (not a factor of 3/4 on one mesh and "close" on another)."""
    setting = next(s for s in CHAPTER.settings if s.name == name)
    asked = 0
    for combo in setting.combos():
        for q in setting.build(**combo):
            factors = _exact_factors(q.qid, combo)
            if not factors:
                continue
            asked += 1
            assert "large-N" in q.prompt and "(N-1)/N" in q.prompt, q.prompt
            for k in factors:
                if q.tolerance.accepts(q.reference, k * q.reference):
                    continue
                for v in both_judges(q, k * q.reference):
                    assert not v.ok and "(N-1)/N" in v.message and "Hint:" in v.message, (combo, q.qid, k, v.message)
    assert asked


# --- the exact ring factor where the book writes the large-N form ----------------------------------------

# Q4's and Q5's prompts ask for the times, not their large-N forms: a ring of X chips moves (X-1)/X of the array,
# so the communication term with that factor is the exact time and right too (the compute term keeps none).
EXACT_FORMS = {
    "ch03-q4-t-s1": "Max(2*B*D*F/C, 2*D*F*(X-1)/(X*W))",
    "ch03-q4-t-s2": "Max(2*B*D*F/(X*C), 4*B*F*(X-1)/(X*W))",
    "ch03-q5-comm-gather": "2*I*K*63/(64*3*W)",
    "ch03-q5-comm-allreduce": "4*I*K*63/(64*3*W)",
}
# The factor put on the compute term too: a slip, named.
EXACT_EVERYWHERE = {
    "ch03-q4-t-s1": "Max(2*B*D*F*(X-1)/(X*C), 2*D*F*(X-1)/(X*W))",
    "ch03-q4-t-s2": "Max(2*B*D*F*(X-1)/(X**2*C), 4*B*F*(X-1)/(X*W))",
}


@pytest.mark.parametrize("qid", sorted(EXACT_FORMS))
def test_the_exact_ring_factor_is_right_where_the_book_writes_the_large_n_form(qid):
    for q in ch03_variants(qid):
        assert all(v.ok for v in both_judges(q, EXACT_FORMS[qid])), q.qid
        assert all(v.ok for v in both_judges(q, q.reference))


@pytest.mark.parametrize("qid", sorted(EXACT_EVERYWHERE))
def test_the_ring_factor_on_the_compute_term_is_refused_with_its_hint(qid):
    for q in ch03_variants(qid):
        for v in both_judges(q, EXACT_EVERYWHERE[qid]):
            assert not v.ok and "scales the bytes, not the matmul" in v.message, v.message


def ch03_variants(qid: str) -> list:
    """The question at each choice of its setting (one question where it is not varied)."""
    if qid in {q.qid for q in CHAPTER.questions}:
        return [CHAPTER[qid]]
    s = next(s for s in CHAPTER.settings if qid.startswith(s.name + "-"))
    return [next(q for q in s.build(**combo) if q.qid == qid) for combo in s.combos()]
