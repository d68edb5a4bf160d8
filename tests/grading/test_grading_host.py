"""A grade is the submission's alone: not the grading machine's devices, nor the JAX settings of the shell the
instructor grades from. The grading kernels and program runners get the grader's own choice (the simulated CPU
mesh), whatever ``SCALING_COURSE_DEVICES``, ``JAX_*`` or ``XLA_*`` say outside."""


import nbformat
import pytest

from autograder.demo import copy_course, filled_notebook, submit
from autograder.grading.jail import kernel_environment
from autograder.grading.pipeline import grade
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
OUTSIDE = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "SCALING_COURSE_DEVICES": "real", "JAX_PLATFORMS": "cuda",
           "JAX_ENABLE_X64": "1", "JAX_DEFAULT_MATMUL_PRECISION": "bfloat16",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}


def test_grading_processes_get_the_graders_devices_not_the_shells():
    env = kernel_environment(OUTSIDE)
    assert env["SCALING_COURSE_DEVICES"] == "cpu" and env["JAX_PLATFORMS"] == "cpu", env
    assert not {"JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION", "XLA_FLAGS"} & set(env), env
    assert env["PATH"] == OUTSIDE["PATH"] and env["LC_ALL"] == "C.UTF-8"


@pytest.mark.slow
def test_the_reference_keeps_full_marks_when_the_shell_asks_for_real_devices(tmp_path, monkeypatch):
    """Before, ``SCALING_COURSE_DEVICES=real`` in the instructor's shell reached the kernels: on the grading machine's
    one CPU device, the reference's program answer could not be lowered (41/44, "Your function could not be
    lowered"); on a host with 8 accelerators every program would have been exported for them and not run."""
    for k, v in OUTSIDE.items():
        if k not in ("PATH", "LC_ALL"):
            monkeypatch.setenv(k, v)
    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    name = f"{CHAPTER}.ipynb"
    submit(course, "ada", CHAPTER, filled_notebook(nbformat.read(ROOT / "release" / CHAPTER / name, as_version=4),
                                                   nbformat.read(ROOT / "source" / CHAPTER / name, as_version=4)))
    [result] = grade(course, CHAPTER, jobs=1).results
    lost = {q: v["message"] for q, v in result["questions"].items() if v["score"] < v["points"]}
    assert result["score"] == result["max_score"] and not lost, lost
