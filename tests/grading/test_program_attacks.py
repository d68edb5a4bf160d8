"""Hostile program answers against the newer kinds of program: several named results (a training step), a
per-device memory bound, loops, ragged MoE and its custom calls, and a Function question over compiled text.
Each attack earns what its answer is worth, with a sentence saying why, and costs no other answer of the
notebook; nothing of the grader's (paths, references) reaches the message."""

import time

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import course
from autograder.kinds import function, program
from autograder.programs import run_exported
from autograder.questions import load_chapter
from tests.chapter_checks import recorded
from tests.grading.program_answers import forged, judged

CH01, CH05, CH06, CH10 = (load_chapter(n) for n in ("ch01_rooflines", "ch05_training", "ch06_applied_training",
                                                      "ch10_jax"))
STEP = CH05["ch05-cx4-fsdp-tp-step"]  # returns (loss, dW_in, dW_out)
STACK = CH06["ch06-cx6-fsdp-layers-step"]  # (loss, dW) under a per-device memory bound
RING = CH10["ch10-cx1-ring-all-gather"]  # 7 collective-permutes, nothing else


def verdict(q, fn):
    """The grader's verdict on ``fn`` as the kernel records it, the artefact run in this process."""
    return program.judge(q, recorded(q, fn))


def _step(change):
    """The model's training step, its results then passed through ``change``."""
    return lambda x, w_in, w_out: change(*STEP.model(x, w_in, w_out))


def _case(attack, fn, diagnosis, words):
    """An attack on the step's results: the program, its diagnosis and words its message must hold."""
    return pytest.param(fn, diagnosis, words, id=attack)


RESULTS = [
    _case("two of three", _step(lambda loss, gi, go: (loss, gi)), "wrong_type",
          "returned (array, array); expected a tuple of 3 arrays: loss, dW_in, dW_out"),
    _case("four", _step(lambda loss, gi, go: (loss, gi, go, go)), "wrong_type", "expected a tuple of 3 arrays"),
    _case("a dict", _step(lambda loss, gi, go: {"loss": loss, "dW_in": gi, "dW_out": go}), "wrong_type",
          "returned (dict)"),
    _case("nested", _step(lambda loss, gi, go: (loss, (gi, go))), "wrong_type", "returned (array, tuple)"),
    _case("in another order", _step(lambda loss, gi, go: (gi, loss, go)), "output_order",
          "in the order (dW_in, loss, dW_out); expected (loss, dW_in, dW_out)"),
    _case("a constant loss", _step(lambda loss, gi, go: (1.0, gi, go)), "wrong_values@loss", "loss: "),
    _case("the loss twice", _step(lambda loss, gi, go: (jnp.stack([loss, loss]), gi, go)), "wrong_shape@loss",
          "shape (2,)"),
    _case("a NaN gradient", _step(lambda loss, gi, go: (loss, gi * jnp.nan, go)), "not_finite@dW_in", "NaN"),
    _case("an infinite loss", _step(lambda loss, gi, go: (loss + jnp.inf, gi, go)), "not_finite@loss",
          "NaN or infinite"),
    _case("a bfloat16 gradient", _step(lambda loss, gi, go: (loss, gi.astype(jnp.bfloat16), go)), "wrong_type",
          "dtype bfloat16"),
    _case("a complex gradient", _step(lambda loss, gi, go: (loss, gi.astype(jnp.complex64), go)), "wrong_type@dW_in",
          "complex64"),
    _case("the inputs unchanged", lambda x, w_in, w_out: (x, w_in, w_out), "wrong_values@dW_in", "dW_in: "),
    _case("results that ignore the inputs",
          lambda x, w_in, w_out: (jnp.zeros(()), jnp.ones(w_in.shape), jnp.ones(w_out.shape)),
          "wrong_values@dW_in", "dW_in: "),  # judged as the constants they are, not as a device count
]


@pytest.mark.parametrize(("fn", "diagnosis", "words"), RESULTS)
def test_results_that_are_not_the_named_ones(fn, diagnosis, words):
    v = verdict(STEP, fn)
    assert (v.score, v.diagnosis) == (0, diagnosis), v.message
    assert words in v.message and "ArrayImpl" not in v.message, v.message


