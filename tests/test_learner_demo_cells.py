"""Demo cells as the learner meets them: a cell that uses an answer not yet given, a mesh larger than the kernel, a
demo cell that would overwrite an answer, and what to do on a kernel with other devices.
Each message is one line, never a traceback through the course."""

import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

import course
from autograder.release import (
    answer_name_problems,
    direct_mesh_calls,
    direct_mesh_problems,
    mesh_cell_problems,
    solution_only_problems,
)
from course import devices, progress
from course.answers import AnswerError, check
from tests.paths import CHAPTERS, ROOT


def _run(sh, cell: str, session: str | None = None):
    if session is None:
        sh.user_ns.pop("__session__", None)
    else:
        sh.user_ns["__session__"] = session
    sh.shown.clear()
    return sh.run_cell(cell, store_history=True)


# --- a demo cell that uses an answer not given yet --------------------------------------------------------

@pytest.mark.parametrize("cell", ['print(census("text", "all-reduce"))',
                                  'def counts(text):\n    return census(text, "all-reduce")\n\nprint(counts("x"))',
                                  'found = {k: census("t", k)\n         for k in ("all-reduce",)}'],
                         ids=["in-the-cell", "in-a-function-the-cell-defines", "in-a-comprehension"])
def test_a_demo_cell_using_an_unanswered_answer_says_so_in_one_line(shell, cell):
    result = _run(shell, cell, session="work/ch09_profiling.ipynb")
    assert isinstance(result.error_in_exec, NameError)  # still a NameError: Run All stops there
    assert len(shell.shown) == 1 and len(shell.shown[0]) == 1, shell.shown
    line = shell.shown[0][0]
    assert "\n" not in line and line.startswith("NameError: name 'census' is not defined"), line
    assert "this cell uses your answer `census` (ch09-cx3-census)" in line, line
    assert "fill in its answer cell and run it first" in line, line


def test_the_chapter_comes_from_the_cells_run_when_jupyter_does_not_name_the_notebook(shell):
    _run(shell, 'where = "ch01-e1"')  # as a locked setting cell names its exercise
    result = _run(shell, "intensity(8, 1.0, 2.0)")
    assert isinstance(result.error_in_exec, NameError)
    line = shell.shown[0][0]
    assert len(shell.shown[0]) == 1 and "your answer `intensity` (ch01-cx1-intensity)" in line, shell.shown
    _run(shell, 'where = "ch09-q2"')
    _run(shell, "print(q2_batch)")
    assert "(ch09-q2-batch)" in shell.shown[0][0], shell.shown  # an answer's name in several chapters: this one's


@pytest.mark.parametrize(("cell", "session"), [("print(not_defined_anywhere)", "ch09_profiling.ipynb"),
                                               ('print(census("t", "all-reduce"))', "ch01_rooflines.ipynb")],
                         ids=["not-an-answer", "another-chapters-answer"])
def test_other_name_errors_in_demo_cells_keep_their_traceback(shell, cell, session):
    result = _run(shell, cell, session=session)
    assert isinstance(result.error_in_exec, NameError)
    assert len(shell.shown) == 1 and len(shell.shown[0]) > 1, shell.shown
    assert "answer cell" not in "\n".join(shell.shown[0])


@pytest.mark.parametrize("use", ["print(set_by_a_stopped_cell)",
                                 "def f():\n    return set_by_a_stopped_cell\n\nf()"],
                         ids=["in-the-cell", "in-a-function-the-cell-defines"])
def test_a_name_an_earlier_cell_stopped_before_setting_says_so_in_one_line(shell, use):
    """On a kernel with fewer devices, a mesh cell stops with one line; the cells after it used its names and each
    showed a traceback. Any name that a cell run earlier sets, where that cell stopped before setting it, is told in
    one line: which cell to fix."""
    stopped = _run(shell, "import math\nmath.sqrt(-1)\nset_by_a_stopped_cell = 3", session="ch09_profiling.ipynb")
    assert isinstance(stopped.error_in_exec, ValueError)
    result = _run(shell, use, session="ch09_profiling.ipynb")
    assert isinstance(result.error_in_exec, NameError)  # still a NameError: Run All stops there
    assert len(shell.shown) == 1 and len(shell.shown[0]) == 1, shell.shown
    line = shell.shown[0][0]
    assert line.startswith("NameError: name 'set_by_a_stopped_cell' is not defined"), line
    assert "a cell you ran earlier sets `set_by_a_stopped_cell`" in line and "stopped" in line, line
    assert "(`import math`)" in line, line  # the cell, by its number and first line


