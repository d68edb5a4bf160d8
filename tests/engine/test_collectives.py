"""The collective inspector on programs whose collectives are known: kinds, axes, counts (loops
included), dtypes and bytes per device; and the time model beside it."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import course
from autograder.collectives import Collective, census
from autograder.compiled_hlo import compiled_census
from course import comms

MESH = course.mesh(X=8)
MESH2 = course.mesh(X=2, Y=4)


def arg(shape, spec, mesh=MESH, dtype=jnp.float32):
    return jax.device_put(jax.random.normal(jax.random.key(1), shape, dtype=dtype), NamedSharding(mesh, spec))


def smap(fn, in_specs, out_specs, mesh=MESH):
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def one(found):
    assert len(found) == 1, [c.describe() for c in found]
    return found[0]


def test_all_gather_then_matmul():
    f = smap(lambda x, y: jax.lax.all_gather(x, "X", axis=1, tiled=True, to="invarying") @ y, (P(None, "X"), P()), P())
    c = one(comms.inspect(f, arg((64, 256), P(None, "X")), arg((256, 128), P())))
    assert (c.kind, c.axes, c.dtype, c.operand_shape, c.group_size, c.count) == (
        "all-gather", ("X",), "f32", (64, 32), 8, 1)
    assert c.bytes_per_device == 7 * 64 * 32 * 4


def test_psum_and_psum_scatter():
    f = smap(lambda x, y: jax.lax.psum(x @ y, "X"), (P(None, "X"), P("X", None)), P())
    c = one(comms.inspect(f, arg((64, 256), P(None, "X")), arg((256, 128), P("X", None))))
    assert (c.kind, c.operand_shape, c.bytes_per_device) == ("all-reduce", (64, 128), 2 * 7 / 8 * 64 * 128 * 4)
    g = smap(lambda x, y: jax.lax.psum_scatter(x @ y, "X", scatter_dimension=0, tiled=True),
             (P(None, "X"), P("X", None)), P("X", None))
    c = one(comms.inspect(g, arg((64, 256), P(None, "X")), arg((256, 128), P("X", None))))
    assert (c.kind, c.operand_shape) == ("reduce-scatter", (64, 128))


def test_bf16_is_counted_in_its_own_width():
    f = smap(lambda x: jax.lax.all_gather(x, "X", tiled=True, to="invarying"), P("X"), P())
    c = one(comms.inspect(f, arg((64, 32), P("X"), dtype=jnp.bfloat16)))
    assert c.dtype == "bf16" and c.operand_bytes == 8 * 32 * 2


def test_scan_multiplies_by_its_length():
    ring = [(i, (i + 1) % 8) for i in range(8)]

    def body(carry, _):
        return jax.lax.ppermute(carry, "X", ring), None

    f = smap(lambda x: jax.lax.scan(body, x, None, length=7)[0], P("X"), P("X"))
    c = one(comms.inspect(f, arg((64, 32), P("X"))))
    assert (c.kind, c.count, c.axes) == ("collective-permute", 7, ("X",))
    assert census([c]) == {"collective-permute": 7}


def test_axes_of_a_two_dimensional_mesh():
    f = smap(lambda x: jax.lax.psum(jax.lax.all_gather(x, "Y", tiled=True, to="invarying"), "X"), P("X", "Y"),
             P(None, None), mesh=MESH2)
    found = comms.inspect(f, arg((16, 32), P("X", "Y"), mesh=MESH2))
    assert {(c.kind, c.axes, c.group_size) for c in found} == {("all-gather", ("Y",), 4), ("all-reduce", ("X",), 2)}


def test_gradient_turns_all_gather_into_reduce_scatter():
    # Each device squares the gathered array (a varying value): the gradient must sum the devices'
    # contributions to each shard, which is a reduce-scatter.
    f = smap(lambda x: (jax.lax.all_gather(x, "X", tiled=True) ** 2).sum()[None], P("X"), P("X"))

    def loss(x):
        return f(x).sum()

    found = comms.inspect(jax.grad(loss), arg((64, 32), P("X")))
    assert census(found).get("reduce-scatter") == 1, [c.describe() for c in found]


def test_compiler_chosen_collectives_are_counted_in_the_compiled_program():
    f = jax.jit(lambda x, y: x @ y, out_shardings=NamedSharding(MESH, P()))
    x, y = arg((64, 256), P(None, "X")), arg((256, 128), P("X", None))
    assert comms.inspect(f, x, y) == []  # no collectives before partitioning
    counts = compiled_census(f.lower(x, y).compile().as_text())
    assert counts.get("all-reduce", 0) >= 1


def test_the_report_states_the_bytes_and_the_prediction_but_prices_nothing():
    """Part 3, Q2-like: an all-gather of 8 x bf16[1024, 1024] blocks. The report says what the program moves
    (7 blocks of 2 MiB received per device) and restates the student's prediction; the time those bytes take
    is what the chapter asks the student to derive, so it never prints one."""
    gather = smap(lambda x: jax.lax.all_gather(x, "X", tiled=True, to="invarying"), P("X"), P())
    x = arg((8 * 1024, 1024), P("X"), dtype=jnp.bfloat16)
    c = one(comms.inspect(gather, x))
    assert c.bytes_per_device == 7 * 1024 * 1024 * 2
    text = comms.report(gather, x, predicted_s=1.5e-4, one_way_bytes_per_s=4.5e10)
    assert text.splitlines()[0] == ("your formula predicts 150 us on links of 4.5e+10 B/s each way; your program "
                                    "runs 1 collective, 14,680,064 bytes moved per device in all")
    assert text.count(" us") == 1 and not hasattr(comms, "ring_seconds")
    assert comms.report(gather, x).startswith("your program runs 1 collective")


def test_a_collective_in_a_loop_of_unknown_length_says_so():
    c = Collective("all-reduce", ("X",), "i32", (), 8, None)
    assert c.describe() == ("all-reduce of i32[] over X (7 bytes moved per device each, once per step of a loop of "
                            "unknown length)")
    assert Collective("all-gather", ("X",), "f32", (2, 4), 8, 3).describe().startswith("3 x all-gather of f32[2,4]")


# A compiled program as XLA prints it, cut to what the readers use: a loop's body is printed once, its trip count in
# the loop's backend_config; a conditional names its branches; a computation nobody calls still counts once.
_AR = "replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add"
_TRIPS = 'backend_config={"known_trip_count":{"n":"%d"}}'
COMPILED_LOOPS = f"""HloModule jit_f, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {{
  ROOT %s = f32[] add(%a, %b)
}}

