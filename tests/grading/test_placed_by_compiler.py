"""A question whose model writes its collectives inside ``shard_map`` asks the student to write them too: a plain
``x @ y`` on the sharded inputs makes XLA place the very collective the question counts, and earned full marks
without a line of communication. So did a ``shard_map`` whose in_specs ask for a whole operand, which has XLA
gather it before the block runs. Both earn half now, in both judges, with a sentence that says the compiler
placed it. A question that asks for the compiler's collectives (a sharding constraint, Chapter 9's CX7) keeps
full marks for them, and every model keeps its own. A collective is the compiler's where XLA names it after another
operation, or after an operation that only bears a collective's name (a primitive of the program's own named
``psum`` that is a matmul), and, whatever its name, where it runs over a mesh axis that a shard_map block leaves to
the compiler (one not in its ``axis_names``)."""

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


def test_a_count_that_is_off_names_what_the_compiler_added_though_reduce_scatters_hid_it(monkeypatch):
    """The loss summed outside the shard_map: the compiler places its all-reduce, and the program's own three
    reduce-scatters (which CPU may compile to all-reduces) covered it in the count of what the compiler added, so
    the message listed no all-reduce at all and read as if the loss were never reduced. Such a sum of a loss is
    bookkeeping, JAX's idiom, and earns full marks (``programs.BOOKKEEPING_SHARE``); the message is read where the
    compiler's all-reduce is not (here, with no share allowed)."""
    from autograder import programs
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
        assert verdict.score == 1.0, verdict.message
    monkeypatch.setattr(programs, "BOOKKEEPING_SHARE", 0.0)
    for verdict in both_judges(q, step):
        assert verdict.score == 0.5, verdict.message
        assert "all-reduce that the compiler added outside your shard_map" in verdict.message, verdict.message


def _loss_step(q, reduce_loss):
    """The Chapter 5 CX4 step written as the model's forward block inside a shard_map, with the loss summed as
    ``reduce_loss`` says: inside the block with one psum per axis, or outside it (left to the compiler)."""
    from course.devices import mesh

    m42, batch = mesh(X=4, Y=2), 64

    def block(xb, wi, wo):
        xf = jax.lax.all_gather(xb, "Y", axis=1, tiled=True)
        h = jax.nn.relu(xf @ jax.lax.all_gather(wi, "X", axis=0, tiled=True))
        return jax.lax.psum_scatter(h @ jax.lax.all_gather(wo, "X", axis=1, tiled=True), "Y", scatter_dimension=1,
                                    tiled=True)

    specs = (P("X", "Y"), P("X", "Y"), P("Y", "X"))

    def step(x, w_in, w_out):
        if reduce_loss == "outside":
            f = jax.shard_map(block, mesh=m42, in_specs=specs, out_specs=P("X", "Y"))
            loss = lambda a, b: jax.numpy.sum(f(x, a, b) ** 2) / (2 * batch)  # noqa: E731
            value, (gi, go) = jax.value_and_grad(loss, argnums=(0, 1))(w_in, w_out)
            return value, gi, go

        def inside(xb, wi, wo):
            def loss(a, b):
                y = block(xb, a, b)
                return jax.lax.psum(jax.lax.psum(jax.numpy.sum(y * y), "Y"), "X") / (2 * batch)
            value, (gi, go) = jax.value_and_grad(loss, argnums=(0, 1))(wi, wo)
            return value, gi, go
        return jax.shard_map(inside, mesh=m42, in_specs=specs, out_specs=(P(), *specs[1:]))(x, w_in, w_out)
    return step