def test_the_check_cell_keeps_its_own_line(shell):
    _run(shell, 'check("ch09-cx3-census", census)', session="ch09_profiling.ipynb")
    line = shell.shown[0][0]
    assert len(shell.shown[0]) == 1 and "run the answer cell above (the one that sets census) first" in line, line


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_released_data_names_every_checked_answer(chapter):
    from course.answers import answer_names

    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    names = answer_names(chapter[:4])
    checked = [c.source.splitlines()[-1] for c in nb.cells if c.cell_type == "code" and "grade(" in c.source]
    assert checked and all(f'check("{names[v]}", {v})' in checked for v in names), names
    assert len(names) == len({line.split(", ")[-1] for line in checked})


# --- a mesh larger than the kernel -------------------------------------------------------------------------

def _one_line(e: BaseException) -> str:
    shown = e._render_traceback_()
    assert len(shown) == 1 and "\n" not in shown[0] and 'File "' not in shown[0], shown
    return shown[0]


@pytest.mark.parametrize(("axes", "need"), [({"X": 16}, 16), ({"X": 2, "Y": 8}, 16)])
def test_a_mesh_larger_than_the_kernel_is_one_course_line(axes, need):
    with pytest.raises(ValueError) as e:  # this process has 8 devices
        course.mesh(**axes)
    line = _one_line(e.value)
    assert f"this cell builds a mesh of {need} devices" in line and "this kernel has 8 devices" in line, line
    assert "README" in line and "product of mesh_shape" not in line, line


def test_a_mesh_larger_than_the_kernel_shows_no_traceback_in_a_cell(shell):
    _run(shell, "import course\nm = course.mesh(X=4, Y=4)")
    assert len(shell.shown) == 1 and len(shell.shown[0]) == 1, shell.shown
    assert shell.shown[0][0].startswith("ValueError: this cell builds a mesh of 16 devices"), shell.shown


@pytest.mark.parametrize("cell", ['m = jax.make_mesh((4, 2), ("X", "Y"))', "m = Mesh(devs, ('X',))",
                                  "m = jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ('X', 'Y'))",
                                  "with jax.set_mesh(jax.make_mesh((8,), ('X',))):\n    pass"],
                         ids=["make_mesh", "Mesh", "sharding.Mesh", "in-a-with"])
def test_the_release_refuses_a_cell_that_builds_a_mesh_without_the_course(cell):
    """A mesh built with JAX's own constructors stops a kernel with fewer devices in JAX's traceback (ch10's first
    cell did: "Number of devices 4 must be >= the product of mesh_shape"), where course.mesh refuses in one line that
    says what to do."""
    nb = new_notebook(cells=[new_code_cell("import jax\nm = course.mesh(X=8)"), new_code_cell(cell)])
    problems = direct_mesh_problems(nb)
    assert len(problems) == 1 and "code cell 2" in problems[0] and "course.mesh(" in problems[0], problems
    assert direct_mesh_calls("def f():\n    return jax.make_mesh((8,), ('X',))") != []  # a def's body runs too


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_source_notebook_builds_a_mesh_without_the_course(chapter):
    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    assert direct_mesh_problems(nb) == []


def test_no_course_code_a_kernel_runs_builds_a_mesh_without_the_course():
    """The course's helpers and the model answers (solutions/, run in the kernel by the demos and the checks) build
    their meshes with course.mesh too: only autograder/meshes.py calls JAX's constructor."""
    found = {}
    for path in sorted([*(ROOT / "course").glob("*.py"), *(ROOT / "solutions").glob("*.py")]):
        calls = direct_mesh_calls(path.read_text())
        if calls:
            found[str(path.relative_to(ROOT))] = calls
    assert found == {}