@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_a_scalar_result_of_one_element_in_any_shape_is_that_scalar(shape):
    """A loss returned as loss[None] or summed with keepdims holds the right value: judged as the scalar, as a number
    answer's one-element array is (it scored 0 for the shape, beside two right gradients)."""
    v = verdict(STEP, _step(lambda loss, gi, go: (loss.reshape(shape), gi, go)))
    assert (v.score, v.diagnosis) == (1.0, "correct"), v.message
    v = verdict(STEP, _step(lambda loss, gi, go: ((2 * loss).reshape(shape), gi, go)))
    assert v.diagnosis.endswith("@loss") and v.score == 0, v.message


# --- collectives the compiler adds: counted, even beside collectives the program states ---------------------

def _compiler_gathers_the_ring(x):
    """Leaves the gather to the compiler (a sharding constraint) and runs the 7 permutes the ring needs on a
    throwaway value, so that the program's own collectives look like the ring."""
    mesh = course.mesh(X=8)
    whole = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P()))  # f32[64, 32], replicated

    def decoy(a):
        for _ in range(7):
            a = jax.lax.ppermute(a, "X", [(i, (i + 1) % 8) for i in range(8)])
        return a

    return whole + 0 * jax.shard_map(decoy, mesh=mesh, in_specs=P("X"), out_specs=P("X"))(jnp.zeros(8)).sum()


def _replicated_inputs(x, y):
    """shard_map asks for whole operands (the compiler all-gathers both), then psums the copies and divides."""
    return jax.shard_map(lambda a, b: jax.lax.psum(a @ b, "X") / 8, mesh=course.mesh(X=8),
                         in_specs=(P(), P()), out_specs=P())(x, y)


def _moe_by_the_compiler(x, logits, w):
    """Ragged MoE without the dispatch: every expert gathered by the compiler (a sharding constraint), each token
    multiplied by its own, and two all_to_alls of a throwaway value where the dispatch and the return would be."""
    mesh = course.mesh(X=8)
    experts = jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P()))  # f32[E, D, F], whole on every device
    out = jnp.einsum("sd,sdf->sf", x, experts[jnp.argmax(logits, axis=-1)])  # f32[S, F]

    def there_and_back(a):
        return jax.lax.all_to_all(jax.lax.all_to_all(a, "X", 0, 0, tiled=True), "X", 0, 0, tiled=True)

    decoy = jax.shard_map(there_and_back, mesh=mesh, in_specs=P("X"), out_specs=P("X"))(jnp.zeros(64))
    return jax.lax.with_sharding_constraint(out + 0 * decoy.sum(), NamedSharding(mesh, P("X", None)))


@pytest.mark.parametrize(("q", "fn"), [(RING, _compiler_gathers_the_ring),
                                       (CH01["ch01-cx4-split-matmul"], _replicated_inputs),
                                       (CH10["ch10-q2-moe-ragged"], _moe_by_the_compiler)],
                         ids=["decoy-ring", "resharded", "decoy-moe"])
def test_collectives_the_compiler_adds_are_counted(q, fn):
    v = verdict(q, fn)
    assert v.score == 0.5 and "all-gather" in v.diagnosis.removeprefix("collectives:").split(","), v.diagnosis
    assert "that the compiler added outside your shard_map" in v.message and "all-gather" in v.message, v.message


def _psums_of_every_length(x, y):
    """The right psum, then 40 more of a throwaway slice, one of each length: 41 collectives of distinct shapes."""
    def block(x_block, y_block):
        extra = sum(jax.lax.psum(x_block.reshape(-1)[:n], "X").sum() for n in range(1, 41))
        return jax.lax.psum(x_block @ y_block, "X") + 0 * extra

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)), out_specs=P())(x, y)


def test_a_flood_of_collectives_is_counted_not_listed():
    v = verdict(CH01["ch01-cx4-split-matmul"], _psums_of_every_length)
    assert (v.score, v.diagnosis) == (0.5, "collectives:all-reduce")
    assert v.message.startswith("Right numbers, but your program runs 1 x all-reduce of f32[64,128]"), v.message
    assert "and 29 more, each moving fewer bytes" in v.message and len(v.message) < 2000, v.message


# --- the memory bound is measured on the artefact the grader compiles --------------------------------------

