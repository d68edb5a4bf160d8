"""Program questions whose mesh the student chooses (``ProgramSpec.mesh_choices``): the choice is read from the
keyword defaults of the student's function, checked against the allowed shapes with a sentence for every kind
of bad answer (never a crash), and the program is exported, run and judged at the chosen shape, by the grader
and the self-check alike."""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from autograder import fingerprint, kinds
from autograder.kinds.program import at_choice, judge_all, mesh_of
from autograder.meshes import mesh
from autograder.programs import run, run_items
from autograder.questions import AuthoringError, MeshChoice, Operand, Program, ProgramSpec, Slip
from autograder.verdict import Status

B, D, F = 16, 32, 64
SHAPES = ((("X", 8), ("Y", 1)), (("X", 4), ("Y", 2)), (("X", 2), ("Y", 4)))
# The MLP's training step with x[B_X, D], W_in[D_X, F_Y], W_out[F_Y, D_X]; at 8 x 1 the sum over Y moves nothing
# and may be left out.
SPEC = ProgramSpec(mesh=SHAPES[2], einsum="a training step of the MLP", reference="mlp_train_step",
                   outputs=("loss", "dW_in", "dW_out"),
                   operands=(Operand((B, D), ("X", None)), Operand((D, F), ("X", "Y")), Operand((F, D), ("Y", "X"))),
                   out_spec=((), ("X", "Y"), ("Y", "X")),
                   collectives={"all-gather": 2, "reduce-scatter": 2, "all-reduce": 2},
                   mesh_choices=(MeshChoice(SHAPES[0], {"all-gather": 2, "reduce-scatter": 2, "all-reduce": (1, 2)}),
                                 MeshChoice(SHAPES[1]), MeshChoice(SHAPES[2])),
                   rtol=1e-3, atol=1e-3)


def step(x, w_in, w_out, *, X=2, Y=4):
    def block(x_block, w_in_block, w_out_block):
        def loss(a, b):
            h = jnp.maximum(x_block @ jax.lax.all_gather(a, "X", axis=0, tiled=True), 0.0)
            out = jax.lax.psum(h @ jax.lax.all_gather(b, "X", axis=1, tiled=True), "Y")
            return jax.lax.psum(jnp.sum(out**2), "X") / (2 * x.shape[0])
        value, (d_in, d_out) = jax.value_and_grad(loss, argnums=(0, 1))(w_in_block, w_out_block)
        return value, d_in, d_out
    return jax.shard_map(block, mesh=mesh(X=X, Y=Y), in_specs=(P("X", None), P("X", "Y"), P("Y", "X")),
                         out_specs=(P(), P("X", "Y"), P("Y", "X")))(x, w_in, w_out)


def question(spec: ProgramSpec = SPEC) -> Program:
    return Program(qid="ch99-cx1-chosen-mesh", points=1, prompt="A training step at the mesh you choose.", spec=spec,
                   model=step, slips=(Slip(None, "mesh_choice:not_a_function"),))


def verdicts(q: Program, answer):
    """The grader's verdict on what the kernel records for ``answer``, and the self-check's on the live answer."""
    fp = fingerprint.make(q)
    return kinds.judge(q, kinds.encode(fp, answer)), kinds.selfcheck_live(fp, q.qid, answer)


def test_the_choice_is_the_functions_keyword_defaults():
    assert mesh_of(SPEC, step) == {"X": 2, "Y": 4}
    assert mesh_of(SPEC, functools.partial(step, X=4, Y=2)) == {"X": 4, "Y": 2}
    assert mesh_of(SPEC, lambda x, w_in, w_out, X=8, Y=1: None) == {"X": 8, "Y": 1}
    assert mesh_of(SPEC, "step") is None


def test_at_a_choice_the_spec_has_its_mesh_collectives_and_shardings():
    """A sharding over an axis of size 1 is no sharding: JAX reports none, so the expected spec leaves it out."""
    at = SPEC.at(SHAPES[0])
    assert at.mesh == SHAPES[0] and not at.mesh_choices
    assert at.collectives["all-reduce"] == (1, 2)
    assert at.out_spec == ((), ("X", None), (None, "X"))
    assert SPEC.at(SHAPES[1]).collectives == SPEC.collectives and SPEC.at(SHAPES[1]).out_spec == SPEC.out_spec
    assert ProgramSpec.from_json(SPEC.to_json()) == SPEC
    with pytest.raises(KeyError):
        SPEC.at((("X", 1), ("Y", 8)))


@pytest.mark.parametrize(("change", "words"), [
    ({"mesh": (("X", 1), ("Y", 8))}, "one of its mesh_choices"),
    ({"mesh_choices": SPEC.mesh_choices + (MeshChoice((("Y", 8), ("X", 1))),)}, "the same axes"),
    ({"mesh_choices": SPEC.mesh_choices + (MeshChoice((("X", 4), ("Y", 4))),)}, "devices"),
    ({"mesh_choices": SPEC.mesh_choices + (MeshChoice(SHAPES[0]),)}, "twice"),
    ({"operands": (Operand((12, D), ("X", None)),) + SPEC.operands[1:]}, "divide"),
])
def test_authoring_mistakes_in_the_choices_fail_at_import(change, words):
    with pytest.raises(AuthoringError, match=words):
        ProgramSpec(**{**SPEC.__dict__, **change})


def _no_defaults(x, w_in, w_out, *, X, Y):
    return step(x, w_in, w_out, X=X, Y=Y)


