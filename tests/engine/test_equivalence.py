"""Formula equivalence on the positive domain, and the diagnosis of each kind of slip."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from autograder import equivalence as eq
from autograder.kinds import formula
from autograder.questions import Accept, Slip
from autograder.verdict import Status
from course.symbols import B, D, N
from tests.strategies import COURSE_NAMES

NAMES = (*COURSE_NAMES, "H", "K", "L", "T", "V", "W", "Z")


def compare(reference: str, candidate: str, counts: tuple[str, ...] = ()) -> tuple[bool, str]:
    """(equal, diagnosis) of a candidate against a reference over the course's symbols."""
    v = formula.check("ch99-t0-compare", reference, NAMES, counts, candidate)
    assert v.status is not Status.INVALID, v
    return v.ok, "" if v.ok else v.diagnosis


REWRITES = [
    ("2*B*D*F", "2*F*D*B"),
    ("B*(D+F)", "B*D + B*F"),
    ("(B+D)**2", "B**2 + 2*B*D + D**2"),
    ("B/D + F/D", "(B+F)/D"),
    ("(B**2 - D**2)/(B - D)", "B + D"),
    ("sqrt(B**2*D)", "B*sqrt(D)"),
    ("max(B, D)", "Max(D, B)"),
    ("min(B*D, F)", "-max(-B*D, -F)"),
    ("B*D/(N-1)", "(B*D)/(N - 1)"),
    ("B/1.97e14", "B/197000000000000"),
    ("B*D*F/1e12", "B*D*F*1e-12"),
    ("log(B, 2)", "log2(B)"),
    ("2**10*B", "1024*B"),
    ("B**0.5", "sqrt(B)"),
    ("1/(1/B + 1/D)", "B*D/(B + D)"),
    ("B*(N-1)/N", "B - B/N"),
]


@pytest.mark.parametrize(("reference", "candidate"), REWRITES)
def test_rewrites_are_equal(reference, candidate):
    assert compare(reference, candidate) == (True, "")


FACTORS = [Fraction(2), Fraction(1, 2), Fraction(8), Fraction(1, 4), Fraction(1000), Fraction(3, 2), Fraction(-1)]


@pytest.mark.parametrize("k", FACTORS, ids=str)
@pytest.mark.parametrize("reference", ["2*B*D*F", "B*D/(N-1)", "max(B*D, F)", "sqrt(B)*D + 1"])
def test_constant_factor_is_a_ratio(reference, k):
    assert compare(reference, f"({k})*({reference})") == (False, f"ratio:{k}")


def test_a_factor_that_is_not_nice_is_ratio_other():
    assert compare("B*D", "7.3*B*D") == (False, "ratio:other")


# (reference, candidate) pairs that are not equivalent, by the diagnosis each must draw.
SLIPS = {
    "extra_symbol:F": [("2*B*D", "2*B*D*F"), ("2*B*D", "2*B*D + F")],
    "extra_symbol:F,N": [("2*B*D", "2*B*D*F*N")],
    "missing_symbol:F": [("2*B*D*F", "2*B*D"), ("B*D + F", "B*D")],
    "missing_symbol:D,F": [("2*B*D*F", "2*B")],
    "missing_symbol:D": [("max(B, D)", "B")],
    "lower_terms": [("B**2 + B", "B**2"), ("B*N", "B*(N-1)")],
    "partly": [("max(B*D, D**2)", "B*D"), ("min(B*D, D**2)", "B*D")],
    "not_equivalent": [("B + D", "B*D"), ("B/D", "D/B")],
}


@pytest.mark.parametrize(("reference", "candidate", "diagnosis"),
                         [(r, c, code) for code, pairs in SLIPS.items() for r, c in pairs])
def test_slip_diagnosis(reference, candidate, diagnosis):
    assert compare(reference, candidate) == (False, diagnosis)


@pytest.mark.parametrize("counts", [(), ("N",)], ids=["reals", "counts"])
def test_n_minus_one_slip_is_lower_terms(counts):
    assert compare("2*N", "2*N - 1", counts) == (False, "lower_terms")


def test_candidate_that_is_never_real():
    assert compare("B", "sqrt(-B - D)") == (False, "not_real")