def _keeps_gathered_and_pads(x, w):
    """Every gathered layer kept for the backward pass (no jax.checkpoint), and 16 all-gathers of one number
    added so that the count of all-gathers is the one FSDP's regathering gives."""
    scale = (2 / x.shape[1]) ** 0.5

    def block(x_block, w_block):  # f32[8, 128], f32[16, 16, 128]
        def layer(h, w_shard):
            return jnp.maximum(h @ jax.lax.all_gather(w_shard, "X", axis=0, tiled=True), 0.0) * scale, None

        def loss(w_shards):
            out, _ = jax.lax.scan(layer, x_block, w_shards)
            pad, _ = jax.lax.scan(lambda c, _: (c + 0 * jax.lax.all_gather(c, "X").sum(), None), x_block[0, 0],
                                  None, length=w_shards.shape[0])
            return jax.lax.psum(jnp.sum(out**2) + 0 * pad, "X") / (2 * x.shape[0])

        return jax.value_and_grad(loss)(w_block)

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P(None, "X", None)),
                         out_specs=(P(), P(None, "X", None)))(x, w)


def test_padding_the_collectives_does_not_hide_the_memory():
    v = verdict(STACK, _keeps_gathered_and_pads)
    assert (v.score, v.diagnosis) == (0.5, "memory"), v.message
    assert v.data["memory"]["temporaries"] + v.data["memory"]["outputs"] > STACK.spec.max_bytes


def test_donated_inputs_do_not_change_the_measured_memory():
    """The memory analysis is the grader's, of the program it compiles: an artefact exported with its inputs
    donated to its results is measured exactly as the same program without them."""
    plain, donated = (run_exported(STACK.spec, forged(STACK, STACK.model, **jit), 7, make_mesh=course.mesh)
                      for jit in ({}, {"donate_argnums": (0, 1)}))
    assert plain.memory == donated.memory and plain.memory is not None
    assert program.judge(STACK, forged(STACK, STACK.model, donate_argnums=(0, 1))).score == 1


# --- custom calls: refused in the kernel, and refused again when forged ---------------------------------------

def _ragged_all_to_all(x, logits, w):
    """Tokens sent with ragged_all_to_all (a custom call with no serialization guarantee), in equal parts."""
    def block(x_block, logits_block, w_block):
        n, rows = 8, x_block.shape[0] // 8
        sizes = jnp.full((n,), rows, jnp.int32)
        offsets = jnp.arange(n, dtype=jnp.int32) * rows
        return jax.lax.ragged_all_to_all(x_block, jnp.zeros_like(x_block), offsets, sizes, offsets, sizes,
                                         axis_name="X")
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X"), P("X"), P("X")), out_specs=P("X"))(
        x, logits, w)


def _calls_home(*args):
    """The right result, handed to a custom call the runner could have registered code under."""
    out = CH10["ch10-cx6-allreduce-matmul"].model(*args)
    return jax.ffi.ffi_call("student_helper", jax.ShapeDtypeStruct(out.shape, out.dtype))(out)


def test_custom_calls_are_refused_with_their_name(tmp_path):
    moe = CH10["ch10-q2-moe-ragged"]
    record = recorded(moe, _ragged_all_to_all)
    assert isinstance(record, dict) and "ragged_all_to_all" in record["error"]  # jax will not export it
    v = program.judge(moe, record)
    assert (v.score, v.diagnosis) == (0, "raised") and "could not be lowered" in v.message
    answers = {moe.qid: forged(moe, _ragged_all_to_all, "ragged_all_to_all"),
               "ch10-cx6-allreduce-matmul": forged(CH10["ch10-cx6-allreduce-matmul"], _calls_home, "student_helper")}
    verdicts = judged(CH10, answers, tmp_path)
    for qid, target in zip(answers, ("ragged_all_to_all", "student_helper"), strict=True):
        v = verdicts[qid]
        assert (v.score, v.diagnosis) == (0, "bad_program") and f"calls {target!r}" in v.message, v.message


# --- programs that never end or return too much: each costs only its own answer -------------------------------

def _model_of(qid):
    return CH10[qid].model


def _forever(x):  # a while_loop whose condition never fails
    return jax.lax.while_loop(lambda c: c.sum() < jnp.inf, lambda c: c + 1.0, _model_of("ch10-q1-shard-sums")(x))


def _billion_steps(a, w):  # a scan of 10^9 steps
    out = _model_of("ch10-cx2-collective-matmul")(a, w)
    return jax.lax.scan(lambda c, _: (c + 1.0, None), out, None, length=10**9)[0]


