"""The submission time behind nbgrader's late penalty: a ``timestamp.txt`` that is there but cannot be read leaves
lateness unknown, never "on time", and a resubmission never keeps an earlier hand-in's time in silence.

nbgrader's own autograde stops on such a file ("Invalid timestamp string"), and a person has to look. Ours grades
on, records no time for the hand-in, flags its grades for a person where the late policy could change the score,
and says so to the student and in the run's summary. No kernel: a result is stored as a run stores it."""

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from autograder.grading import results
from autograder.grading.feedback import summary_html
from autograder.grading.submissions import timestamp
from tests.grading.test_late_and_hand import DUE, LATE, ON_TIME, QID, _course_with, _hand_grade, _penalty, _result

ZERO = 'c.LateSubmissionPlugin.penalty_method = "zero"\n'


def _handed_in(a, student: str, content: bytes | None, link: bool = False) -> dict:
    """A result as the worker makes it from ``submitted/<student>/hw/timestamp.txt`` holding ``content`` (None: no
    file; ``link``: a link to /dev/zero), with its note, as stages.sanitize passes them on."""
    folder = a.course_dir / "submitted" / student / "hw"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "timestamp.txt"
    path.unlink(missing_ok=True)
    if link:
        path.symlink_to("/dev/zero")
    elif content is not None:
        path.write_bytes(content)
    when, note = timestamp(folder)
    return {**_result(student, sha=str(len(content or b"")).rjust(64, "c"), timestamp=when),
            "problems": [note] if note else []}


def _book_time(a, student: str):
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        return gb.find_submission("hw", student).timestamp


def _flagged(a, student: str) -> bool:
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        return bool(gb.find_grade(QID, "hw", "hw", student).needs_manual_grade)


UNREADABLE = {  # every way a timestamp.txt that is there holds no time the gradebook reads
    "garbage": b"late-but-who-knows",
    "no such day": b"2024-02-30 10:00:00 UTC",
    "offset past a day": b"2024-01-12 10:00:00 99999",
    "bare integer zone": b"2024-01-12 10:00:00 +0100",  # nbgrader's parser reads it as 100 seconds
    "unknown zone": b"2024-01-12 10:00:00 PDT",  # nbgrader's parser reads it as UTC
    "resubmitted words": b"2024-01-12 10:00:00.000000 UTC (resubmitted)",
    "over the size limit": b"2024-01-12 10:00:00 UTC" + b" " * 300 + b"x",
    "not UTF-8": b"\xff\xfe2024-01-12",
    "a link": None,
}


@pytest.mark.parametrize("kind", UNREADABLE)
def test_an_unreadable_time_on_a_resubmission_is_unknown_lateness_not_the_earlier_time(tmp_path, kind):
    a = _course_with(tmp_path, ZERO)
    results.store(a, _handed_in(a, "mal", ON_TIME.encode()))
    assert _book_time(a, "mal") == datetime(2024, 1, 9, 10) and not _flagged(a, "mal")
    results.store(a, _handed_in(a, "mal", UNREADABLE[kind], link=UNREADABLE[kind] is None))
    assert _book_time(a, "mal") is None  # never the earlier hand-in's time
    assert _flagged(a, "mal") and _penalty(a, "mal") is None  # a person decides
    stored = results.stored(a, "mal")
    assert stored["gradebook"]["late_unknown"] is True
    said = " ".join(stored["problems"] + [stored["gradebook"]["time"] or ""])
    assert "timestamp.txt" in said and "2024-01-09" not in said and "review" in said, said


def test_a_first_hand_in_with_an_unreadable_time_is_flagged_and_named_in_the_run(tmp_path):
    a = _course_with(tmp_path, ZERO)
    results.store(a, _handed_in(a, "bob", LATE.encode()))
    results.store(a, _handed_in(a, "mal", b"late-but-who-knows"))
    results.store(a, _handed_in(a, "ada", ON_TIME.encode()))
    assert (_flagged(a, "mal"), _flagged(a, "bob"), _flagged(a, "ada")) == (True, False, False)
    assert _penalty(a, "bob") == 2.0 and _penalty(a, "mal") is None
    stored = [results.stored(a, s) for s in ("ada", "bob", "mal")]
    from autograder.grading.pipeline import late_unknown_warning

    [line] = late_unknown_warning(stored, "hw")
    assert "mal" in line and "bob" not in line and "ada" not in line and "submitted/mal/hw/timestamp.txt" in line, line
    html = summary_html("hw — mal", stored[2]["questions"], stored[2]["problems"], None, stored[2]["gradebook"])
    assert "late" in html and "review" in html


def test_a_policy_that_takes_nothing_or_no_due_date_flags_nothing(tmp_path):
    """Lateness that cannot change a score needs no person: the time is still not recorded, and the note says so."""
    a = _course_with(tmp_path)  # penalty_method "none"
    results.store(a, _handed_in(a, "mal", ON_TIME.encode()))
    results.store(a, _handed_in(a, "mal", b"garbage"))
    assert _book_time(a, "mal") is None and not _flagged(a, "mal")
    assert not results.stored(a, "mal")["gradebook"]["late_unknown"]
    from autograder.grading.pipeline import late_unknown_warning

    assert late_unknown_warning([results.stored(a, "mal")], "hw") == []

    from nbgrader.api import Gradebook

    b = _course_with(tmp_path / "other", ZERO)
    with Gradebook(b.db_url) as gb:
        gb.update_or_create_assignment("hw", duedate=None)
    results.store(b, _handed_in(b, "mal", b"garbage"))
    assert not _flagged(b, "mal")


