"""The ``scaling-course`` command: a thin layer over the Python API the tests call."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .grading.pipeline import Summary

EXAMPLES = """
examples:
  scaling-course demo                          # release, grade three sample students, print the table
  scaling-course demo ch01_rooflines           # the same for one chapter
  scaling-course release                       # regenerate release/ and the self-check data from source/
  scaling-course release ch01_rooflines
  scaling-course grade ch01_rooflines --jobs 2 # grade submitted/*/ch01_rooflines/
  scaling-course grade ch01_rooflines --student jdoe --force   # regrade one student (repeat --student for more)
  scaling-course variant ch01_rooflines --student jdoe   # a student's values and reference answers
  scaling-course sample ch01_rooflines --student ta-check # submitted/ta-check/: the reference, to grade
  scaling-course gradescope ch01_rooflines     # ch01_rooflines-gradescope.zip: Gradescope's autograder
  scaling-course equiv "B*D*F/(B*D+D*F+B*F)" "1/(1/B+1/D+1/F)" --symbols "B D F"
  scaling-course equiv "N-1" "N" --symbols "N:count" --json
  scaling-course selfcheck my-work/ch01_rooflines/ch01_rooflines.ipynb  # self-study (after cp -r release my-work)
  scaling-course progress                      # what you have solved so far, per chapter
  scaling-course dist student                  # dist/student/*.whl: a class's student image, no solutions
  scaling-course dist grader --out wheels/     # the full package, as pip installs the repository
"""
# What the student package (scaling-course dist student) can run; every other command needs the references.
STUDENT_COMMANDS = {"equiv", "selfcheck", "progress"}


def _repo_root() -> Path:
    """The course directory this package was installed from (for the demo's source notebooks)."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "source").is_dir() else Path.cwd()


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(_repo_root(), Path(args.keep) if args.keep else None, args.jobs, args.chapters or None)


def cmd_release(args: argparse.Namespace) -> int:
    from .questions import AuthoringError
    from .release import release

    course = Path(args.course_dir).resolve()
    try:
        for path in release(course, args.chapters or None):
            print(f"released {path.relative_to(course)}")
    except (FileNotFoundError, AuthoringError) as e:
        print(f"scaling-course release: {e}", file=sys.stderr)
        return 2
    return 0


INTERRUPTED = 130  # the shell's status for a command stopped by Ctrl-C (128 + SIGINT)
EXIT_SECONDS = 20.0  # for a stopped run's pool threads and processes to end by themselves


def exit_within(seconds: float, status: int) -> None:
    """End the process with ``status`` if it has not ended ``seconds`` from now. After Ctrl-C, Python's exit waits
    for the worker pool's threads and processes; one left waiting on a worker stopped halfway through a job (seen
    on a loaded machine) would hold the terminal, and a script that waits for the grader,
    forever. What was graded is stored before this is armed."""
    def end() -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)

    timer = threading.Timer(seconds, end)
    timer.daemon = True  # it must not itself keep the process alive
    timer.start()


def cmd_grade(args: argparse.Namespace) -> int:
    from .grading.console import Progress
    from .grading.pipeline import CourseError, Interrupted, grade

    course = Path(args.course_dir).resolve()
    # A name the terminal's encoding cannot show is written as an escape, never an error after the grading.
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    progress = Progress()
    try:
        summary = grade(course, args.assignment, jobs=args.jobs, force=args.force, progress=progress,
                        scheduler=args.scheduler, students=args.student)
    except CourseError as e:
        print(f"scaling-course grade: {e}", file=sys.stderr)
        return 2
    except (Interrupted, KeyboardInterrupt) as e:  # Ctrl-C: what was graded is kept; one line, no traceback
        if progress.bar:
            print(file=progress.stream)  # end the progress bar's line
        print(e if isinstance(e, Interrupted) else "interrupted: what was graded is kept, rerun the same command "
              "to continue", file=sys.stderr, flush=True)
        exit_within(EXIT_SECONDS, INTERRUPTED)
        return INTERRUPTED
    print_summary(course, args.assignment, summary)
    return GRADER_FAILED if _failed(summary) else 0