@pytest.mark.parametrize("candidate", ["exp(exp(4*exp(B)))*B", "exp(exp(exp(exp(B))))", "exp(-exp(exp(B**2)))"])
def test_exponentials_too_large_to_compute_are_not_computed(candidate):
    """mpmath would need log(2) to millions of digits for these (minutes) or run out of memory; the
    value counts as not computable, like an overflow (where B is small enough, it is computed)."""
    ok, diagnosis = compare("B", candidate)
    assert not ok and diagnosis in ("not_real", "not_equivalent")


def test_exp_is_computed_up_to_its_limit():
    at = eq.evaluator(sp.exp(sp.exp(B)), ("B",))
    assert abs(at({"B": Fraction(3)}) / sp.exp(sp.exp(3)).evalf(30) - 1) < 1e-25
    assert at({"B": Fraction(28)}) is None  # e**28 is above 2**40
    assert eq.evaluator(sp.exp(B), ("B",))({"B": Fraction(2**16)}) is not None  # a big value, not too big


def test_points_make_each_branch_of_a_max_active():
    """Random points alone rarely make 1e4*D the larger side; the sample is chosen so that they do."""
    reference = sp.Max(B, 10**4 * D)
    points = eq.Domain(("B", "D")).points(eq.N_POINTS, seed=formula.seed("ch99-t0-compare"), cover=reference)
    assert any(p["B"] > 10**4 * p["D"] for p in points) and any(p["B"] < 10**4 * p["D"] for p in points)


@pytest.mark.parametrize("slip", ["max(2*B, 1e4*D)", "max(B, 2e4*D)"])
def test_a_slip_inside_either_branch_of_a_max_is_caught(slip):
    ok, diagnosis = compare("max(B, 1e4*D)", slip)
    assert not ok and diagnosis in ("partly", "lower_terms", "not_equivalent"), diagnosis


ROUNDED = [
    ("2*31.27e9*T", "6.254e10*T"),  # the student's own arithmetic
    ("B*D/1.97e14", "5.076e-15*B*D"),  # a constant divided out and rounded to 4 figures
    ("B*D/1.97e14", "5.08e-15*B*D"),  # 3 significant figures
    ("2*B*D*F/(4.59e14)", "4.36e-15*B*D*F"),
]


@pytest.mark.parametrize(("reference", "rounded"), ROUNDED)
def test_a_coefficient_rounded_to_three_figures_is_right(reference, rounded):
    assert compare(reference, rounded) == (True, "")


@pytest.mark.parametrize(("reference", "candidate", "diagnosis"), [
    ("B*D/1.97e14", "5e-15*B*D", "ratio:other"),  # 1.5% off: rounded too far
    ("B*D/1.97e14", "B*D/2e14", "ratio:other"),
    ("2*31.27e9*T", "3.127e10*T", "ratio:1/2"),
])
def test_a_truly_different_coefficient_is_a_factor_slip(reference, candidate, diagnosis):
    assert compare(reference, candidate) == (False, diagnosis)


SYMBOLIC_EXPONENTS = [
    ("(1 - ((Z-1)/Z)**K)*(Z-1)/Z", "(1 - (1 - 1/Z)**K)*(1 - 1/Z)"),
    ("2**L*B", "B*2**L"),
    ("B**(1/K)", "exp(log(B)/K)"),
]


@pytest.mark.parametrize(("reference", "candidate"), SYMBOLIC_EXPONENTS)
def test_symbolic_exponents_are_formulas(reference, candidate):
    assert compare(reference, candidate, ("K", "Z")) == (True, "")


def test_a_slip_in_a_symbolic_exponent_is_diagnosed():
    assert compare("(1 - ((Z-1)/Z)**K)*(Z-1)/Z", "(1 - ((Z-1)/Z)**(K-1))*(Z-1)/Z", ("K", "Z"))[0] is False
    assert compare("2**L*B", "2**(L+1)*B") == (False, "ratio:2")


@pytest.mark.parametrize("candidate", ["B**(1e30*D)", "2**(1e30*B)", "B**(1e20*B**2)"])
def test_powers_too_large_to_compute_are_not_computed(candidate):
    ok, diagnosis = compare("B", candidate)
    assert not ok and diagnosis in ("not_real", "not_equivalent")


# --- a reference that is a limit ----------------------------------------------------------------

LIMIT_REF = "V/W"


def limit_check(answer: str):
    return formula.check("ch99-t0-limit", LIMIT_REF, ("V", "W", "N"), ("N",), answer, limit=("N",))


@pytest.mark.parametrize("answer", ["V/W", "(N-1)*V/(N*W)", "V/W - V/(N*W)"])
def test_the_exact_form_of_a_limit_is_right(answer):
    assert limit_check(answer).ok


