"""The self-check judges a program question whose computation is a single-device reference against that
reference's results kept as data (autograder/reference_results.py), because the student's package leaves the
references out: they answer function questions (attention, a decode step on one device). The kept results are the
references' own, there is one for every spec a student can meet (every setting's values, every mesh choice), and a
verdict read from them is the one the references give, with the references out of reach."""

import sys

import numpy as np
import pytest

from autograder import kinds, reference_results
from autograder.kinds.program import prepare
from autograder.meshes import mesh
from autograder.programs import SELFCHECK_SEED, judge_report, run_exported
from autograder.questions import Program, ProgramSpec, chapter_names, load_chapter
from autograder.release import fingerprint_dir, reference_specs, slip_results
from tests.chapter_checks import printed, reference_answer

CHAPTERS = chapter_names()
REFERENCE_PROGRAMS = [pytest.param(q, marks=getattr(pytest.mark, q.chapter), id=q.qid)
                      for name in CHAPTERS for q in load_chapter(name).questions
                      if isinstance(q, Program) and q.spec.reference]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_kept_results_are_what_the_references_compute(chapter):
    """The references' results byte for byte, and nothing else in the chapter's folder: else run 'scaling-course
    release'. The value-told slips' results are sharded float32 programs, whose sums XLA orders by the machine's
    vector width: another machine's differ in the last figures (up to 6e-5 of a value, seen), so they are held to
    a tenth of the chapter's tightest program tolerance, against which a student's results are compared."""
    wanted: dict[str, bytes] = slip_results(load_chapter(chapter))
    for spec in reference_specs(load_chapter(chapter)):
        wanted |= reference_results.computed(spec)
    folder = fingerprint_dir() / reference_results.FOLDER / chapter
    kept = {f.name[:-len(reference_results.SUFFIX)]: f.read_bytes() for f in folder.glob("*.npys")}
    assert kept.keys() == wanted.keys(), "run 'scaling-course release' and commit the result"
    specs = [q.spec for q in load_chapter(chapter).questions if isinstance(q, Program)]  # a chapter may have none
    rtol, atol = min((s.rtol for s in specs), default=0) / 10, min((s.atol for s in specs), default=0) / 10
    stale = [n for n in kept if kept[n] != wanted[n] and not (n.startswith("slips-") and all(
        np.allclose(k, w, rtol=rtol, atol=atol * max(1.0, float(np.max(np.abs(w), initial=0))))
        for k, w in zip(reference_results.decode(kept[n]), reference_results.decode(wanted[n]), strict=True)))]
    assert stale == [], "run 'scaling-course release' and commit the result"


def test_every_spec_a_student_can_meet_has_kept_results():
    specs = [s for name in CHAPTERS for s in reference_specs(load_chapter(name))]
    assert len(specs) >= len(REFERENCE_PROGRAMS) >= 20  # mesh choices add specs
    assert [s.reference for s in specs if reference_results.kept_outputs(s) is None] == []


def _blocked(monkeypatch) -> None:
    """The student's package: no ``autograder.program_references`` to import."""
    monkeypatch.setitem(sys.modules, "autograder.program_references", None)


@pytest.mark.parametrize("q", REFERENCE_PROGRAMS)
def test_a_verdict_from_kept_results_is_the_references_verdict(q, monkeypatch):
    fp = printed(q)
    for answer in (reference_answer(q), *(s.answer for s in q.slips)):
        prepared = prepare(ProgramSpec.from_json(fp["program"]), kinds.encode(fp, answer))
        at, blob = prepared
        report = run_exported(at, blob, SELFCHECK_SEED, make_mesh=mesh)
        with monkeypatch.context() as m:
            _blocked(m)
            kept = judge_report(at, report, seed=SELFCHECK_SEED)
        with monkeypatch.context() as m:
            m.setattr(reference_results, "kept_outputs", lambda spec: None)
            m.setattr(reference_results, "kept_shares", lambda spec: None)
            computed = judge_report(at, report, seed=SELFCHECK_SEED)
        assert (kept.status, kept.score, kept.diagnosis, kept.message) == \
            (computed.status, computed.score, computed.diagnosis, computed.message), answer


def test_a_spec_without_kept_results_in_the_students_package_says_what_to_do(monkeypatch):
    q = REFERENCE_PROGRAMS[0].values[0]
    _blocked(monkeypatch)
    monkeypatch.setattr(reference_results, "kept_outputs", lambda spec: None)
    from autograder.programs import expected_outputs

    with pytest.raises(LookupError, match="scaling-course release"):
        expected_outputs(q.spec, SELFCHECK_SEED)


def test_kept_files_read_back_as_written():
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((3, 5)), None, rng.standard_normal(()), rng.integers(1, 9, (4,)).astype(float)]
    back = reference_results.decode(reference_results.encode(arrays))
    assert back[1] is None and len(back) == 4
    for a, b in zip(arrays, back, strict=True):
        if a is not None:
            assert b.shape == a.shape and np.allclose(a, b, rtol=1e-7, atol=0)
    assert reference_results.encode(arrays) == reference_results.encode(arrays)  # the same bytes at every release