def test_a_loss_summed_by_the_compiler_counts_once_wherever_the_census_holds_it():
    """The compiler's sums of a loss are read by the operation XLA names them after (``Report.by_compiler``) or, named
    as all-reduces, counted in the census with the program's own: either way they are the one sum of the loss, and
    large all-reduces the compiler adds are not."""
    import dataclasses

    from autograder import model_traffic
    from autograder.kinds.program import input_seed
    from autograder.programs import judge_report, run
    from course.devices import mesh

    q = load_chapter("ch05_training")["ch05-cx4-fsdp-tp-step"]
    seed = input_seed("loss", q.qid)
    report = run(q.spec, _loss_step(q, "outside"), seed, make_mesh=mesh)
    model = model_traffic.at(model_traffic.expected(q), q.spec)
    assert report.by_compiler == {"all-reduce": 2} and "all-reduce" not in report.census
    in_census = dataclasses.replace(report, by_compiler={}, census={**report.census, "all-reduce": 2})
    for r in (report, in_census):
        assert judge_report(q.spec, r, seed, model).ok
    large = [dataclasses.replace(c, operand_shape=(64, 256)) if c.kind == "all-reduce" else c for c in report.compiled]
    v = judge_report(q.spec, dataclasses.replace(in_census, compiled=tuple(large)), seed, model)
    assert v.score == 0.5, v.message


@pytest.mark.parametrize("reduce_loss", ["outside", "a psum per axis"])
def test_a_loss_summed_outside_the_block_or_one_axis_at_a_time_is_the_one_all_reduce_asked(reduce_loss):
    """JAX's idiom sums a training step's loss outside the shard_map, where XLA splits the sum into one all-reduce
    over each mesh axis (4 bytes each); a student may as well write psum(psum(loss, 'Y'), 'X'). Either is the one
    sum the step asks for: it earned half marks for "2 all-reduce that the compiler added"."""
    q = load_chapter("ch05_training")["ch05-cx4-fsdp-tp-step"]
    for verdict in both_judges(q, _loss_step(q, reduce_loss)):
        assert (verdict.score, verdict.diagnosis) == (1.0, "correct"), verdict.message


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