@pytest.mark.parametrize(("answer", "diagnosis"), [("2*V/W", "ratio:2"), ("(N-1)*V/W", "ratio_symbols:N"),
                                                   ("V/(N*W)", "ratio_symbols:N"), ("V*W", "ratio_symbols:W")])
def test_a_limit_does_not_excuse_a_wrong_answer(answer, diagnosis):
    """N is no extra symbol where the exact form, right too, holds it: the answer's ratio changes with N."""
    v = limit_check(answer)
    assert (v.ok, v.diagnosis) == (False, diagnosis)


def test_without_a_declared_limit_the_exact_form_is_a_different_formula():
    """Wrong, and told why: it depends on N, and tends to the answer as N grows (a count kept in a large-N form)."""
    v = formula.check("ch99-t0-limit", LIMIT_REF, ("V", "W", "N"), ("N",), "(N-1)*V/(N*W)")
    assert v.diagnosis == "large_only:N" and "tends to it as N grows large" in v.message, v


@pytest.mark.parametrize("answer", ["V*N/W", "V/W + N", "V*(N-1)/W", "V*(N-1)/(N*W*X)"])
def test_a_count_that_does_not_vanish_as_it_grows_is_an_extra_symbol(answer):
    v = formula.check("ch99-t0-limit", LIMIT_REF, ("V", "W", "N", "X"), ("N", "X"), answer)
    assert v.diagnosis.startswith("extra_symbol:"), v


def test_a_symbol_that_is_no_count_is_never_said_to_grow_large():
    """(D-1)/D tends to 1 as D grows, but D is a width, not a count the question takes large."""
    v = formula.check("ch99-t0-limit", LIMIT_REF, ("V", "W", "N", "D"), ("N",), "(D-1)*V/(D*W)")
    assert v.diagnosis == "extra_symbol:D", v


def test_a_limit_symbol_must_be_a_count():
    """The exact form divides by (N-1)/N, which is 0 where N is 1: a symbol that may be 1 (an ordinary one,
    64/64) cannot be a limit, and saying so fails when the record is written."""
    from autograder.questions import AuthoringError, Formula

    with pytest.raises(AuthoringError, match="ch99-t0-limit: limit symbols must be among the counts"):
        Formula(qid="ch99-t0-limit", points=1, prompt="p", reference=sp.sympify(LIMIT_REF), symbols="V W N",
                limit="N", slips=(Slip("2*V/W", "ratio:2"),))
    Formula(qid="ch99-t0-limit", points=1, prompt="p", reference=sp.sympify(LIMIT_REF), symbols="V W N",
            counts="N", limit="N", slips=(Slip("2*V/W", "ratio:2"),))


# --- check_formula: alternatives, slips and hints --------------------------------------------------

REFERENCE = "2*B*D*(N-1)/N"
ACCEPT = (Accept("2*B*D", 0.5, "That is the large-N limit; count exactly."),)
HINT = "Count both the multiply and the add."
HINTED = (Slip("B*D*(N-1)/N", "ratio:1/2", HINT), Slip("2*B*D*N", "not_equivalent"))


def check(answer: object):
    return formula.check("ch99-t0-check", REFERENCE, ["B", "D", "N"], ["N"], answer, ACCEPT, HINTED)


@pytest.mark.parametrize("answer", [REFERENCE, "2*B*D - 2*B*D/N", 2 * B * D * (N - 1) / N])
def test_reference_and_rewrites_are_correct(answer):
    v = check(answer)
    assert (v.status, v.score, v.diagnosis) == (Status.CORRECT, 1.0, "correct")


@pytest.mark.parametrize("answer", ["2*B*D", "2*D*B", "B*D + D*B"])
def test_accepted_alternative_earns_partial_credit(answer):
    v = check(answer)
    assert (v.status, v.score, v.diagnosis) == (Status.PARTIAL, 0.5, "partial")
    assert v.message == ACCEPT[0].message


@pytest.mark.parametrize("answer", ["B*D*(N-1)/N", "B*D - B*D/N"])
def test_slip_with_hint_appends_the_hint(answer):
    v = check(answer)
    assert (v.status, v.score, v.diagnosis) == (Status.INCORRECT, 0.0, "ratio:1/2")
    assert v.message.endswith(" Hint: " + HINT)
    assert "half" in v.message


