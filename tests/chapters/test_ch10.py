"""Chapter 10 (Programming TPUs in JAX): what the collective inspector and the compiler say about the
chapter's programs (test_every_chapter.py runs the records, the book's answers, and the grader's
verdicts on the programs' slips)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from autograder import program_references as reference_programs
from autograder import programs
from autograder.checks import judge
from autograder.compiled_hlo import compiled_census
from autograder.questions import load_chapter
from course import comms
from solutions import ch10_jax as ch10
from tests.chapter_checks import recorded

pytestmark = pytest.mark.ch10
CHAPTER = load_chapter("ch10_jax")


def test_chapter_size():
    assert CHAPTER.total_points >= 35


def _args(spec, dtype=jnp.float32, seed=0):
    mesh = ch10._mesh(spec)
    keys = jax.random.split(jax.random.key(seed), len(spec.operands))
    return [jax.device_put(jax.random.normal(k, op.shape, dtype), NamedSharding(mesh, P(*op.spec)))
            for k, op in zip(keys, spec.operands, strict=True)]


def test_inspector_on_the_collective_matmul():
    """Three permutes of one f32[B/X, D/Y] chunk over Y (the loop's trip count), nothing else."""
    (c,) = comms.inspect(ch10.collective_matmul, *_args(ch10.AG_MATMUL_SPEC))
    assert (c.kind, c.axes, c.dtype, c.operand_shape, c.count) == ("collective-permute", ("Y",), "f32", (32, 32), 3)
    assert c.bytes_per_device == 32 * 32 * 4


def test_bidirectional_sends_half_size_messages_both_ways():
    found = comms.inspect(ch10.bidirectional_matmul, *_args(ch10.BIDI_SPEC))
    assert sum(c.count for c in found) == 6
    assert {c.operand_shape for c in found} == {(16, 32)} and {c.axes for c in found} == {("Y",)}


def test_permute_bytes_at_book_sizes_are_the_questions_reference():
    """The inspector, on the lowered bf16 program at the book's sizes, counts the permutes whose bytes
    over one link direction are the question's reference (no compile, no run: lowering only). The report
    shows those bytes, never their time: that is E4's question."""
    mesh = ch10._mesh(ch10.AG_MATMUL_SPEC)
    a = jax.ShapeDtypeStruct((ch10.CM_B, ch10.CM_D), jnp.bfloat16, sharding=NamedSharding(mesh, P("X", "Y")))
    w = jax.ShapeDtypeStruct((ch10.CM_D, ch10.CM_F), jnp.bfloat16, sharding=NamedSharding(mesh, P(None, "Y")))
    (c,) = comms.inspect(ch10.collective_matmul, a, w)
    seconds = c.bytes_per_device * c.count / ch10.V5E.ici_bytes_per_s_per_link
    assert seconds == pytest.approx(CHAPTER["ch10-e4-permute-time"].reference)
    assert " us" not in comms.report(ch10.collective_matmul, a, w)


def test_explicit_axes_refuse_the_ambiguous_contraction():
    """jax.make_mesh's default (Explicit) axes raise where the Auto mesh inserts an all-reduce."""
    mesh = jax.make_mesh((4, 2), ("X", "Y"))
    x = jax.device_put(jnp.ones((8, 64)), NamedSharding(mesh, P("X", "Y")))
    w = jax.device_put(jnp.ones((64, 32)), NamedSharding(mesh, P("Y", None)))
    with pytest.raises(Exception, match="ambiguous") as info:
        jax.jit(lambda a, b: a @ b)(x, w)
    assert type(info.value).__name__ == "ShardingTypeError"
    fixed = jnp.einsum("bd,df->bf", x, w, out_sharding=NamedSharding(mesh, P("X", None)))
    assert tuple(fixed.sharding.spec) == ("X", None)


def test_e1_all_reduce_over_y_on_the_auto_mesh():
    mesh = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
    x = jax.device_put(jnp.ones((8, 64)), NamedSharding(mesh, P("X", "Y")))
    w = jax.device_put(jnp.ones((64, 32)), NamedSharding(mesh, P("Y", None)))
    text = jax.jit(lambda a, b: a @ b, out_shardings=NamedSharding(mesh, P("X", None))).lower(x, w).compile().as_text()
    assert compiled_census(text) == {"all-reduce": 1}
    assert "replica_groups={{0,1},{2,3},{4,5},{6,7}}" in text  # pairs along Y


def test_e3_slice_and_average_on_devices():
    """The prediction questions' reference is what shard_map actually computes."""
    mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
    for size, keep in ((ch10.E3_SIZE, ch10.E3_KEEP), (ch10.E3_SIZES[-1], ch10.E3_KEEPS[-1])):
        x = jax.device_put(jnp.arange(size, dtype=jnp.float32), NamedSharding(mesh, P(("X", "Y"))))
        out = jax.shard_map(lambda b, keep=keep: jax.lax.pmean(b[:keep], ("X", "Y")), mesh=mesh,
                            in_specs=P(("X", "Y")), out_specs=P())(x)
        np.testing.assert_array_equal(np.asarray(out), ch10.slice_and_average(size, ch10.E3_DEVICES, keep))
        e3 = {q.qid: q.reference for q in _setting("ch10-e3").questions({"size": size, "keep": keep})}
        assert (e3["ch10-e3-length"], e3["ch10-e3-first"]) == (keep, float(out[0]))


def _setting(name):
    return next(s for s in CHAPTER.settings if s.name == name)


# Every choice of the ring programs' settings (the book's is test_every_chapter.py's): the model earns full
# marks on that mesh and those shapes, and each slip gets its diagnosis.
_KEPT: list = []
PROGRAM_CHOICES = [(name, labels) for name in ("ch10-cx2", "ch10-q3")
                   for labels in (_setting(name).labels(c) for c in _setting(name).combos()[1:])]


@pytest.mark.parametrize("name,labels", PROGRAM_CHOICES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(PROGRAM_CHOICES)])
def test_ring_programs_at_every_choice(name, labels):
    questions = _setting(name).questions(labels)
    _KEPT.extend(questions)  # recorded() caches by id(q): a question freed early could lend its id to the next
    for q in questions:
        v = judge(q, recorded(q, q.model))
        assert v.ok, f"{q.qid} at {labels}: {v}"
        for slip in q.slips:
            assert judge(q, recorded(q, slip.answer)).diagnosis == slip.diagnosis, (q.qid, labels, slip.diagnosis)


