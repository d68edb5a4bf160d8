"""Test-wide setup: 8 simulated CPU devices before JAX starts its backends, a progress file of the test session's own
(self-checks record attempts; a learner's real progress must not change), and a compilation cache of each test
process's own."""

import atexit
import os
import re
import shutil
import sys
import tempfile

import jax
import pytest

import course.devices
from course import progress

os.environ["SCALING_COURSE_PROGRESS"] = os.path.join(tempfile.mkdtemp(prefix="scaling-course-tests-"),
                                                     "progress.json")
course.devices.setup("cpu")
# Many tests judge the same programs (each reference, by both judges): a compilation cache of this process's own
# (a folder per test process: JAX writes its files in place, which another process could read half-written) compiles
# each once. Set in JAX's configuration, not the environment, so no grader or kernel a test starts inherits it.
_JAX_CACHE = tempfile.mkdtemp(prefix="scaling-course-tests-jax-")
atexit.register(shutil.rmtree, _JAX_CACHE, ignore_errors=True)
jax.config.update("jax_compilation_cache_dir", _JAX_CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
# The environment's own commands (nbgrader runs ``alembic`` when it opens a gradebook) are found whether or not the
# environment is activated, in every test process, as ``scaling-course`` finds them (release.generate).
_SCRIPTS = os.path.dirname(sys.executable)
if _SCRIPTS not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _SCRIPTS + os.pathsep + os.environ.get("PATH", "")


def pytest_configure(config: pytest.Config) -> None:
    """One marker per chapter, named by its file (``pytest -m ch13``): a new chapter needs no line in
    pyproject.toml, where ``--strict-markers`` would otherwise refuse the whole of test_every_chapter.py."""
    from autograder.questions import chapter_names

    for name in chapter_names():
        config.addinivalue_line("markers", f"{name[:4]}: {name} questions")


# A chapter named in a test's parameters: a chapter's module (ch13_moe), a question or a setting (ch13-q2-batch).
CHAPTER_IN_ID = re.compile(r"(?<![A-Za-z0-9])(ch\d\d)(?=[-_])")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test parametrized over a chapter, one of its questions or settings carries that chapter's marker, in
    whichever file it is: ``pytest -m ch13`` runs every shared check of the chapter (its notebook's, its release's,
    its variants'), not only those of tests/chapters/. A check of every chapter's questions at once (marked
    ``every_chapter``: a message stating another question's answer, the library answering one) carries every
    chapter's marker, since it checks the new chapter too."""
    from autograder.questions import chapter_names

    known = {name[:4] for name in chapter_names()}
    for item in items:
        callspec = getattr(item, "callspec", None)
        named = set(CHAPTER_IN_ID.findall(callspec.id if callspec else "")) & known
        for chapter in sorted(known if item.get_closest_marker("every_chapter") else named):
            item.add_marker(getattr(pytest.mark, chapter))
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: a file keeps its order


# The files that take longest, most first (about 30 s or more each, measured on a 2-core machine). ``make test`` hands
# each worker whole files in the order collected (``--dist loadfile --no-loadscope-reorder``): started first, the long
# files share the two workers and the short ones fill in at the end, where a long file started last would run alone
# (xdist's own order, by the number of tests in a file, put Chapter 1's nbgrader runs last: a minute on one core).
# A file missing here, or one that has grown, only costs balance.
LONGEST_FIRST = (
    "tests/test_notebooks.py", "tests/test_giveaways.py", "tests/grading/test_class.py",
    "tests/grading/test_class_review.py", "tests/chapters/test_every_chapter.py",
    "tests/engine/test_formula_unseen_points.py", "tests/test_drawn_cases.py", "tests/hostile/test_hostile.py",
    "tests/grading/test_late_and_hand.py", "tests/test_distribution.py", "tests/grading/test_submission_time.py",
    "tests/engine/test_formula_mechanical.py", "tests/test_variants.py", "tests/grading/test_gradescope.py",
    "tests/grading/test_runners.py", "tests/engine/test_fair_reading_variants.py", "tests/test_cli.py",
    "tests/grading/test_pipeline.py", "tests/grading/test_budgets.py", "tests/browser/test_exchange.py",
    "tests/engine/test_one_judge.py", "tests/test_new_chapter.py", "tests/browser/test_student_lab.py",
    "tests/grading/test_variants_class.py", "tests/grading/test_factory.py", "tests/grading/test_program_attacks.py",
    "tests/test_release.py", "tests/engine/test_fair_reading_review.py", "tests/test_library_rule.py",
    "tests/engine/test_reference_results.py", "tests/grading/test_walls_budget.py",
    "tests/grading/test_release_check.py",
)


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A progress file of the test's own, outside a graded run: what a learner's self-checks record."""
    monkeypatch.setenv(progress.ENV_PATH, str(tmp_path / "progress.json"))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(progress, "_memory", {})
    return tmp_path / "progress.json"


@pytest.fixture
def runner_request(monkeypatch):
    """The test starts with no program runner (one that an earlier test of the process left would be counted as
    the test's own), and those it starts are closed after it; what the test puts in the dict this yields is set in
    the fork request of each runner started from then on (``{"cpu": 4}``: a runner with a lower CPU limit)."""
    from autograder.grading import judge

    for key in list(judge._runners):
        judge._runners.pop(key).close()
    before, forked = set(judge._runners), judge._forked
    changes: dict = {}

    def forking(request, home, max_requests=50):
        if request.get("kind") == "runner" and changes:
            request = {**request, **changes}
        return forked(request, home, max_requests)

    monkeypatch.setattr(judge, "_forked", forking)
    yield changes
    for key in set(judge._runners) - before:
        judge._runners.pop(key).close()


@pytest.fixture
def asked(monkeypatch):
    """How many times the judging service asks the checker (``autograder.checks.judge``) about each
    (qid, answer as judged)."""
    from collections import Counter

    import autograder.checks

    counts: Counter = Counter()
    real = autograder.checks.judge

    def counting(question, answer, *args, **kw):
        counts[question.qid, answer] += 1
        return real(question, answer, *args, **kw)

    monkeypatch.setattr(autograder.checks, "judge", counting)
    return counts


@pytest.fixture
def shell():
    """IPython's shell in this process, its displayed tracebacks collected (each a list of lines)."""
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    before = sh.custom_exceptions, sh.CustomTB
    shown: list[list[str]] = []
    own = sh._showtraceback
    sh._showtraceback = lambda etype, evalue, stb: shown.append(list(stb))
    sh.shown = shown
    sh.run_cell("from course import check")
    try:
        yield sh
    finally:
        sh._showtraceback = own
        sh.custom_exceptions, sh.CustomTB = before
        sh.user_ns.pop("__session__", None)
        del sh.shown