BAD = [
    (None, "not_a_function", "Expected your step function"),
    ("X=2, Y=4", "not_a_function", "keyword parameters X and Y"),
    (({"X": 2, "Y": 4}, step), "not_a_function", "def step(x, ..., *, X=8, Y=1)"),
    (_no_defaults, "missing", "Missing: X and Y"),
    (functools.partial(step, Y=None), "not_whole", "default for it is None"),
    (functools.partial(step, X=2.0), "not_whole", "default for it is 2.0"),
    (functools.partial(step, X="2"), "not_whole", "default for it is '2'"),
    (functools.partial(step, X=True), "not_whole", "default for it is True"),
    (functools.partial(step, X=3, Y=3), "not_allowed", "a 3 x 3 mesh"),
    (functools.partial(step, X=1, Y=8), "not_allowed", "choose one of 8 x 1, 4 x 2 or 2 x 4"),
]


@pytest.mark.parametrize(("answer", "code", "words"), BAD, ids=[f"{c}-{i}" for i, (_, c, _) in enumerate(BAD)])
def test_a_bad_choice_is_a_sentence_in_both_judges(answer, code, words):
    graded, checked = verdicts(question(), answer)
    assert graded.status is Status.INVALID and graded.diagnosis == f"mesh_choice:{code}", graded
    assert words in graded.message, graded.message
    assert (checked.status, checked.diagnosis, checked.message) == (graded.status, graded.diagnosis, graded.message)


@pytest.mark.parametrize("shape", SHAPES, ids=["8x1", "4x2", "2x4"])
def test_the_program_is_judged_at_the_chosen_mesh_by_both(shape):
    """The bound lies between what the step holds at 4 x 2 and at 2 x 4 (measured here, at these sizes): the
    same function passes at one shape and gets the memory diagnosis at the others, in the grader and the
    self-check alike."""
    held = {s: _held(s) for s in SHAPES}
    assert held[SHAPES[0]] > held[SHAPES[1]] > held[SHAPES[2]], held
    bounded = ProgramSpec(**{**SPEC.__dict__, "max_bytes": (held[SHAPES[1]] + held[SHAPES[2]]) // 2,
                             "over_memory": "Choose more Y."})
    graded, checked = verdicts(question(bounded), functools.partial(step, **dict(shape)))
    assert (graded.status, graded.diagnosis) == (checked.status, checked.diagnosis)
    if shape == SHAPES[2]:
        assert graded.status is Status.CORRECT, graded
    else:
        assert graded.diagnosis == "memory" and f"{held[shape]:,} bytes" in graded.message, graded
        assert graded.message == checked.message


@functools.cache
def _held(shape) -> int:
    """Bytes per device of results and temporaries (measured where a spec bounds them: here, by far)."""
    measured = ProgramSpec(**{**SPEC.__dict__, "max_bytes": 2**40}).at(shape)
    memory = run(measured, functools.partial(step, **dict(shape)), 1, make_mesh=mesh).memory
    return memory["outputs"] + memory["temporaries"]


def test_a_forged_record_is_judged_not_run():
    """The grader reads the choice from the record, as data: whatever the record holds, a sentence."""
    q = question()
    fp = fingerprint.make(q)
    blob = kinds.encode(fp, step)["program"]
    records = {"no mesh": blob, "mesh as text": {"mesh": "2x4", "program": blob},
               "not allowed": {"mesh": {"X": 16, "Y": 1}, "program": blob}, "no program": {"mesh": {"X": 2, "Y": 4}}}
    got = {name: judge_all({q.qid: q}, {q.qid: record}, None, functools.partial(run_items, make_mesh=mesh))[q.qid]
           for name, record in records.items()}
    assert {name: v.diagnosis for name, v in got.items()} == {
        "no mesh": "mesh_choice:not_a_function", "mesh as text": "mesh_choice:not_a_function",
        "not allowed": "mesh_choice:not_allowed", "no program": "wrong_type"}
    assert at_choice(SPEC, {"X": 2, "Y": 4}) == SPEC.at(SHAPES[2])


def test_a_right_step_at_a_shape_the_prose_does_not_ask_for_earns_half_in_both_judges():
    """A shape that fits, where the prose asks for another that fits too (the least tensor parallelism): half, told
    why; a wrong step there is judged as it is, and the shape asked for keeps full marks."""
    why = "a shape of less tensor parallelism fits too."
    choices = (MeshChoice(SHAPES[0]), MeshChoice(SHAPES[1], earns_half=why), MeshChoice(SHAPES[2]))
    q = question(ProgramSpec(**{**SPEC.__dict__, "mesh_choices": choices}))
    assert ProgramSpec.from_json(q.spec.to_json()) == q.spec  # the sentence travels with the public spec
    graded, checked = verdicts(q, functools.partial(step, X=4, Y=2))
    for v in (graded, checked):
        assert (v.score, v.diagnosis) == (0.5, "mesh_choice:earns_half") and v.message.endswith(why), v.message
        assert "4 x 2 mesh" in v.message, v.message

    def doubled(x, w_in, w_out, *, X=4, Y=2):
        loss, d_in, d_out = step(x, w_in, w_out, X=X, Y=Y)
        return loss, 2 * d_in, d_out
    graded, checked = verdicts(q, doubled)
    assert graded.score == checked.score == 0 and "earns_half" not in graded.diagnosis, graded
    graded, checked = verdicts(q, step)
    assert graded.status is checked.status is Status.CORRECT, graded
