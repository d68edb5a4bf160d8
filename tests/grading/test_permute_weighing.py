"""Collective-permutes the compiler places are weighed too, on the questions whose collectives are permutes (a
ring): ``jnp.roll`` of a sharded array outside a shard_map makes XLA place a permute that sends every block k
devices on, and seven of them have a ring's count without being one. A placed permute whose pairs are not
neighbours on the ring of its axis (either way round) is no ring step, and costs the answer full marks with a
sentence that says so; a ring of neighbour rolls, and every model, keep full marks."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import course
from autograder import model_traffic
from autograder.compiled_hlo import placed_permutes
from autograder.kinds import program
from autograder.messages import phrase_program
from autograder.programs import run_exported
from autograder.questions import chapter_names, load_chapter
from tests.chapter_checks import printed, recorded

CH03, CH10 = load_chapter("ch03_sharding"), load_chapter("ch10_jax")
RINGS = [CH03["ch03-cx4-ring-allgather"], CH10["ch10-cx1-ring-all-gather"]]
BIDI = CH03["ch03-cx4-bidi-allgather"]
N = 8


def _put_in_place(*parts):
    """On device i, part k holds block (i - k) % N: the blocks in order, by local indexing only."""
    i = jax.lax.axis_index("X")
    return jnp.stack(parts)[(i - jnp.arange(len(parts))) % N].reshape(-1, parts[0].shape[-1])


def _gather(parts):
    return jax.shard_map(_put_in_place, mesh=course.mesh(X=N), in_specs=(P("X"),) * len(parts), out_specs=P(),
                         check_vma=False)(*parts)


def rolled(x):
    """Seven rolls outside the shard_map: the compiler places a permute for each, k devices on (no ring)."""
    n = x.shape[0] // N
    return _gather([x] + [jnp.roll(x, n * k, axis=0) for k in range(1, N)])


def rolled_both_ways(x):
    """Fourteen rolls, k devices on and k back: twice the count, and still no ring."""
    n = x.shape[0] // N
    parts = [x] + [jnp.roll(x, n * k, axis=0) for k in range(1, N)]
    back = [jnp.roll(x, -n * k, axis=0) for k in range(1, N)]
    return _gather(parts) + 0 * _gather([x] + back[::-1])


def rolled_ring(x, way=1):
    """A ring written with rolls: each roll moves the last one's blocks one device on (or back), so every permute
    the compiler places goes to a neighbour."""
    n = x.shape[0] // N
    parts = [x]
    for _ in range(1, N):
        parts.append(jnp.roll(parts[-1], way * n, axis=0))
    return _gather(parts if way == 1 else [parts[0], *parts[:0:-1]])


def half_ring(x):
    """Three ring steps stated with ppermute, and four blocks brought by rolls the compiler places."""
    n = x.shape[0] // N
    far = [jnp.roll(x, n * k, axis=0) for k in range(4, N)]

    def local(b, *rest):
        near = [b]
        for _ in range(3):
            near.append(jax.lax.ppermute(near[-1], "X", [(j, (j + 1) % N) for j in range(N)]))
        return _put_in_place(*near, *rest)
    return jax.shard_map(local, mesh=course.mesh(X=N), in_specs=(P("X"),) * 5, out_specs=P(), check_vma=False)(
        x, *far)


@pytest.mark.parametrize("q", RINGS, ids=lambda q: q.qid)
@pytest.mark.parametrize("fn", [rolled, half_ring], ids=lambda f: f.__name__)
def test_permutes_the_compiler_places_k_devices_on_are_not_ring_steps(q, fn):
    v = program.judge(q, recorded(q, fn))
    assert v.score < 1 and v.diagnosis == "collectives:not_ring", (v.diagnosis, v.message)
    assert "compiler" in v.message and "neighbour" in v.message and len(v.message) < 1000, v.message


def test_fourteen_rolls_do_not_make_a_bidirectional_ring():
    v = program.judge(BIDI, recorded(BIDI, rolled_both_ways))
    assert v.score < 1 and v.diagnosis == "collectives:not_ring", (v.diagnosis, v.message)


@pytest.mark.parametrize("way", [1, -1], ids=["forward", "backward"])
@pytest.mark.parametrize("q", RINGS, ids=lambda q: q.qid)
def test_a_ring_of_neighbour_rolls_keeps_full_marks(q, way):
    v = program.judge(q, recorded(q, lambda x: rolled_ring(x, way)))
    assert (v.score, v.diagnosis) == (1.0, "correct"), v.message


def test_the_self_check_says_what_the_grader_says():
    q = RINGS[0]
    fp = printed(q)
    v = program.selfcheck_live(fp, q.qid, rolled)
    assert v.score < 1 and v.diagnosis == "collectives:not_ring", v.message


# --- which permutes the compiler placed, and which are ring steps -------------------------------------------------

STATED = ('%1 = "stablehlo.collective_permute"(%arg3) <{channel_handle = #stablehlo.channel_handle<handle = 1, '
          'type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : '
          '(tensor<8x32xf32>) -> tensor<8x32xf32>')


def _compiled(*pairs: str) -> str:
    return "\n".join(f"%p.{k} = f32[8,32]{{1,0}} collective-permute(%x), channel_id={k}, "
                     f"source_target_pairs={{{p}}}, metadata={{op_name=\"roll\"}}" for k, p in enumerate(pairs))


def test_a_permute_the_program_states_is_not_placed_and_the_others_are_weighed():
    """The stated ring's pairs are the program's own however many compiled permutes run them (a step stated once in a
    function called twice, or unrolled); the others are weighed."""
    ring, back, jump = "{0,1},{1,2},{2,3},{3,0}", "{0,3},{1,0},{2,1},{3,2}", "{0,2},{1,3},{2,0},{3,1}"
    placed = placed_permutes(STATED, _compiled(ring, back, jump, ring), (("X", 4),))
    assert [(c.hops, ring_step) for c, ring_step in placed] == [((0.0, 1.0), True), ((2.0, 0.0), False)]
    assert all(c.kind == "collective-permute" and c.operand_shape == (8, 32) and c.count == 1 for c, _ in placed)


def test_a_step_on_two_axes_at_once_is_no_ring_step():
    mesh = (("X", 2), ("Y", 4))
    one_axis = "{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7},{7,4}"  # round Y on each row
    other_axis = "{0,4},{4,0},{1,5},{5,1}"  # along X
    diagonal = "{0,5},{5,2},{2,7},{7,0}"  # X and Y at once
    placed = placed_permutes("", _compiled(one_axis, other_axis, diagonal), mesh)
    assert [ring_step for _, ring_step in placed] == [True, True, False]


def test_the_sentence_names_no_answer():
    text = phrase_program("not_ring", n=6, count=7, far=4)
    assert "6 of the 7" in text and "jnp.roll" in text


RING_QUESTIONS = [q for name in chapter_names() for q in model_traffic.programs_of(load_chapter(name))
                  if q.spec.collectives.get("collective-permute") and not q.spec.mesh_choices]


@pytest.mark.parametrize("q", RING_QUESTIONS, ids=lambda q: f"{q.qid}-{model_traffic.spec_key(q.spec)}")
def test_no_model_leaves_a_permute_to_the_compiler(q):
    """The models (every variant's) state every permute they run: the yardstick (what a model moves) and the
    weighing agree."""
    report = run_exported(q.spec, recorded(q, q.solution), 0, make_mesh=course.mesh)
    assert not report.error and report.placed == () and report.jumps == 0, report