@pytest.mark.parametrize(("answer", "diagnosis"), [("4*B*D*(N-1)/N", "ratio:2"), ("2*B*D*N", "ratio_symbols:N"),
                                                   ("2*B*D*F*(N-1)/N", "unknown_name")])
def test_other_wrong_answers_get_no_hint(answer, diagnosis):
    v = check(answer)
    assert v.diagnosis == diagnosis and v.score == 0.0
    assert "Hint:" not in v.message


def test_unreadable_answer_is_invalid_not_wrong():
    v = check("2B*D")
    assert (v.status, v.score, v.diagnosis) == (Status.INVALID, 0.0, "implicit_multiplication")


def test_judging_never_simplifies(monkeypatch):
    """simplify can run for minutes on a right answer padded with a zero it cannot prove zero; the
    verdict comes from values alone, so padding costs what evaluating it costs."""
    class Simplified(BaseException):  # not an Exception: a broad except must not swallow it
        pass

    def refuse(*args, **kwargs):
        raise Simplified("simplify called while judging")

    monkeypatch.setattr(sp, "simplify", refuse)
    monkeypatch.setattr(sp.Expr, "simplify", refuse)
    from autograder.checks import judge
    from autograder.questions import Formula

    q = Formula(qid="ch99-t0-pad", points=1, prompt="p", reference=2 * B * D, symbols="B D",
                slips=(Slip(B * D, "ratio:1/2"),))
    for answer in ["2*B*D", "2*B*D + log(B**3*D**2) - 3*log(B) - 2*log(D)", "B*D"]:
        judge(q, answer)


def test_exact_numbers_must_be_exact():
    """Whole numbers and fractions are the student's own exact count: a small term left out (one
    norm's D scales beside 3*D*F) is a slip, however small; decimals mark a rounded coefficient."""
    assert compare("3*D*F + 4*D*N*H + D", "3*D*F + 4*D*N*H") == (False, "lower_terms")
    assert compare("3*D*F + 4*D*N*H + D", "3*D*F + 4*D*N*H + D") == (True, "")
    assert compare("B*D/197000000000000", "B*D/1.97e14") == (True, "")
    assert compare("2*B*D", "2.000001*B*D") == (True, "")
    # a constant multiple within 3 figures is its own finding: the form is right, the constant is not
    assert compare("2*B*D", "2000001*B*D/1000000") == (False, "constant_close")


@pytest.mark.parametrize("answer", ["2*B*D*F/(4*B*D*F + 4*B*F)", "B*(D*F + D)/(B*F)"])
def test_a_symbol_the_answer_writes_but_cancels_is_not_called_a_dependence(answer):
    """2*B*D*F/(4*B*D*F + 4*B*F), the intensity without its output write, does not depend on B though B is written
    in it: it was told "depends on B, but the answer should not", which sent the student after the wrong thing."""
    v = formula.check("ch99-t0-cancel", "D*F/(D*F + D + F)", ("B", "D", "F"), (), answer)
    assert not v.ok and "B" not in v.message, v.message


@pytest.mark.parametrize(("reference", "answer", "said"), [
    ("(S-1)/(M+S-1)", "S/(M+S-1)", "recount the smaller ones"),  # the pipeline bubble with one stage too many
    ("(S-1)/(M+S-1)", "(S-1)/(M+S)", "recount the smaller ones"),
    ("2*(N-1)*V/(N*W)", "2*N*V/((N+1)*W)", "recount the smaller ones"),
    ("2*B*D*F", "2*B*D*F + B*D", "keep the leading term alone"),  # a leading-order answer with a term too many
    ("4*B*D*F/X", "4*B*D*F/X + B*F/X", "keep the leading term alone"),
])
def test_wrong_lower_order_terms_are_told_as_the_question_counts_them(reference, answer, said):
    """"where the question asks for the leading order, keep that term alone; where it asks for an exact count,
    count every term" was said of an exact fraction, the bubble: a tired student could not tell which half was
    theirs. The sentence is the half that applies, in both judges."""
    names = ("B", "D", "F", "M", "N", "S", "V", "W", "X")
    graded = formula.check("ch99-t0-lower", reference, names, ("M", "N", "S", "X"), answer)
    fp = formula.fingerprint("ch99-t0-lower", names, ("M", "N", "S", "X"), reference)
    checked = formula.selfcheck(fp, "ch99-t0-lower", answer)
    assert graded.diagnosis == checked.diagnosis == "lower_terms" and said in graded.message, graded
    assert checked.message == graded.message