@pytest.mark.parametrize("explicit", [False, True])
def test_a_course_mesh_of_either_axis_type_refuses_a_smaller_kernel_in_one_line(explicit, monkeypatch):
    """ch10's first cell shows an Explicit mesh beside an Auto one: both through course.mesh, so that a 4-device
    kernel hears the course's one line, not JAX's traceback."""
    from jax.sharding import AxisType

    from autograder import meshes

    m = course.mesh(X=4, Y=2, explicit=explicit)
    assert m.axis_types == ((AxisType.Explicit if explicit else AxisType.Auto),) * 2
    monkeypatch.setattr(meshes, "_device_count", lambda: 4)
    with pytest.raises(ValueError) as e:
        course.mesh(X=4, Y=2, explicit=explicit)
    line = _one_line(e.value)
    assert "this cell builds a mesh of 8 devices; this kernel has 4 devices" in line, line
    assert "%env SCALING_COURSE_DEVICES=cpu" in line, line


@pytest.mark.parametrize("refusal", ["import course\nmesh8 = course.mesh(X=4, Y=2)\nlayout = 1",
                                     "from course.errors import SetupError\nraise SetupError('JAX already started "
                                     "with 4 device(s). Restart the kernel and run the first cell before any other.')"
                                     "\nmesh8 = layout = 1"],
                         ids=["mesh-too-large-for-this-kernel", "setup-error"])
def test_a_name_a_device_refusal_kept_from_being_set_says_how_to_get_the_devices(shell, monkeypatch, refusal):
    """On a host with too few devices, running the refused cell again only repeats the refusal: the cells after it
    say how to get the devices (restart, %env ..., the first cell), not to fix and rerun that cell."""
    from autograder import meshes

    monkeypatch.setattr(meshes, "_device_count", lambda: 4)
    stopped = _run(shell, refusal, session="ch10_jax.ipynb")
    assert stopped.error_in_exec is not None
    for use in ("print(mesh8)", "print(layout)"):
        _run(shell, use, session="ch10_jax.ipynb")
        assert len(shell.shown) == 1 and len(shell.shown[0]) == 1, shell.shown
        line = shell.shown[0][0]
        assert line.startswith("NameError: name ") and "a cell you ran earlier sets" in line, line
        assert "fix that cell" not in line and "restart the kernel" in line, line
        if "mesh8 = course.mesh" in refusal:
            assert "%env SCALING_COURSE_DEVICES=cpu" in line, line
    _run(shell, "import math\nmath.sqrt(-1)\nmesh8 = 3", session="ch10_jax.ipynb")  # any other error: as before
    _run(shell, "print(mesh8)", session="ch10_jax.ipynb")
    assert "fix that cell" in shell.shown[0][0], shell.shown


def test_a_function_answer_whose_course_mesh_the_kernel_cannot_hold_is_not_an_attempt(store, monkeypatch):
    from autograder import meshes

    qid = "ch10-q1-roll-in-shard"
    monkeypatch.setattr(meshes, "_device_count", lambda: 1)
    monkeypatch.setattr(devices, "kernel_devices", lambda: 1)
    monkeypatch.setattr(devices, "chosen", lambda: "real")

    def builds_a_mesh(x, shift):
        course.mesh(X=2, Y=4)
        return x

    with pytest.raises(AnswerError) as e:
        check(qid, builds_a_mesh)
    assert "cannot be checked here" in str(e.value) and "needs 8" in str(e.value), e.value
    assert progress.get(qid) == {}