%inner (p: (s32[], f32[8])) -> (s32[], f32[8]) {{
  %ar.inner = f32[8]{{0}} all-reduce(%x), channel_id=1, {_AR}
}}

%outer (p: (s32[], f32[8])) -> (s32[], f32[8]) {{
  %while.inner = (s32[], f32[8]{{0}}) while(%t), condition=%cond, body=%inner, {_TRIPS % 3}
  %ag.outer = f32[64]{{0}} all-gather(%y), channel_id=2, replica_groups={{{{0,1,2,3,4,5,6,7}}}}, dimensions={{0}}
}}

%cond (p: (s32[], f32[8])) -> pred[] {{
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}}

%cheap (p: (f32[8])) -> (f32[8]) {{
  ROOT %t1 = (f32[8]{{0}}) tuple(%q)
}}

%costly (p: (f32[8])) -> (f32[8]) {{
  %ar.branch = f32[8]{{0}} all-reduce(%q), channel_id=3, {_AR}
}}

%as.costly (p: (f32[8])) -> (f32[8]) {{
  %ar.other = f32[8]{{0}} all-reduce(%q), channel_id=7, {_AR}
}}

%unknown (p: (s32[], f32[8])) -> (s32[], f32[8]) {{
  %ar.unknown = f32[8]{{0}} all-reduce(%z), channel_id=4, {_AR}
}}

%nobody (p: f32[8]) -> f32[8] {{
  %ar.nobody = f32[8]{{0}} all-reduce(%w), channel_id=5, {_AR}
}}