def _spins_in_psum(a, w):  # a loop that runs a psum every step, forever
    spec = CH10["ch10-q4-bidirectional-matmul"].spec
    out = _model_of("ch10-q4-bidirectional-matmul")(a, w)
    spin = jax.shard_map(lambda c: jax.lax.while_loop(lambda c: jax.lax.psum(c.sum(), "X") < jnp.inf,
                                                      lambda c: c + 1.0, c),
                         mesh=course.mesh(**dict(spec.mesh)), in_specs=P(*spec.out_spec), out_specs=P(*spec.out_spec))
    return spin(out)


def _two_gib(a, w):  # the right numbers, and 2 GiB of zeros for a result
    return jnp.zeros((2**29,), jnp.float32) + _model_of("ch10-cx6-allreduce-matmul")(a, w).sum()


def test_runaway_programs_cost_only_their_own_answers(tmp_path):
    runaway = {"ch10-q1-shard-sums": _forever, "ch10-cx2-collective-matmul": _billion_steps,
               "ch10-q4-bidirectional-matmul": _spins_in_psum}
    answers = {qid: recorded(CH10[qid], fn) for qid, fn in runaway.items()}
    answers["ch10-cx6-allreduce-matmul"] = recorded(CH10["ch10-cx6-allreduce-matmul"], _two_gib)
    answers[RING.qid] = recorded(RING, RING.model)  # the notebook's one right program, graded last
    start = time.monotonic()
    verdicts = judged(CH10, answers, tmp_path, seconds=120, each=5)
    assert time.monotonic() - start < 60
    for qid in runaway:
        v = verdicts[qid]
        assert (v.score, v.diagnosis) == (0, "program_failed") and "limits" in v.message, (qid, v)
    v = verdicts["ch10-cx6-allreduce-matmul"]
    assert (v.score, v.diagnosis) == (0, "bad_program") and "2,147,483,648 bytes" in v.message, v.message
    assert verdicts[RING.qid].score == 1
    assert not any(str(tmp_path) in v.message or "Traceback" in v.message for v in verdicts.values())


# --- a Function question over compiled text, answered with junk --------------------------------------------------

def test_junk_answers_to_a_question_over_compiled_text_are_judged_quickly():
    """CX8's cases are compiled programs (thousands of characters of text each); a function that returns huge
    or odd values for them is judged at once, with a message of ordinary length."""
    q = load_chapter("ch09_profiling")["ch09-cx8-read-compiled"]
    drawn = function.drawn_probes(q, "a seed")
    junk = [["9" * 100_000, {"error": "x" * 100_000}, None, [1.0] * 100_000, "nan"] for _ in drawn]
    start = time.monotonic()
    v = function.judge(q, {"drawn": junk}, "a seed")
    assert time.monotonic() - start < 5
    assert v.score == 0 and len(v.message) < 1000, v.message


def ring_as_if_device_zero(x):
    """The ring all-gather that forgets ``axis_index``: every device places its blocks as device 0 would, so device 0
    holds the whole array and every other device a rotation of it."""
    mesh = course.mesh(X=8)

    def block(x_block):
        n, rows = jax.lax.axis_size("X"), x_block.shape[0]
        right = [(j, (j + 1) % n) for j in range(n)]
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((n * rows, x_block.shape[1]), x_block.dtype), x_block, 0, 0)

        def step(i, carry):
            out, travelling = carry
            travelling = jax.lax.ppermute(travelling, "X", right)
            return jax.lax.dynamic_update_slice_in_dim(out, travelling, (-i - 1) % n * rows, 0), travelling

        return jax.lax.fori_loop(0, n - 1, step, (out, x_block))[0]

    return jax.shard_map(block, mesh=mesh, in_specs=P("X", None), out_specs=P(), check_vma=False)(x)


def test_every_copy_of_a_replicated_result_is_checked():
    """A result the spec replicates was read from one device's copy: a ring that is right on device 0 only earned
    full marks. Every device's copy is compared, and one that differs makes the values wrong."""
    v = verdict(RING, ring_as_if_device_zero)
    assert (v.score, v.diagnosis) == (0.0, "wrong_values"), v
    assert "device 1 holds differs from" in v.message, v.message
    assert verdict(RING, RING.model).ok