GRADER_FAILED = 3  # the run ended, but the grader failed on part of some submissions (flagged, graded again next run)


def _failed(summary: Summary) -> list[str]:
    from .grading.gradebook import grader_failed

    return [r["student"] for r in summary.results if grader_failed(r)]


def print_summary(course: Path, assignment: str, summary: Summary) -> None:
    """The grade table, the problems and the warnings of a grading run. Student ids and the notes about their files
    are the students' text: each goes through ``printable``, so no name can move the cursor or hide what follows."""
    from .demo import print_table
    from .grading.console import printable
    from .grading.pipeline import SHOWN  # students named in one line, at most, as in the run's warnings

    if not summary.results and not summary.problems:
        print(f"No submissions found under {course / 'submitted'}/<student>/{assignment}/.")
        if summary.not_submitted:
            print(f"not submitted: {', '.join(printable(s) for s in summary.not_submitted)}")
        for warning in summary.warnings:  # results kept for folders since removed, say
            print(f"\nWarning: {warning}")
        return
    if len(summary.results) > TABLE_STUDENTS:
        print_questions(summary.results)
    elif summary.results:
        print_table(assignment, [{**r, "student": printable(r["student"])} for r in summary.results])
    if late := [r for r in summary.results if (r.get("gradebook") or {}).get("late_penalty")]:
        from .grading.feedback import late_words

        each = ", ".join(f"{printable(r['student'])} {r['gradebook']['late_penalty']:g} points "
                         f"({late_words(r['gradebook'].get('seconds_late') or 0)} late)" for r in late[:SHOWN])
        print(f"\nLate penalties (nbgrader's late-submission policy), not in the table above but taken from the "
              f"totals in grades.csv, the gradebook and the reports: {each}{' and more' if len(late) > SHOWN else ''}.")
    if summary.problems:
        print("\nSubmissions with problems (graded as far as possible, except those \"not graded\"):")
        for student, problems in sorted(summary.problems.items(), key=lambda item: printable(item[0])):
            print(f"  {printable(student)}: {' | '.join(printable(p) for p in problems)}")
    if summary.not_submitted:  # roster students with nothing graded: a "not submitted" row each in grades.csv
        print(f"\nnot submitted: {', '.join(printable(s) for s in summary.not_submitted)}")
    for warning in summary.warnings:
        print(f"\nWarning: {warning}")
    if failed := _failed(summary):
        print(f"\nThe grader failed on part of {len(failed)} submission(s): "
              f"{', '.join(printable(s) for s in failed[:SHOWN])}{' and more' if len(failed) > SHOWN else ''}. "
              "Their scores are not final (status \"grader error\" in grades.csv, flagged in the gradebook); the "
              "next run grades them again. Each one's problems say what failed.")
    if summary.copies:  # for the staff: students whose written cells are the same (grading/copies.py)
        print("\n" + "\n".join(summary.copies))
    print(f"\n{len(summary.results) - summary.skipped} graded, {summary.skipped} unchanged and kept, in "
          f"{summary.seconds:.0f} s. Feedback: {course / 'feedback'}; grades: {course / 'grades.csv'}")


TABLE_STUDENTS = 10  # above this many results, the summary shows each question's scores, not a column a student


def print_questions(results: list[dict[str, Any]]) -> None:
    """A class's results by question: points, mean score and how many got full marks (one line a question, however
    large the class; each student's row is in grades.csv)."""
    qids = list(dict.fromkeys(q for r in results for q in r["questions"]))
    width = max([len(q) for q in qids] + [10])
    print(f"{len(results)} students: each one's scores are in grades.csv.")
    print(f"{'question':<{width}}  {'points':>6}  {'mean':>6}  {'full marks':>10}")
    for qid in qids:
        got = [r["questions"][qid] for r in results if qid in r["questions"]]
        points = max(q["points"] for q in got)
        mean = sum(q["score"] for q in got) / len(got)
        full = sum(q["score"] >= q["points"] for q in got)
        print(f"{qid:<{width}}  {points:>6g}  {mean:>6.2f}  {full:>6}/{len(got):<3}")
    mean = sum(r["score"] for r in results) / len(results)
    print(f"{'total':<{width}}  {results[0]['max_score']:>6g}  {mean:>6.2f}")