ENTRY %main (x: f32[8]) -> f32[8] {{
  %while.outer = (s32[], f32[8]{{0}}) while(%t0), condition=%cond, body=%outer, {_TRIPS % 8}
  %conditional = (f32[8]{{0}}) conditional(%b, %t2, %t2), branch_computations={{%cheap, %costly, %as.costly}}
  %while.unknown = (s32[], f32[8]{{0}}) while(%t3), condition=%cond, body=%unknown
  %ar.entry = f32[8]{{0}} all-reduce(%x), channel_id=6, {_AR}
}}
"""


def test_the_compiled_census_counts_each_collective_as_often_as_its_loops_run():
    from autograder.compiled_hlo import compiled_collectives, compiled_runs

    runs = {line.split("=")[0].strip(): n for line, n in compiled_runs(COMPILED_LOOPS) if "all-" in line}
    # 8 x 3 inside the nested loops, 8 in the outer body, one branch (the other as costly runs 0 times: each run
    # takes one branch), unknown in a loop XLA could not count, once where nothing calls it and once in ENTRY
    assert runs == {"%ar.inner": 24, "%ag.outer": 8, "%ar.branch": 1, "%ar.other": 0, "%ar.unknown": None,
                    "%ar.nobody": 1, "%ar.entry": 1}
    assert compiled_census(COMPILED_LOOPS) == {"all-reduce": 24 + 1 + 1 + 1 + 1, "all-gather": 8}
    counts = [(c.kind, c.count) for c in compiled_collectives(COMPILED_LOOPS, (("X", 8),))]
    assert counts == [("all-reduce", 24), ("all-gather", 8), ("all-reduce", 1), ("all-reduce", None),
                      ("all-reduce", 1), ("all-reduce", 1)]


BRANCHES = f"""HloModule jit_f, num_partitions=8

%light (p: (f32[8])) -> (f32[8]) {{
  %ar.light1 = f32[8]{{0}} all-reduce(%q), channel_id=1, {_AR}
  %ar.light2 = f32[8]{{0}} all-reduce(%q), channel_id=2, {_AR}
  %ag.light = f32[64]{{0}} all-gather(%q), channel_id=3, replica_groups={{{{0,1,2,3,4,5,6,7}}}}, dimensions={{0}}
}}

%heavy (p: (f32[8])) -> (f32[8]) {{
  %ar.heavy = f32[1024]{{0}} all-reduce(%q), channel_id=4, {_AR}
}}

ENTRY %main (x: f32[8]) -> f32[8] {{
  %conditional = (f32[8]{{0}}) conditional(%b, %t2, %t2), branch_computations={{%light, %heavy}}
}}
"""


def test_a_conditional_runs_the_branch_of_the_most_bytes_of_each_kind():
    """Nobody can say which branch runs: two light all-reduces never stand in for a heavy one, which is the one
    weighed, while the all-gather only the light branch holds is counted too."""
    from autograder.compiled_hlo import compiled_runs

    runs = {line.split("=")[0].strip(): n for line, n in compiled_runs(BRANCHES) if "all-" in line}
    assert runs == {"%ar.light1": 0, "%ar.light2": 0, "%ag.light": 1, "%ar.heavy": 1}
    assert compiled_census(BRANCHES) == {"all-reduce": 1, "all-gather": 1}


def test_text_a_program_names_is_no_field_of_xlas():
    """Scope names and attributes are the program's text: a reader matching a line through them read a trip count or
    a permute of no pairs the student wrote. Quoted braces and escaped quotes stay inside their string."""
    from autograder.compiled_hlo import compiled_census, compiled_runs, without_named_text

    permute = ('%p = f32[4]{0} collective-permute(%x), channel_id=1, source_target_pairs={{0,1},{1,0}}, '
               'metadata={op_name="jit(f)/source_target_pairs={}/\\"}{" stack_frame_id=2}')
    assert without_named_text(permute).endswith("source_target_pairs={{0,1},{1,0}}, ")
    assert compiled_census(permute) == {"collective-permute": 1}
    loop = (f"HloModule m, num_partitions=8\n\n%body (p: f32[8]) -> f32[8] {{\n  %ar = f32[8]{{0}} all-reduce(%p), "
            f"channel_id=1, {_AR}\n}}\n\nENTRY %main (x: f32[8]) -> f32[8] {{\n  %w = f32[8]{{0}} while(%x), "
            'condition=%body, body=%body, frontend_attributes={"known_trip_count":{"n":"0"},"x"="y"}, '
            f"{_TRIPS % 8}\n}}\n")
    assert [n for line, n in compiled_runs(loop) if "all-reduce(" in line] == [16]  # body and condition, 8 each
