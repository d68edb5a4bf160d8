"""Program answers at grading time: the recorded artefact runs in a jailed process; wrong, wasteful,
forged and hostile programs get the expected verdict and a clear message."""

import base64

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import course
from autograder.programs import export, foreign_calls
from autograder.questions import load_chapter
from solutions.ch01_rooflines import cx4_gathers_everything, split_matmul
from tests.grading.program_answers import judged

CHAPTER = load_chapter("ch01_rooflines")
QID = "ch01-cx4-split-matmul"
SPEC = CHAPTER[QID].spec


def verdict(blob, tmp_path, seconds=120):
    return judged(CHAPTER, {QID: blob}, tmp_path, seconds=seconds)[QID]


def test_the_model_passes_and_a_wasteful_program_gets_half(tmp_path):
    assert verdict(export(SPEC, split_matmul, make_mesh=course.mesh), tmp_path).score == 1
    v = verdict(export(SPEC, cx4_gathers_everything, make_mesh=course.mesh), tmp_path)
    assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather")
    assert "all-gather of f32[64,32] over X" in v.message and "expected 1 all-reduce" in v.message


def test_a_program_that_loops_forever_is_stopped(tmp_path):
    def forever(x, y):
        return jax.lax.while_loop(lambda c: c[0, 0] < jnp.inf, lambda c: c + 1.0, x @ y)

    v = verdict(export(SPEC, forever, make_mesh=course.mesh), tmp_path, seconds=20)
    assert v.score == 0 and v.diagnosis == "program_failed" and "limits" in v.message


def test_a_program_that_exhausts_memory_is_stopped(tmp_path):
    def hog(x, y):
        big = jnp.broadcast_to(x[0, 0], (2**33,))  # 32 GiB of f32 once sorted into existence
        return x @ y + jnp.sort(big)[0]

    v = verdict(export(SPEC, hog, make_mesh=course.mesh), tmp_path, seconds=60)
    assert v.score == 0  # stopped by the runner's memory limit, or wrong anyway: never a crash of the grader


def test_a_host_callback_cannot_be_recorded_or_smuggled():
    def calls_home(x, y):
        return jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct((64, 128), jnp.float32), x @ y)

    with pytest.raises(NotImplementedError):  # jax refuses to serialize host callbacks at all...
        export(SPEC, calls_home, make_mesh=course.mesh)
    # ...and a hand-made artefact that names one is refused before it runs.
    text = 'stablehlo.custom_call @xla_ffi_python_cpu_callback(%0) : (tensor<f32>) -> tensor<f32>\n' \
           'stablehlo.custom_call @Sharding(%1) : (tensor<f32>) -> tensor<f32>'
    assert foreign_calls(text) == ["xla_ffi_python_cpu_callback"]
    assert foreign_calls(jax.export.export(jax.jit(split_matmul))(*[
        jax.ShapeDtypeStruct(o.shape, o.dtype, sharding=jax.sharding.NamedSharding(course.mesh(X=8), P(*o.spec)))
        for o in SPEC.operands]).mlir_module()) == []


@pytest.mark.parametrize("blob", ["not base64 at all!", base64.b64encode(b"garbage").decode(), "", 42, None])
def test_garbage_is_not_a_program(tmp_path, blob):
    v = verdict(blob, tmp_path)
    assert v.score == 0 and v.diagnosis in ("bad_program", "wrong_type")


def test_a_program_for_other_shapes_is_refused(tmp_path):
    other = jax.ShapeDtypeStruct((8, 8), jnp.float32)
    blob = base64.b64encode(jax.export.export(jax.jit(lambda a, b: a @ b))(other, other).serialize()).decode()
    v = verdict(blob, tmp_path)
    assert v.score == 0 and v.diagnosis == "bad_program" and "takes" in v.message


@pytest.mark.parametrize("blob", [{"error": "TypeError: cannot trace"}, None, "not base64 at all!", "wasteful"])
def test_the_grader_and_the_in_process_judge_agree(tmp_path, blob):
    """``KINDS["program"].judge`` (the chapter tests) takes the grader's path, with the runner in process."""
    from autograder.kinds import program

    blob = export(SPEC, cx4_gathers_everything, make_mesh=course.mesh) if blob == "wasteful" else blob
    assert program.judge(CHAPTER[QID], blob) == verdict(blob, tmp_path)
