"""A question whose model writes its collectives inside ``shard_map`` asks the student to write them too: a plain
``x @ y`` on the sharded inputs makes XLA place the very collective the question counts, and earned full marks
without a line of communication. So did a ``shard_map`` whose in_specs ask for a whole operand, which has XLA
gather it before the block runs. Both earn half now, in both judges, with a sentence that says the compiler
placed it. A question that asks for the compiler's collectives (a sharding constraint, Chapter 9's CX7) keeps
full marks for them, and every model keeps its own. A collective is the compiler's where XLA names it after another
operation, or after an operation that only bears a collective's name (a primitive of the program's own named
``psum`` that is a matmul)."""

import jax
import pytest
from jax.sharding import PartitionSpec as P

import course
from autograder.questions import load_chapter
from tests.chapter_checks import both_judges

CH01, CH03, CH04 = (load_chapter(c) for c in ("ch01_rooflines", "ch03_sharding", "ch04_transformers"))


def matmul(x, y):
    return x @ y


def mlp(x, w_in, w_out):
    return jax.nn.relu(x @ w_in) @ w_out


def gathered_by_in_specs(x, y):
    """Case 2 with A asked for whole: XLA gathers it before the block, which multiplies locally."""
    return jax.shard_map(lambda a, b: a @ b, mesh=course.mesh(X=8), in_specs=(P(), P()), out_specs=P())(x, y)


def _dead(op, spec):
    """A stated collective the compiler folds away: the identity, behind a branch that never runs."""
    return jax.shard_map(lambda a: jax.lax.cond(False, op, lambda a: a, a), mesh=course.mesh(X=8), in_specs=P(*spec),
                         out_specs=P(*spec), check_vma=False)


def matmul_behind_a_dead_psum(x, y):
    return _dead(lambda a: jax.lax.psum(a, "X"), (None, "X"))(x) @ y


def matmul_behind_a_dead_gather(x, y):
    return _dead(lambda a: jax.lax.all_gather(a, "X", axis=1, tiled=True)[:, : a.shape[1]], (None, "X"))(x) @ y


def mlp_behind_a_dead_psum(x, w_in, w_out):
    return mlp(_dead(lambda a: jax.lax.psum(a, "X"), ())(x), w_in, w_out)