def cmd_gradescope(args: argparse.Namespace) -> int:
    from .grading.gradescope import ZipError, build, timeout_minutes

    try:
        out = build(Path(args.course_dir), args.assignment, Path(args.out) if args.out else None, args.student_id)
    except (ZipError, OSError, RuntimeError) as e:
        print(f"scaling-course gradescope: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB). On Gradescope: a Programming Assignment, base image "
          f"Ubuntu 22.04 or newer, autograder timeout at least {timeout_minutes()} minutes; upload this zip. "
          f"Students submit their notebook; their values are dealt from their {args.student_id} "
          "(docs/grading.md, Gradescope).")
    return 0


def cmd_variant(args: argparse.Namespace) -> int:
    from .course_config import ConfigError
    from .questions import AuthoringError
    from .variant_report import student_answers
    from .variants import describe

    try:
        out = student_answers(Path(args.course_dir).resolve(), args.assignment, args.student)
    except (ConfigError, AuthoringError, KeyError, ModuleNotFoundError) as e:
        print(f"scaling-course variant: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({k: out[k] for k in ("assignment", "student", "parameters", "answers")}, indent=1))
        return 0
    state = "on" if out["enabled"] else "off: every student has the book's values"
    print(f"{out['assignment']} for {out['student']} (variants {state})")
    for name, labels in out["setting"].items():
        print(f"  {name}: {describe(labels)}")
    width = max(len(q) for q in out["answers"])
    print(f"\n{'question':<{width}}  reference answer")
    for qid, answer in out["answers"].items():
        print(f"{qid:<{width}}  {format(answer, '.6g') if isinstance(answer, float) else answer}")
    print("\n(Function and program questions are not listed: they are checked on inputs drawn at grading time, "
          "with no one answer to show; their references are in solutions/.)")
    return 0


def not_a_folder_name(name: str) -> str:
    """Why ``name`` cannot be one folder under submitted/ (empty where it can): a path would write elsewhere, and
    a name a shell or nbgrader's exchange mangles (spaces at an end, a line break) would be graded under another."""
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        return "it must be one folder name, with no / or \\"
    if name != name.strip() or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "no spaces at either end, no line breaks or other control characters"
    if len(name.encode()) > 255:
        return "longer than a file system allows (255 bytes)"
    return ""


def cmd_sample(args: argparse.Namespace) -> int:
    """A known submission in ``submitted/`` to try a grading setup on before the class's: the reference should
    score every point, the partly wrong one lose the points of its slips, the untouched one score 0."""
    course = Path(args.course_dir).resolve()
    for what, name in (("assignment", args.assignment), ("student id", args.student)):
        if why := not_a_folder_name(name):
            print(f"scaling-course sample: {name!r} is no {what}: {why}", file=sys.stderr)
            return 2
    target = course / "submitted" / args.student / args.assignment / f"{args.assignment}.ipynb"
    if not (course / "release" / args.assignment / f"{args.assignment}.ipynb").is_file():
        print(f"scaling-course sample: no release/{args.assignment}/{args.assignment}.ipynb in {course} "
              "(run `scaling-course release` there first, or pass --course-dir)", file=sys.stderr)
        return 2
    if target.exists() and not args.force:
        print(f"scaling-course sample: {target.relative_to(course)} exists; --force replaces it", file=sys.stderr)
        return 2
    from .demo import sample_notebook, submit

    submit(course, args.student, args.assignment, sample_notebook(course, args.assignment, args.kind, args.student))
    print(f"wrote {target.relative_to(course)} ({args.kind}); grade it with: scaling-course grade "
          f"{args.assignment} {shlex.quote('--student=' + args.student)} --force")
    return 0


def cmd_equiv(args: argparse.Namespace) -> int:
    from .formula import Invalid, parse_formula
    from .kinds import formula
    from .messages import phrase_invalid
    from .verdict import Status

    names, counts = [], []
    for token in args.symbols.split():
        name, _, domain = token.partition(":")
        if domain not in ("", "count"):
            print(f"scaling-course equiv: unknown domain {domain!r} for {name} (use NAME or NAME:count)",
                  file=sys.stderr)
            return 2
        names.append(name)
        if domain == "count":
            counts.append(name)
    ref = parse_formula(args.reference, names)
    if isinstance(ref, Invalid):
        why = phrase_invalid(ref, **formula.context(names))
        print(f"scaling-course equiv: the reference is not a valid formula. {why}", file=sys.stderr)
        return 2
    v = formula.check("equiv", args.reference, names, counts, args.candidate)
    verdict = {Status.CORRECT: "equivalent", Status.INVALID: "invalid"}.get(v.status, "not_equivalent")
    if args.json:
        message = "Equivalent." if verdict == "equivalent" else v.message
        print(json.dumps({"verdict": verdict, "diagnosis": v.diagnosis, "message": message}))
    elif verdict == "equivalent":
        print(f"equivalent (the same values, to {formula.context(names)['tolerance']}, at points that make "
              "every branch of a max or min the active one)")
    else:
        print(f"{verdict}: {v.message}")  # the code is in --json's "diagnosis"
    return 0


def cmd_selfcheck(args: argparse.Namespace) -> int:
    from .selfcheck import selfcheck

    return max(selfcheck(Path(nb), timeout=args.timeout) for nb in args.notebooks)


def cmd_progress(args: argparse.Namespace) -> int:
    from .selfcheck import show_progress

    return show_progress()


def cmd_dist(args: argparse.Namespace) -> int:
    from .distribution import DistributionError, build_wheel

    try:
        wheel = build_wheel(args.kind, Path(args.out or f"dist/{args.kind}"), Path(args.course_dir).resolve())
    except (DistributionError, OSError) as e:
        print(f"scaling-course dist: {e}", file=sys.stderr)
        return 2
    what = ("without solutions/ and the grader, for a class's student image" if args.kind == "student"
            else "with the reference solutions, for a grading machine or self-study")
    print(f"wrote {wheel} ({wheel.stat().st_size / 2**20:.1f} MiB), {what}; pip install it as is")
    return 0


COURSE_DIR = "the course directory, which holds nbgrader_config.py and source/ (default: the current directory)"
DASH_ID = 'An id that begins with "-" is written --student=ID (--student=-lead), or it reads as an option.'
GRADE_STATUS = f"""exit status:
  0    the run ended: every submission graded, or unchanged and kept
  2    a course or assignment it cannot grade (the message says why), or a wrong argument
  {GRADER_FAILED}    the run ended, but the grader failed on part of some submissions (named in the last lines,
       "grader error" in grades.csv): the next run grades them again
  {INTERRUPTED}  interrupted (Ctrl-C): what was graded is kept; the same command continues"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scaling-course", description="Autograded exercises for 'How To Scale "
                                     "Your Model'.", epilog=EXAMPLES, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="release, grade sample submissions, print the grade table")
    p.add_argument("chapters", nargs="*", metavar="CHAPTER", help="e.g. ch01_rooflines (default: all)")
    p.add_argument("--keep", metavar="DIR", help="use DIR as the course directory instead of a temporary one")
    p.add_argument("--jobs", type=int, default=None, help="parallel notebooks (default: CPU count)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("release", help="regenerate release/ and self-check data from source/")
    p.add_argument("chapters", nargs="*", metavar="CHAPTER", help="e.g. ch01_rooflines (default: all)")
    p.add_argument("--course-dir", default=".", metavar="DIR", help=COURSE_DIR)
    p.set_defaults(func=cmd_release)
    p = sub.add_parser("grade", help="grade every submitted/<student>/ASSIGNMENT/", epilog=GRADE_STATUS,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("assignment", metavar="ASSIGNMENT")
    p.add_argument("--course-dir", default=".", metavar="DIR", help=COURSE_DIR)
    p.add_argument("--jobs", type=int, default=None, help="parallel notebooks (default: CPU count)")
    p.add_argument("--force", action="store_true", help="regrade submissions that did not change")
    p.add_argument("--student", action="append", metavar="ID", help="grade only submitted/ID/ASSIGNMENT/ (repeat "
                   "for more; with --force, regrade only them); grades.csv still lists every student graded. "
                   + DASH_ID)
    p.add_argument("--scheduler", metavar="ADDRESS", help="run on a Dask cluster, e.g. tcp://10.0.0.5:8786 "
                   "(workers need this package and the course directory at the same path)")
    p.set_defaults(func=cmd_grade)
    p = sub.add_parser("gradescope", help="write a Gradescope autograder zip that grades one ASSIGNMENT notebook")
    p.add_argument("assignment", metavar="ASSIGNMENT")
    p.add_argument("--out", metavar="PATH", help="the zip to write (default: ASSIGNMENT-gradescope.zip)")
    p.add_argument("--student-id", choices=("email", "sid"), default="email",
                   help="the Gradescope field each student's values are dealt from (default: email)")
    p.add_argument("--course-dir", default=".", metavar="DIR", help=COURSE_DIR)
    p.set_defaults(func=cmd_gradescope)
    p = sub.add_parser("variant", help="a student's values of the varied exercises and their reference answers")
    p.add_argument("assignment", metavar="ASSIGNMENT")
    p.add_argument("--student", required=True, metavar="ID", help="the student's id, as in submitted/<ID>/. "
                   + DASH_ID)
    p.add_argument("--course-dir", default=".", metavar="DIR", help=COURSE_DIR)
    p.add_argument("--json", action="store_true", help="one JSON object: assignment, student, parameters, answers")
    p.set_defaults(func=cmd_variant)
    p = sub.add_parser("sample", help="write a sample submission (the reference by default) to submitted/ID/")
    p.add_argument("assignment", metavar="ASSIGNMENT")
    p.add_argument("--student", required=True, metavar="ID", help="the folder to write, submitted/ID/ASSIGNMENT/ "
                   "(its values are those dealt to ID). " + DASH_ID)
    p.add_argument("--kind", choices=("reference", "partly-wrong", "untouched"), default="reference",
                   help="every answer right (default); every other formula, number and choice answered with a "
                   "listed slip; or the release copy as handed out")
    p.add_argument("--force", action="store_true", help="replace a submission already there")
    p.add_argument("--course-dir", default=".", metavar="DIR", help=COURSE_DIR)
    p.set_defaults(func=cmd_sample)
    p = sub.add_parser("equiv", help="judge a candidate formula against a reference, as the grader would")
    p.add_argument("reference")
    p.add_argument("candidate")
    p.add_argument("--symbols", required=True, help='e.g. "B D F N:count" (positive reals; :count = integer >= 2)')
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_equiv)
    p = sub.add_parser("selfcheck", help="run your own filled notebook and print what each check says")
    p.add_argument("notebooks", nargs="+", metavar="NOTEBOOK")
    p.add_argument("--timeout", type=int, default=600, help="seconds one cell may run (default 600)")
    p.set_defaults(func=cmd_selfcheck)
    p = sub.add_parser("progress", help="questions solved so far, per chapter, over all sessions")
    p.set_defaults(func=cmd_progress)
    p = sub.add_parser("dist", help="build the student wheel (no solutions) or the grader's (the full package)")
    p.add_argument("kind", choices=("student", "grader"))
    p.add_argument("--out", metavar="DIR", help="where to write the wheel (default: dist/KIND)")
    p.add_argument("--course-dir", default=".", metavar="DIR", help=COURSE_DIR)
    p.set_defaults(func=cmd_dist)
    args = parser.parse_args(argv)
    from .distribution import edition, student_package_notice

    if args.command not in STUDENT_COMMANDS and edition() == "student":
        print(student_package_notice(args.command), file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except BrokenPipeError:  # `scaling-course variant ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error as Python flushes stdout
        return 0


if __name__ == "__main__":
    sys.exit(main())