def test_scalar_answers_never_need_what_a_mesh_building_cell_sets():
    """On a kernel with fewer devices a cell that builds a mesh stops at its first line: a name set further down
    that an answer cell reads (ch09's B_, T_, ... for Q2) would leave its scalar questions unanswerable."""
    nb = new_notebook(cells=[
        new_code_cell("m = course.mesh(X=4, Y=2)\nB_ = q2.B\nargs = sds(m, B_)\ndef layer(x):\n    return x * B_\n"),
        new_code_cell("### BEGIN SOLUTION\nq2_batch = 4 * (B_ // 4)\ny = layer(args)\n### END SOLUTION",
                      metadata={"nbgrader": {"solution": True, "grade_id": "ch09-q2-answer"}})])
    problems = mesh_cell_problems(nb)
    assert len(problems) == 1 and "ch09-q2-answer" in problems[0] and "B_" in problems[0], problems
    assert "layer" in problems[0] and "args" not in problems[0], problems  # args needs the mesh anyway


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_source_notebook_sets_answer_inputs_in_a_mesh_building_cell(chapter):
    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    assert mesh_cell_problems(nb) == []


# --- a demo cell that binds an answer's name -----------------------------------------------------------------

def _tiny(demo: str, answer: str = "def intensity(B, D, F):\n    return B") -> nbformat.NotebookNode:
    """An answer cell (``answer``, its reference solution), its test cell, then a demo cell."""
    return new_notebook(cells=[
        new_code_cell(f"### BEGIN SOLUTION\n{answer}\n### END SOLUTION",
                      metadata={"nbgrader": {"solution": True, "grade_id": "ch01-cx1-answer"}}),
        new_code_cell('check("ch01-cx1-intensity", intensity)'),
        new_code_cell(demo)])


@pytest.mark.parametrize("demo", ['intensity = course.as_expr(mm_intensity, "B D F")',
                                  "def intensity(x):\n    return x", "from math import log as intensity",
                                  "for intensity in range(3):\n    pass"],
                         ids=["assigns", "defs", "imports-as", "loops"])
def test_the_release_refuses_a_demo_cell_that_binds_an_answers_name(demo):
    problems = answer_name_problems(_tiny(demo))
    assert len(problems) == 1, problems
    assert "intensity" in problems[0] and "ch01-cx1-intensity" in problems[0] and "code cell 3" in problems[0]
    assert demo.splitlines()[0][:30] in problems[0], problems