# A shard_map with auto axes (``axis_names``) is manual over some mesh axes and leaves the others to the compiler,
# which places collectives over those inside the block and names them after the operation they serve: a primitive of
# the program's own named ``psum_scatter`` that lowers to slices, a reshape and an add had XLA place all-to-alls over
# Y named ``psum_scatter``, and all-gathers over Y named ``all_gather`` for the block's gathers over X. They passed as
# the student's, and the message said the compiler had added the rest "outside your shard_map".
def _named_slices(name):
    """A primitive of the program's own, named after a collective, that lowers to slices, a reshape and an add:
    the identity on a [B, D] block whose D the compiler shards over Y, which it moves over Y to run them."""
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    prim = Primitive(name)
    prim.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))

    def lowering(ctx, x):
        b, d = ctx.avals_in[0].shape
        f32 = ir.F32Type.get()
        halves = hlo.reshape(ir.RankedTensorType.get((b, 2, d // 2), f32), x)
        ends = ir.DenseI64ArrayAttr.get
        lo = hlo.slice(halves, ends([0, 0, 0]), ends([b, 1, d // 2]), ends([1, 1, 1]))
        hi = hlo.slice(halves, ends([0, 1, 0]), ends([b, 2, d // 2]), ends([1, 1, 1]))
        same = hlo.add(hlo.add(hlo.concatenate([lo, hi], 1), halves), hlo.negate(halves))
        return [hlo.reshape(ir.RankedTensorType.get((b, d), f32), same)]
    mlir.register_lowering(prim, lowering, cacheable=False)
    return prim


PSUM_SCATTER_SLICES, ALL_GATHER_SLICES = _named_slices("psum_scatter"), _named_slices("all_gather")


def _leaving_y_to_the_compiler(prim):
    """CX4's forward in a block manual over X alone: the weights gathered over X by the program, everything over Y
    (In's columns, the sum over F) by the compiler, for the primitive named after a collective."""
    def forward(x, w_in, w_out):
        m = course.mesh(X=4, Y=2)

        def block(x_block, w_in_block, w_out_block):  # f32[16, 64] (D over Y, the compiler's), ...
            w_in_rows = jax.lax.all_gather(w_in_block, "X", axis=0, tiled=True)
            w_out_cols = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)
            return (prim.bind(x_block) @ w_in_rows) @ w_out_cols
        out = jax.shard_map(block, mesh=m, in_specs=(P("X"), P("X"), P(None, "X")), out_specs=P("X"),
                            axis_names={"X"})(x, w_in, w_out)
        return jax.lax.with_sharding_constraint(out, jax.sharding.NamedSharding(m, P("X", "Y")))
    return forward


@pytest.mark.parametrize("prim", [PSUM_SCATTER_SLICES, ALL_GATHER_SLICES], ids=["psum_scatter", "all_gather"])
def test_a_collective_over_an_axis_the_block_leaves_to_the_compiler_is_the_compilers(prim):
    q = load_chapter("ch05_training")["ch05-cx4-fsdp-tp-forward"]
    for verdict in both_judges(q, _leaving_y_to_the_compiler(prim)):
        assert (verdict.score, verdict.diagnosis) == (0.5, "collectives:placed"), verdict.message
        assert "the compiler placed" in verdict.message and "axis_names" in verdict.message, verdict.message
        assert "outside your shard_map" not in verdict.message, verdict.message


def _auto_constraint(spec):
    """A sharding constraint inside a block with auto axes: over the axes the block leaves to the compiler."""
    return lambda a: jax.lax.with_sharding_constraint(a, P(*spec))


def fsdp_tp_leaving_y_to_constraints(x, w_in, w_out):
    """CX4 honestly written with Y as an auto axis: the program gathers the weights over X, and sharding
    constraints inside the block leave the tensor-parallel collectives over Y to the compiler."""
    m = course.mesh(X=4, Y=2)

    def block(x_block, w_in_block, w_out_block):
        w_in_rows = _auto_constraint((None, "Y"))(jax.lax.all_gather(w_in_block, "X", axis=0, tiled=True))
        w_out_cols = _auto_constraint(("Y", None))(jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True))
        return _auto_constraint((None, "Y"))((_auto_constraint(())(x_block) @ w_in_rows) @ w_out_cols)
    return jax.shard_map(block, mesh=m, in_specs=(P("X"), P("X"), P(None, "X")), out_specs=P("X"),
                         axis_names={"X"})(x, w_in, w_out)


def attention_leaving_heads_to_constraints(x, w_q, w_k, w_v, w_o):
    """CX7 with the batch split by a block manual over X, and the heads over Y by constraints inside it."""
    heads = _auto_constraint((None, None, "Y", None))

    def block(x_rows, wq, wk, wv, wo):
        q, k, v = (heads(jax.numpy.einsum("btd,dnh->btnh", x_rows, w)) for w in (wq, wk, wv))
        scores = jax.numpy.einsum("btnh,bsnh->bnts", q, k) / jax.numpy.sqrt(q.shape[-1])
        out = jax.numpy.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)
        return _auto_constraint(())(jax.numpy.einsum("btnh,nhd->btd", out, wo))
    return jax.shard_map(block, mesh=course.mesh(X=4, Y=2), in_specs=(P("X"), P(), P(), P(), P()),
                         out_specs=P("X"), axis_names={"X"})(x, w_q, w_k, w_v, w_o)


def ffw_reduce_scatter_leaving_x(x, w_in, w_out):
    """CX6 in a block manual over Y, the batch's X left to the compiler: XLA gathers the batch over X for the
    reduce-scatter (names that gather ``reduce_scatter``), and the program writes only the reduce-scatter."""
    def block(x_rows, w_in_cols, w_out_rows):
        partial = jax.numpy.maximum(_auto_constraint(("X",))(x_rows) @ w_in_cols, 0.0) @ w_out_rows
        return _auto_constraint(("X",))(jax.lax.psum_scatter(partial, "Y", scatter_dimension=2, tiled=True))
    return jax.shard_map(block, mesh=course.mesh(X=4, Y=2), in_specs=(P(), P(None, "Y"), P("Y", None)),
                         out_specs=P(None, None, "Y"), axis_names={"Y"})(x, w_in, w_out)


@pytest.mark.parametrize(("qid", "fn", "score"), [
    ("ch09-cx7-attention-constraint", attention_leaving_heads_to_constraints, 1.0),
    ("ch05-cx4-fsdp-tp-forward", fsdp_tp_leaving_y_to_constraints, 0.5),
    ("ch09-cx6-ffw-reduce-scatter", ffw_reduce_scatter_leaving_x, 0.5)], ids=["ch09 CX7", "ch05 CX4", "ch09 CX6"])
def test_an_honest_block_with_auto_axes_keeps_its_grade(qid, fn, score):
    """The grades these programs had before the rule: CX7 asks for the compiler's all-reduce; CX4 and CX6 ask for
    the collectives written, and the compiler writes some of them over the auto axis. Where the compiler placed
    them, the message says so, not that it added them outside the block."""
    q = load_chapter(f"{qid[:4]}_{'training' if qid.startswith('ch05') else 'profiling'}")[qid]
    for verdict in both_judges(q, fn):
        assert verdict.score == score, verdict.message
        assert "outside your shard_map" not in verdict.message, verdict.message


def test_a_collective_written_over_a_manual_axis_of_a_block_with_auto_axes_stays_the_students():
    """A psum over X in a block that leaves Y to the compiler runs over X alone: the program's own."""
    from jax.sharding import NamedSharding

    from autograder.compiled_hlo import compiler_placed, left_to_compiler, masquerades

    m = course.mesh(X=4, Y=2)

    def f(x):
        def block(a):  # f32[4, 8], its columns over Y (the compiler's)
            return jax.lax.psum(_auto_constraint((None, "Y"))(a) * 2, "X")
        return jax.shard_map(block, mesh=m, in_specs=P("X"), out_specs=P(), axis_names={"X"})(x)
    lowered = jax.jit(f).lower(jax.device_put(jax.numpy.ones((16, 8)), NamedSharding(m, P("X", "Y"))))
    stated, compiled = lowered.compiler_ir("hlo").as_hlo_module().to_string(), lowered.compile().as_text()
    assert "all-reduce(" in compiled
    assert compiler_placed(compiled, masquerades(stated), left_to_compiler(stated)) == {}


def test_the_axes_a_block_leaves_to_the_compiler_are_read_from_shardys_record_alone():
    from autograder.compiled_hlo import compiler_placed, left_to_compiler

    edge = ('  %e.{n} = f32[16,64]{{1,0}} custom-call(%x.1), custom_call_target="xla.sdy.{target}", '
            'frontend_attributes={{xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{{\\"X\\", ?}}, {{?}}]>]>",'
            'xla.sdy.manual_axes="#sdy<manual_axes{{{axes}}}>"}}, metadata={{op_name="jit(f)/shard_map"}}')
    header = 'HloModule jit_f, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["X"=4, "Y"=2]>}}'

    def stated(axes, module=header):
        return "\n".join([module, edge.format(n=1, target="GlobalToLocalShape", axes=axes),
                          edge.format(n=2, target="LocalToGlobalShape", axes=axes)])
    over_x = stated('\\"X\\"')
    assert left_to_compiler(over_x) == (((0,), (1,), (0,), (1,), (0,), (1,), (0,), (1,)),)  # each device's Y
    assert left_to_compiler(stated('\\"X\\", \\"Y\\"')) == ()  # manual over every axis: nothing left
    # a mesh that cannot be read (device_ids) leaves every device on its own; so does no mesh at all
    assert left_to_compiler(stated('\\"X\\"', header.replace("]>", "], device_ids=[7,6,5,4,3,2,1,0]>"))) == ((),)
    assert left_to_compiler(stated('\\"X\\", \\"Y\\"', "HloModule jit_f")) == ((),)
    # the program's names cannot write Shardy's record: an op_name that holds it (its quotes escaped, as HLO prints
    # it) is no block's edge
    forged = ('HloModule jit_f, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["X"=4, "Y"=2]>}}\n'
              '  %n.1 = f32[8]{0} negate(%p), metadata={op_name="custom_call_target=\\"xla.sdy.GlobalToLocalShape\\" '
              'xla.sdy.manual_axes=\\"#sdy<manual_axes{\\\\\\"X\\\\\\"}>\\""}')
    assert left_to_compiler(forged) == ()

    compiled = "\n".join([
        "HloModule jit_f, num_partitions=8",
        "ENTRY %main.1 (p: f32[16,64]) -> f32[16,64] {",
        '  %a.1 = f32[64,256]{1,0} all-gather(%p), channel_id=1, replica_groups={{0,2,4,6},{1,3,5,7}}, '
        'dimensions={0}, metadata={op_name="jit(f)/shard_map/all_gather"}',
        '  %a.2 = f32[16,64]{1,0} all-gather(%p), channel_id=2, replica_groups=[4,2]<=[8], dimensions={1}, '
        'metadata={op_name="jit(f)/shard_map/all_gather"}',
        '  %t.3 = (f32[1,8]{1,0}, f32[1,8]{1,0}) all-to-all(%p, %p), channel_id=3, replica_groups=[4,2]<=[8], '
        'metadata={op_name="jit(f)/shard_map/psum_scatter"}',
        '  ROOT %c.4 = f32[16,64]{1,0} collective-permute(%p), channel_id=4, source_target_pairs={{1,0},{3,2}}',
        "}",
    ])
    # over X, which the block is manual over, the program's own; over Y the compiler's, named or not
    assert compiler_placed(compiled, frozenset(), left_to_compiler(over_x)) == {
        "all-gather": 1, "all-to-all": 1, "collective-permute": 1}
    assert compiler_placed(compiled) == {}  # by the names alone, every one passed as the program's


def attention_gathering_the_batch_over_x(x, w_q, w_k, w_v, w_o):
    """CX7 in a block manual over Y (the heads), whose psum over Y is written, with the batch gathered over X (an
    axis the block leaves to the compiler) by a constraint: one all-gather too many."""
    def block(x_all, wq, wk, wv, wo):
        q, k, v = (jax.numpy.einsum("btd,dnh->btnh", _auto_constraint(())(x_all), w) for w in (wq, wk, wv))
        scores = jax.numpy.einsum("btnh,bsnh->bnts", q, k) / jax.numpy.sqrt(q.shape[-1])
        out = jax.numpy.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)
        return _auto_constraint(("X",))(jax.lax.psum(jax.numpy.einsum("btnh,nhd->btd", out, wo), "Y"))
    return jax.shard_map(block, mesh=course.mesh(X=4, Y=2), in_specs=(P(), *[P(None, "Y")] * 3, P("Y")),
                         out_specs=P(), axis_names={"Y"}, check_vma=False)(x, w_q, w_k, w_v, w_o)


def test_a_count_on_a_constraint_question_says_where_a_block_left_the_compiler_its_collectives():
    """On the question that lets the compiler place collectives, a wrong count still names them; the psum over Y
    the block writes stays the program's, and the gather over X is not said to be outside the block."""
    q = load_chapter("ch09_profiling")["ch09-cx7-attention-constraint"]
    for verdict in both_judges(q, attention_gathering_the_batch_over_x):
        assert (verdict.score, verdict.diagnosis) == (0.5, "collectives:all-gather,all-reduce"), verdict.message
        assert "1 x all-reduce of f32[8,16,32] over Y" in verdict.message, verdict.message
        assert "1 all-gather that the compiler added over the mesh axes your shard_map leaves to it" in verdict.message
