"""Program questions whose computation is not one einsum (autograder/program_references/): each
single-device reference agrees with JAX on random inputs; a sharded block that leaves out its psum is
named as one device's share, one with a device-count factor as scaled, a right but wasteful one by its
collectives; the spec travels through the release's JSON; and a program's error keeps JAX's advice."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from autograder.program_references import REFERENCES
from autograder.programs import error_text, judge_report, run
from autograder.questions import AuthoringError, Operand, Program, ProgramSpec, Slip
from course.devices import mesh

RNG = np.random.default_rng(11)
B, T, D, F, N, H = 8, 4, 16, 64, 8, 4
TP_MLP = ProgramSpec(mesh=(("X", 8),), einsum="the MLP block relu(x @ w_in) @ w_out", reference="mlp",
                     operands=(Operand((B, D), (None, None)), Operand((D, F), (None, "X")),
                               Operand((F, D), ("X", None))),
                     out_spec=(), collectives={"all-reduce": 1}, rtol=1e-4, atol=1e-4)


def _jax_attention(x, w_q, w_k, w_v, w_o):
    q, k, v = (jnp.einsum("btd,dnh->btnh", x, w) for w in (w_q, w_k, w_v))
    weights = jax.nn.softmax(jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1]), axis=-1)
    return jnp.einsum("bnts,bsnh,nhd->btd", weights, v, w_o)


def _mlp_loss(w_in, x, w_out):
    y = jnp.maximum(x @ w_in, 0) @ w_out
    return jnp.mean(jnp.sum(y**2, axis=-1)) / 2


@pytest.mark.parametrize(("name", "jax_fn", "shapes"), [
    ("mlp", lambda x, w_in, w_out: jnp.maximum(x @ w_in, 0) @ w_out, [(B, D), (D, F), (F, D)]),
    ("attention", _jax_attention, [(B, T, D), (D, N, H), (D, N, H), (D, N, H), (N, H, D)]),
    ("mlp_loss_grad_w_in", lambda x, w_in, w_out: jax.grad(_mlp_loss)(w_in, x, w_out), [(B, D), (D, F), (F, D)]),
])
def test_each_reference_agrees_with_jax(name, jax_fn, shapes):
    args = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.asarray(jax_fn(*[jnp.asarray(a) for a in args]))  # float32: agreement to its precision
    got = REFERENCES[name](*[a.astype(np.float64) for a in args])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _tp_mlp(block_fn, check_vma=True):
    def program(x, w_in, w_out):
        return jax.shard_map(block_fn, mesh=mesh(X=8), in_specs=(P(), P(None, "X"), P("X", None)), out_specs=P(),
                             check_vma=check_vma)(x, w_in, w_out)
    return program


def _verdict(fn):
    return judge_report(TP_MLP, run(TP_MLP, fn, seed=3, make_mesh=mesh), seed=3)


def test_a_sharded_block_is_judged_against_its_reference():
    right = _tp_mlp(lambda x, wi, wo: jax.lax.psum(jnp.maximum(x @ wi, 0) @ wo, "X"))
    assert _verdict(right).ok
    no_psum = _tp_mlp(lambda x, wi, wo: jnp.maximum(x @ wi, 0) @ wo, check_vma=False)
    v = _verdict(no_psum)
    assert v.diagnosis == "partial_sum:X" and "one of 8 shares" in v.message and "psum" in v.message
    twice = _tp_mlp(lambda x, wi, wo: jax.lax.psum(jax.lax.psum(jnp.maximum(x @ wi, 0) @ wo, "X"), "X"),
                    check_vma=False)
    assert _verdict(twice).diagnosis.startswith("scaled")

    def gathers(x, w_in, w_out):
        def block(x, wi, wo):
            wi, wo = jax.lax.all_gather(wi, "X", axis=1, tiled=True), jax.lax.all_gather(wo, "X", axis=0, tiled=True)
            return jnp.maximum(x @ wi, 0) @ wo
        return jax.shard_map(block, mesh=mesh(X=8), in_specs=(P(), P(None, "X"), P("X", None)), out_specs=P(),
                             check_vma=False)(x, w_in, w_out)
    v = _verdict(gathers)
    assert v.score == 0.5 and v.diagnosis == "collectives:all-gather"


def test_a_reference_spec_survives_the_release_and_an_unknown_one_is_refused():
    assert ProgramSpec.from_json(TP_MLP.to_json()) == TP_MLP
    plain = ProgramSpec(mesh=(("X", 8),), einsum="ab->ab", operands=(Operand((8, 8), ("X", None)),), out_spec=(),
                        collectives={})
    assert "reference" not in plain.to_json()  # an einsum program's data is as before
    with pytest.raises(AuthoringError, match="no reference program 'mlpp'"):
        Program(qid="ch99-cx1-mlpp", points=1, prompt="p", slips=(Slip(None, "wrong_values"),),
                spec=ProgramSpec(mesh=(("X", 8),), einsum="x", reference="mlpp", operands=(), out_spec=(),
                                 collectives={}))


def test_a_programs_error_keeps_jaxs_advice():
    advice = "If so, consider disabling the check by passing the check_vma=False argument to `jax.shard_map`."
    short = ValueError("out_specs require replication.\n" + advice)
    assert error_text(short) == str(short)
    long = ValueError("x" * 20_000 + advice)
    text = error_text(long)
    assert text.endswith(advice) and len(text) < 4_100


def test_a_missing_psum_is_found_when_the_result_is_split_too():
    """Tokens over X, the MLP's F over Y: each device's block of the result must add the Y shares; one that
    keeps its own is named a missing psum over Y, not only wrong values."""
    spec = ProgramSpec(mesh=(("X", 2), ("Y", 4)), einsum="the MLP block", reference="mlp",
                       operands=(Operand((B, D), ("X", None)), Operand((D, F), (None, "Y")),
                                 Operand((F, D), ("Y", None))),
                       out_spec=("X", None), collectives={"all-reduce": 1}, rtol=1e-4, atol=1e-4)

    def program(block_fn, check_vma=True):
        return lambda x, w_in, w_out: jax.shard_map(
            block_fn, mesh=mesh(X=2, Y=4), in_specs=(P("X", None), P(None, "Y"), P("Y", None)),
            out_specs=P("X", None), check_vma=check_vma)(x, w_in, w_out)

    def verdict(fn):
        return judge_report(spec, run(spec, fn, seed=5, make_mesh=mesh), seed=5)

    assert verdict(program(lambda x, wi, wo: jax.lax.psum(jnp.maximum(x @ wi, 0) @ wo, "Y"))).ok
    v = verdict(program(lambda x, wi, wo: jnp.maximum(x @ wi, 0) @ wo, check_vma=False))
    assert v.diagnosis == "partial_sum:Y" and "one of 4 shares" in v.message