def _named_matmul(name):
    """A primitive of the program's own, named after a collective, that lowers to a plain matmul: the collective
    XLA places to run it on sharded arrays carries the collective's name."""
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    prim = Primitive(name)
    prim.def_abstract_eval(lambda x, y: jax.core.ShapedArray((x.shape[0], y.shape[1]), x.dtype))

    def lowering(ctx, x, y):
        out = ctx.avals_out[0]
        dims = hlo.DotDimensionNumbers.get(lhs_batching_dimensions=[], rhs_batching_dimensions=[],
                                           lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
        return [hlo.dot_general(ir.RankedTensorType.get(out.shape, mlir.dtype_to_ir_type(out.dtype)), x, y, dims)]
    mlir.register_lowering(prim, lowering, cacheable=False)
    return prim


PSUM_DOT, GATHER_DOT = _named_matmul("psum"), _named_matmul("all_gather")


def dot_named_psum_behind_a_dead_psum(x, y):
    return PSUM_DOT.bind(_dead(lambda a: jax.lax.psum(a, "X"), (None, "X"))(x), y)


def dot_named_all_gather_behind_a_dead_gather(x, y):
    dead = _dead(lambda a: jax.lax.all_gather(a, "X", axis=1, tiled=True)[:, : a.shape[1]], (None, "X"))
    return GATHER_DOT.bind(dead(x), y)


def mlp_of_dots_named_psum(x, w_in, w_out):
    x = _dead(lambda a: jax.lax.psum(a, "X"), ())(x)
    return PSUM_DOT.bind(jax.nn.relu(PSUM_DOT.bind(x, w_in)), w_out)


def dot_named_psum_in_a_scope_like_a_shard_map(x, y):
    """The primitive bound under the name scopes a shard_map's own psum would carry."""
    with jax.named_scope("shard_map"):
        return PSUM_DOT.bind(_dead(lambda a: jax.lax.psum(a, "X"), (None, "X"))(x), y)


CASES = [
    pytest.param(CH01["ch01-cx4-split-matmul"], matmul, id="ch01 CX4: x @ y"),
    pytest.param(CH03["ch03-cx2-case2-allgather"], matmul, id="ch03 case 2: x @ y"),
    pytest.param(CH03["ch03-cx2-case2-allgather"], gathered_by_in_specs, id="ch03 case 2: gathered by in_specs"),
    pytest.param(CH03["ch03-cx2-case3-allreduce"], matmul, id="ch03 case 3: x @ y"),
    pytest.param(CH04["ch04-cx6-tp-mlp"], mlp, id="ch04 CX6: the MLP as written"),
    pytest.param(CH04["ch04-cx8-fsdp-mlp"], mlp, id="ch04 CX8: the MLP as written"),
    # a stated collective the compiler removed stood in for the one it placed: full marks, as if written
    pytest.param(CH01["ch01-cx4-split-matmul"], matmul_behind_a_dead_psum, id="ch01 CX4: behind a dead psum"),
    pytest.param(CH03["ch03-cx2-case2-allgather"], matmul_behind_a_dead_gather, id="ch03 case 2: behind a dead gather"),
    pytest.param(CH04["ch04-cx6-tp-mlp"], mlp_behind_a_dead_psum, id="ch04 CX6: behind a dead psum"),
    # ... and a primitive of the program's own named after the collective, so that XLA names the one it placed so
    pytest.param(CH01["ch01-cx4-split-matmul"], dot_named_psum_behind_a_dead_psum, id="ch01 CX4: a dot named psum"),
    pytest.param(CH01["ch01-cx4-split-matmul"], dot_named_psum_in_a_scope_like_a_shard_map,
                 id="ch01 CX4: a dot named psum in a shard_map's scope"),
    pytest.param(CH03["ch03-cx2-case2-allgather"], dot_named_all_gather_behind_a_dead_gather,
                 id="ch03 case 2: a dot named all_gather"),
    pytest.param(CH04["ch04-cx6-tp-mlp"], mlp_of_dots_named_psum, id="ch04 CX6: dots named psum"),
]


@pytest.mark.parametrize(("q", "fn"), CASES)
def test_a_collective_the_compiler_placed_is_not_written(q, fn):
    for verdict in both_judges(q, fn):
        assert (verdict.score, verdict.diagnosis) == (0.5, "collectives:placed"), verdict.message
        assert "the compiler placed" in verdict.message and "shard_map" in verdict.message, verdict.message


def test_the_models_and_a_constraint_question_keep_full_marks():
    for q in (CH01["ch01-cx4-split-matmul"], CH03["ch03-cx2-case2-allgather"], CH04["ch04-cx6-tp-mlp"]):
        for verdict in both_judges(q, q.model):
            assert verdict.score == 1.0, (q.qid, verdict.message)
    constraint = load_chapter("ch09_profiling")["ch09-cx7-attention-constraint"]
    assert constraint.spec.compiler_places
    for verdict in both_judges(constraint, constraint.model):
        assert verdict.score == 1.0, verdict.message


def test_the_spec_says_so_only_where_the_compiler_places_them():
    """Only the question that asks for a sharding constraint lets the compiler write its collectives."""
    from autograder.questions import Program, chapter_names

    placing = [q.qid for ch in chapter_names() for q in load_chapter(ch).questions
               if isinstance(q, Program) and q.spec is not None and q.spec.compiler_places]
    assert placing == ["ch09-cx7-attention-constraint"]


def test_a_count_that_is_off_names_what_the_compiler_added_though_reduce_scatters_hid_it():
    """The loss summed outside the shard_map: the compiler places its all-reduce, and the program's own three
    reduce-scatters (which CPU may compile to all-reduces) covered it in the count of what the compiler added, so
    the message listed no all-reduce at all and read as if the loss were never reduced."""
    from course.devices import mesh

    q = load_chapter("ch05_training")["ch05-cx4-fsdp-tp-step"]
    m42, batch = mesh(X=4, Y=2), 64

    def body(xb, wi, wo):
        xf = jax.lax.all_gather(xb, "Y", axis=1, tiled=True)
        wif = jax.lax.all_gather(wi, "X", axis=0, tiled=True)
        wof = jax.lax.all_gather(wo, "X", axis=1, tiled=True)
        y = jax.lax.psum_scatter(jax.nn.relu(xf @ wif) @ wof, "Y", scatter_dimension=1, tiled=True)
        return (jax.numpy.sum(y * y) / (2 * batch))[None, None]

    def step(x, w_in, w_out):
        f = jax.shard_map(body, mesh=m42, in_specs=(P("X", "Y"), P("X", "Y"), P("Y", "X")), out_specs=P("X", "Y"))
        loss, (gi, go) = jax.value_and_grad(lambda a, b: jax.numpy.sum(f(x, a, b)), argnums=(0, 1))(w_in, w_out)
        return loss, gi, go

    for verdict in both_judges(q, step):
        assert verdict.score == 0.5, verdict.message
        assert "all-reduce that the compiler added outside your shard_map" in verdict.message, verdict.message


def test_the_name_is_read_wherever_it_stands_among_the_metadata():
    from autograder.compiled_hlo import compiler_placed

    line = ('%all-reduce = f32[8]{0} all-reduce(%p), channel_id=1, replica_groups={{0,1}}, to_apply=%add, '
            'metadata={op_type="TYPE" op_name="jit(f)/dot_general"}')
    assert compiler_placed(line.replace("TYPE", "dot_general")) == {"all-reduce": 1}
    # a quoted field that holds a collective's name is read whole, not as the instruction's name
    assert compiler_placed(line.replace("TYPE", 'x op_name=\\"jit(f)/psum\\"')) == {"all-reduce": 1}


def test_a_name_that_an_operation_other_than_a_collective_bears_is_a_mask():
    from autograder.compiled_hlo import masquerades

    stated = "\n".join([
        "%xla.sdy.manual_computation_body.1 (p.1: f32[8,8]) -> f32[8,8] {",
        '  %p.1 = f32[8,8]{1,0} parameter(0), metadata={op_name="shard_map"}',
        '  %r.2 = f32[8,8]{1,0} transpose(%p.1), dimensions={1,0}, metadata={op_name="all_to_all"}',
        '  %d.3 = f32[8,8]{1,0} dot(%r.2, %r.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, '
        'metadata={op_type="psum" op_name="scan/psum"}',
        '  ROOT %a.4 = f32[8,8]{1,0} all-reduce(%d.3), replica_groups={}, to_apply=%add, metadata={op_name="psum"}',
        "}",
        "ENTRY %main.5 (x.1: f32[8,8]) -> f32[8,8] {",
        '  %x.1 = f32[8,8]{1,0} parameter(0), metadata={op_name="x"}',
        '  %s.2 = f32[8,8]{1,0} custom-call(%x.1), custom_call_target="Sharding", '
        'metadata={op_name="jit(f)/all_gather"}',
        '  ROOT %c.3 = f32[8,8]{1,0} call(%s.2), to_apply=%xla.sdy.manual_computation_body.1, '
        'metadata={op_name="jit(f)/shard_map"}',
        "}",
    ])
    # a collective's own reshapes in a block, and the collective itself, are the program's; a matmul named psum,
    # or anything outside a block named after a collective, masks its name
    assert masquerades(stated) == {"scan/psum", "jit(f)/all_gather"}