def test_the_flag_stays_until_the_time_is_readable_and_leaves_a_persons_score_alone(tmp_path):
    a = _course_with(tmp_path, ZERO)
    results.store(a, _handed_in(a, "mal", b"garbage"))
    assert _flagged(a, "mal")
    results.store(a, _handed_in(a, "mal", b"garbage"))  # graded again, still unreadable: still flagged
    assert _flagged(a, "mal")
    _hand_grade(a, "mal", 0.0)  # a person decided (late: 0 points), and approved
    kept = results.stored(a, "mal")
    results.store(a, kept)  # a rerun writes the kept result again
    assert not _flagged(a, "mal")
    results.store(a, _handed_in(a, "mal", LATE.encode()))  # the real time, put in by the staff
    assert _book_time(a, "mal") == datetime(2024, 1, 12, 10) and not results.stored(a, "mal")["gradebook"][
        "late_unknown"]


def test_a_resubmission_without_a_time_says_the_earlier_time_is_kept(tmp_path):
    """As nbgrader's autograde does, the gradebook keeps the time it held; the student and the staff are told."""
    a = _course_with(tmp_path, ZERO)
    results.store(a, _handed_in(a, "ada", ON_TIME.encode()))
    results.store(a, _handed_in(a, "ada", None))
    assert _book_time(a, "ada") == datetime(2024, 1, 9, 10) and not _flagged(a, "ada")
    note = results.stored(a, "ada")["gradebook"]["time"]
    assert note and "2024-01-09 10:00" in note and "timestamp.txt" in note, note
    results.store(a, {**_result("ada", sha="", timestamp=None), "problems": ["grader error: x"]})
    assert results.stored(a, "ada")["gradebook"]["time"] is None  # the grader failed: it read no file to speak of
    results.store(a, _handed_in(a, "bob", None))  # no time ever: nothing to say
    assert results.stored(a, "bob")["gradebook"]["time"] is None


# --- the worker's check reads as nbgrader's parser reads ------------------------------------------------------

READ = {  # what timestamp.txt holds -> the UTC time it means
    ON_TIME: datetime(2024, 1, 9, 10),
    "2024-01-09 10:00:00": datetime(2024, 1, 9, 10),
    "2024-01-09 11:00:00.5 CET": datetime(2024, 1, 9, 10, 0, 0, 500000),
    "2024-07-09 12:00:00 Europe/Berlin": datetime(2024, 7, 9, 10),
    "2024-01-09 05:00:00 EST": datetime(2024, 1, 9, 10),
    "2024-01-09T11:00:00+01:00": datetime(2024, 1, 9, 10),
    "2024-01-09T11:00:00+0100": datetime(2024, 1, 9, 10),
    "2024-01-09T10:00:00Z": datetime(2024, 1, 9, 10),
}


@pytest.mark.parametrize("text", READ)
def test_a_time_the_worker_takes_is_read_by_nbgrader_as_it_means(text):
    from nbgrader.utils import parse_utc

    from autograder.grading.submissions import read_time

    assert read_time(text) == READ[text] == parse_utc(text)


@pytest.mark.parametrize("text", [t.decode() for t in UNREADABLE.values() if t and t.isascii()])
def test_a_time_nbgrader_would_refuse_or_misread_is_refused(text):
    from autograder.grading.submissions import read_time

    with pytest.raises(ValueError):
        read_time(text)


def test_a_bare_integer_zone_is_what_nbgrader_misreads():
    """Why a zone written as a bare number is refused: nbgrader's parser takes it for seconds, not hours."""
    from nbgrader.utils import parse_utc

    one_hour_east = datetime(2024, 1, 12, 10, tzinfo=timezone(timedelta(hours=1))).astimezone(ZoneInfo("UTC"))
    assert parse_utc("2024-01-12 10:00:00 +0100") != one_hour_east.replace(tzinfo=None)


def test_the_docs_say_what_an_unreadable_time_does():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    grading = " ".join((root / "docs" / "grading.md").read_text().split())
    security = " ".join((root / "docs" / "security.md").read_text().split())
    assert "lateness is unknown" in grading and "flagged for review" in grading
    assert "checked in the worker against nbgrader's own parser" not in security
    assert "trusts `timestamp.txt`" in security
    assert DUE  # the course's due date of these tests


def test_a_hand_in_with_no_time_under_a_due_date_and_a_penalty_is_named_in_the_run(tmp_path):
    """A copy by hand, or nbgrader zip_collect without a timestamp group, brings no timestamp.txt: the gradebook holds
    no time and no penalty is taken (nbgrader counts it on time too), which the run said nothing of while it named a
    garbled time. It names these hand-ins and how to give them a time; where nothing could be taken, it says
    nothing."""
    from autograder.grading.pipeline import late_unknown_warning

    a = _course_with(tmp_path, ZERO)
    results.store(a, _handed_in(a, "erin", None))
    results.store(a, _handed_in(a, "ada", ON_TIME.encode()))
    stored = [results.stored(a, s) for s in ("ada", "erin")]
    assert _penalty(a, "erin") is None and not _flagged(a, "erin")
    [line] = late_unknown_warning(stored, "hw")
    assert line.startswith("No submission time for erin") and "ada" not in line and "zip_collect" in line, line
    b = _course_with(tmp_path / "other")  # penalty_method "none": lateness takes nothing, nothing to say
    results.store(b, _handed_in(b, "erin", None))
    assert late_unknown_warning([results.stored(b, "erin")], "hw") == []