def _ragged_args(logits_shift: float):
    """Q2.3b's inputs with every token's router score for expert 3 raised by ``logits_shift``: at 10, all 128
    tokens choose expert 3 (device 1), the most uneven routing there is."""
    spec = ch10.MOE_RAGGED_SPEC
    x, logits, w = (np.asarray(a) for a in _args(spec, seed=3))
    logits = logits.copy()
    logits[:, 3] += logits_shift
    mesh = ch10._mesh(spec)
    placed = [jax.device_put(a, NamedSharding(mesh, P(*op.spec)))
              for a, op in zip((x, logits, w), spec.operands, strict=True)]
    return placed, reference_programs.moe_top1(*(a.astype(np.float64) for a in (x, logits, w)))


@pytest.mark.parametrize("shift", [0.0, 1.5, 10.0], ids=["random", "skewed", "all-to-one-expert"])
def test_ragged_dispatch_drops_no_token(shift):
    """The model is right however unevenly the router chooses, up to every token on one device; the slip
    with buckets sized for the average load loses tokens (rows of zeros) as soon as the routing is uneven."""
    args, want = _ragged_args(shift)
    counts = np.bincount(np.argmax(np.asarray(args[1]), axis=1), minlength=ch10.RAG_E)
    assert counts.max() > ch10.RAG_S // ch10.RAG_E  # the groups are ragged
    np.testing.assert_allclose(np.asarray(jax.jit(ch10.moe_ragged)(*args)), want, rtol=1e-4, atol=1e-4)
    dropped = ~np.asarray(jax.jit(ch10.q2b_average_capacity)(*args)).any(axis=1)
    assert dropped.sum() > 0


def test_ragged_group_sizes_change_with_every_draw():
    """Grading draws fresh logits, so the tokens per expert a student's program meets are not the self-check's."""
    sizes = {tuple(np.bincount(np.argmax(programs.inputs(ch10.MOE_RAGGED_SPEC, seed)[1], axis=1), minlength=16))
             for seed in range(5)}
    assert len(sizes) == 5