def test_a_demo_cell_may_read_an_answer_and_bind_other_names():
    assert answer_name_problems(_tiny("curve = intensity(8, 1, 2)\ndef f(intensity):\n    return intensity")) == []


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_release_notebook_has_a_demo_cell_that_binds_an_answers_name(chapter):
    nb = nbformat.read(ROOT / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    assert answer_name_problems(nb) == []


# --- a demo cell that reads what only the reference's answer sets ---------------------------------------------

def _helped(demo: str) -> nbformat.NotebookNode:
    """An answer cell whose reference also defines helpers no question checks, then a demo cell."""
    return _tiny(demo, answer="def step(b):\n    return 2 * b\nshare = {'a': 1}\nintensity = step(3)")


@pytest.mark.parametrize(("demo", "name"), [("plot(lambda b: step(b))", "step"),
                                            ("total = sum(share.values())", "share")],
                         ids=["a-helper-function", "a-helper-value"])
def test_the_release_refuses_a_demo_cell_that_reads_a_name_only_the_reference_sets(demo, name):
    """The student was never asked for it: a student who answers another way gets a NameError in a locked cell."""
    problems = solution_only_problems(_helped(demo))
    assert len(problems) == 1 and f"reads {name}," in problems[0] and "code cell 3" in problems[0], problems


@pytest.mark.parametrize("demo", ["plot(intensity)", "step = 3\nprint(step)",
                                  'your_model = globals().get("step")'],
                         ids=["an-answer", "its-own-name", "looked-up-if-there"])
def test_a_demo_cell_may_read_answers_its_own_names_and_look_up_a_helper(demo):
    nb = _helped(demo)
    assert solution_only_problems(nb) == []


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_source_notebook_has_a_demo_cell_that_reads_a_name_only_the_reference_sets(chapter):
    nb = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    assert solution_only_problems(nb) == []


# --- the advice on a kernel with too few devices is a step that works ----------------------------------------

def test_the_advice_for_simulated_devices_works_after_a_restart():
    """A kernel started with SCALING_COURSE_DEVICES=real on 2 devices: after a restart (a new process), the cell the
    message says to put above the first one, then the first cell, gives 8 simulated devices."""
    from autograder.messages import phrase

    advice = phrase("devices:real", have="2 devices", need=8)
    assert "%env SCALING_COURSE_DEVICES=cpu" in advice and "above the first" in advice, advice
    code = ("from IPython.core.interactiveshell import InteractiveShell\nsh = InteractiveShell.instance()\n"
            "sh.run_cell('%env SCALING_COURSE_DEVICES=cpu')\n"
            "r = sh.run_cell('import course\\nprint(course.setup())')\nassert r.success\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "SCALING_COURSE_DEVICES": "real",
                               "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert "8 simulated CPU device(s)" in proc.stdout, proc.stdout
    assert "%env SCALING_COURSE_DEVICES=cpu" in phrase("devices:setup", have="2 devices", need=8)
    readme = (ROOT / "README.md").read_text()
    assert "%env SCALING_COURSE_DEVICES=cpu" in readme and "above the first" in readme


# --- a program built for the kernel's own count of devices ---------------------------------------------------

def test_a_program_that_cannot_be_lowered_on_a_larger_kernel_says_the_checks_mesh(store, monkeypatch):
    import jax
    from jax.sharding import PartitionSpec as P

    qid = "ch03-cx2-case1-local"
    monkeypatch.setattr(devices, "kernel_devices", lambda: 16)

    def own_count(x, *rest):  # sized from the kernel's 16 devices (this process has 8: JAX refuses the mesh)
        mesh = jax.make_mesh((16,), ("X",))
        return jax.shard_map(lambda a: a, mesh=mesh, in_specs=P(None, "X"), out_specs=P(None, "X"))(x)

    with pytest.raises(AnswerError) as e:
        check(qid, own_count)
    text = str(e.value)
    assert "The checks run your program on an 8-device mesh" in text and "course.mesh(" in text, text
    assert "this kernel has 16 devices" in text, text


def test_a_name_error_with_no_known_chapter_reads_no_fingerprint_file_again(monkeypatch):
    """In a kernel that names no notebook (Colab, VS Code) and ran no check yet, a NameError looks the name up over
    every chapter's answers: from data read once, never every chapter's self-check file again on each typo."""
    from course import answers

    name, qid = next(iter(answers.answer_names("ch01").items()))

    def read_again():
        raise AssertionError("every chapter's self-check file read again for one NameError")

    monkeypatch.setattr(answers, "chapter_table", read_again)
    shell = type("Shell", (), {"user_ns": {}})()
    for _ in range(2):
        line = answers._answer_first(shell, NameError(f"name '{name}' is not defined"), name)
        assert line is not None and qid in line, line
    assert answers._answer_first(shell, NameError("name 'no_answer_at_all' is not defined"), "no_answer_at_all") is None


def test_the_kernels_note_is_added_where_the_lowering_verdict_is_made():
    """The self-check's note about its kernel's devices is a part of the lowering verdict (``note``), not read back
    out of its message; without one, as in the grader, the verdict is as it was."""
    from autograder.programs import not_a_program

    blob = {"error": "ValueError: the mesh is too large"}
    plain = not_a_program(blob, ["X"])
    noted = not_a_program(blob, ["X"], note=" Build meshes with course.mesh.")
    assert plain.diagnosis == noted.diagnosis == "raised"
    assert plain.message == "Your function could not be lowered: ValueError: the mesh is too large"
    assert noted.message == plain.message + ". Build meshes with course.mesh."


@pytest.mark.parametrize("code", ["devices:mesh", "devices:mesh_too_large"])
def test_the_size_of_a_mesh_too_large_is_read_back_from_the_courses_own_sentence(code):
    """``course.answers`` reads the devices a function answer's mesh needed from ``course.mesh``'s sentence: pinned
    to the template, so rewording it cannot silently stop the self-check saying the kernel is at fault."""
    from autograder.messages import phrase
    from course.answers import _mesh_needed

    said = phrase(code, need=16, have="8 devices", most=8)
    assert _mesh_needed([{"error": f"MeshTooLarge: {said}"}]) == 16
