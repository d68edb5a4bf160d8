"""Formula equivalence on the positive domain, and the diagnosis of each kind of slip."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from autograder import equivalence as eq
from autograder.checks import check_formula
from autograder.formula import parse_formula
from autograder.questions import Accept, Slip
from autograder.verdict import Status
from course.symbols import B, D, N
from tests.strategies import COURSE_NAMES

DOMAIN = eq.Domain(COURSE_NAMES)
COUNTS = eq.Domain(COURSE_NAMES, frozenset({"N"}))


def compare(reference: str, candidate: str, domain: eq.Domain = DOMAIN) -> eq.Comparison:
    ref, cand = parse_formula(reference, domain.names), parse_formula(candidate, domain.names)
    return eq.compare(ref.expr, cand.expr, domain)


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
    assert compare(reference, candidate) == eq.Comparison(True, "")


FACTORS = [Fraction(2), Fraction(1, 2), Fraction(8), Fraction(1, 4), Fraction(1000), Fraction(3, 2), Fraction(-1)]


@pytest.mark.parametrize("k", FACTORS, ids=str)
@pytest.mark.parametrize("reference", ["2*B*D*F", "B*D/(N-1)", "max(B*D, F)", "sqrt(B)*D + 1"])
def test_constant_factor_is_a_ratio(reference, k):
    assert compare(reference, f"({k})*({reference})") == eq.Comparison(False, f"ratio:{k}")


def test_a_factor_that_is_not_nice_is_ratio_other():
    assert compare("B*D", "7.3*B*D").diagnosis == "ratio:other"


SLIPS = [
    ("2*B*D", "2*B*D*F", "extra_symbol:F"),
    ("2*B*D", "2*B*D*F*N", "extra_symbol:F,N"),
    ("2*B*D", "2*B*D + F", "extra_symbol:F"),
    ("2*B*D*F", "2*B*D", "missing_symbol:F"),
    ("2*B*D*F", "2*B", "missing_symbol:D,F"),
    ("B*D + F", "B*D", "missing_symbol:F"),
    ("max(B, D)", "B", "missing_symbol:D"),
    ("B**2 + B", "B**2", "lower_terms"),
    ("B*N", "B*(N-1)", "lower_terms"),
    ("max(B*D, D**2)", "B*D", "partly"),
    ("min(B*D, D**2)", "B*D", "partly"),
    ("B + D", "B*D", "not_equivalent"),
    ("B/D", "D/B", "not_equivalent"),
]


@pytest.mark.parametrize(("reference", "candidate", "diagnosis"), SLIPS)
def test_slip_diagnosis(reference, candidate, diagnosis):
    assert compare(reference, candidate) == eq.Comparison(False, diagnosis)


@pytest.mark.parametrize("domain", [DOMAIN, COUNTS], ids=["reals", "counts"])
def test_n_minus_one_slip_is_lower_terms(domain):
    assert compare("2*N", "2*N - 1", domain) == eq.Comparison(False, "lower_terms")


def test_candidate_that_is_never_real():
    assert eq.compare(B, sp.sqrt(-B), DOMAIN) == eq.Comparison(False, "not_real")


@pytest.mark.parametrize("candidate", ["exp(exp(exp(40)))*B", "exp(exp(exp(exp(B))))", "exp(-exp(exp(B**2)))"])
def test_exponentials_too_large_to_compute_are_not_computed(candidate):
    """mpmath would need log(2) to millions of digits for these (minutes) or run out of memory; the
    value counts as not computable, like an overflow."""
    assert compare("B", candidate) == eq.Comparison(False, "not_real")


def test_exp_is_computed_up_to_its_limit():
    at = eq.evaluator(sp.exp(sp.exp(B)), ("B",))
    assert eq.close(at({"B": Fraction(3)}), sp.exp(sp.exp(3)).evalf(30))
    assert at({"B": Fraction(28)}) is None  # e**28 is above 2**40
    assert eq.evaluator(sp.exp(B), ("B",))({"B": Fraction(2**16)}) is not None  # a big value, not too big


def test_points_cover_both_sides_of_a_max():
    points = DOMAIN.points(eq.N_POINTS, seed=0)
    assert any(p["B"] > p["D"] for p in points) and any(p["B"] < p["D"] for p in points)


def test_nearly_equal_is_not_equal():
    """A relative difference of 1e-6 is a slip (a rounded constant), not a rewrite."""
    assert not compare("B*D", "1.000001*B*D").equal


def test_symbolic_confirmation():
    assert eq.confirm_symbolically(B * (N - 1) / N, B - B / N) is True
    assert eq.confirm_symbolically(B, 2 * B) is None


# --- check_formula: alternatives, slips and hints --------------------------------------------------

REFERENCE = "2*B*D*(N-1)/N"
ACCEPT = (Accept("2*B*D", 0.5, "That is the large-N limit; count exactly."),)
HINT = "Count both the multiply and the add."
HINTED = (Slip("B*D*(N-1)/N", "ratio:1/2", HINT), Slip("2*B*D*N", "not_equivalent"))


def check(answer: object, symbolic: bool = False):
    return check_formula(REFERENCE, ["B", "D", "N"], ["N"], answer, ACCEPT, HINTED, symbolic)


@pytest.mark.parametrize("answer", [REFERENCE, "2*B*D - 2*B*D/N", 2 * B * D * (N - 1) / N])
def test_reference_and_rewrites_are_correct(answer):
    v = check(answer)
    assert (v.status, v.score, v.diagnosis) == (Status.CORRECT, 1.0, "correct")


def test_symbolic_flag_records_the_proof():
    assert check("2*B*D - 2*B*D/N", symbolic=True).data == {"confirmed": "symbolic"}
    assert check("2*B*D - 2*B*D/N").data == {"confirmed": "numeric"}


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


@pytest.mark.parametrize(("answer", "diagnosis"), [("4*B*D*(N-1)/N", "ratio:2"), ("2*B*D*N", "not_equivalent"),
                                                   ("2*B*D*F*(N-1)/N", "unknown_name")])
def test_other_wrong_answers_get_no_hint(answer, diagnosis):
    v = check(answer)
    assert v.diagnosis == diagnosis and v.score == 0.0
    assert "Hint:" not in v.message


def test_unreadable_answer_is_invalid_not_wrong():
    v = check("2B*D")
    assert (v.status, v.score, v.diagnosis) == (Status.INVALID, 0.0, "implicit_multiplication")
