"""Diagnosis codes to sentences: the only place student-facing wording lives.

A code is ``head`` or ``head:argument`` (``ratio:2``, ``extra_symbol:F``, ``unit:1000``). Checkers
produce codes; this module phrases them, so the self-check in the student's notebook and the
grader's feedback say the same thing in the same words. No sentence may contain the reference.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from . import bounds, record
from .formula import Invalid

_INVALID = {
    "empty": "No answer yet: replace the placeholder with your answer.",
    "syntax": "This is not a formula I can read ({detail}). Write it as in Python: * between factors, ** for "
              "powers, and close every (.",
    "implicit_multiplication": "Write the multiplication out: '{fix}', not '{detail}'.",
    # letters of the question's symbols written together ("2BDF"): a word reads as one name, or a unit
    "glued_symbols": "Write each multiplication out, as '{detail}': letters written together read as one name (or a "
                     "unit), never as a product of symbols.",
    "caret_power": "Use ** for powers (B**2), not ^.",
    "unicode_operator": "Use the keyboard operators + - * / instead of '{detail}'.",
    "relation": "Give an expression, not an equation or comparison: drop the '=' or '<'.",
    # A name the notebook may well define (the notation's N) that this question does not take: "unknown" would be
    # false, and "should not depend on N" falser; say which symbols the question takes.
    "unknown_name": "'{detail}' is not one of this question's symbols: use only {names}.",
    "unknown_function": "'{detail}' is not a function a formula may use. Allowed: sqrt, log, exp, "
                        "max, min, abs, floor, ceiling.{instead}",
    "function_without_call": "'{detail}' is a function: call it with parentheses, e.g. {detail}(B).",
    "arity": "'{detail}' got the wrong number of arguments: check the commas, as in sqrt(B), log(B, 2), max(B, D).",
    "forbidden": "A formula may not contain {detail}. Use only numbers, symbols, + - * / ** and calls such as "
                 "sqrt(B).",
    "too_long": "The answer is too long to check ({detail}). Simplify it first.",
    "too_large": "The answer contains a number too large to check ({detail}). Simplify it, or write it with "
                 "smaller numbers and exponents.",
    "not_finite": "The answer is infinite or undefined: check for a division by zero or an overflow.",
    "complex": "The answer is a complex number; a size or a time is real and positive: check the signs under "
               "square roots and logarithms.",
    "wrong_type": "Expected {expected}, got {detail}.",  # the detail in words: ``record.in_words``
    "not_a_number": "Expected a number such as 1.5e-3, or a number with a unit such as '1.5 ms'.",
    "separator": "Write the number without separators between its digits: 1,024 is 1024 in some countries and "
                 "1.024 in others. Type 1024 or 1.024.",
    "unknown_unit": "Unknown unit '{detail}'. For this question use {unit_examples}.",
    "unit_dimension": "'{detail}' is not the right kind of unit: the question asks for {dimension}.{rate}",
    "formula_for_number": "This question asks for a number, and your answer is a formula in {detail}: put in the "
                          "values (e.g. with .subs(...)) or compute it with numbers; where the question asks what a "
                          "quantity tends to (a long context, a large batch), give that limit.",
    "number_expression": "This question asks for a number, and your answer is a calculation with {detail} in it: "
                         "compute its value and give the number (float(...) computes a sympy expression).",
    "unit_arithmetic": "Give one number, with at most one unit after it: '{detail}' is a calculation with units in "
                       "it. Compute it first (units that cancel, as in a ratio of two times, leave a plain number).",
    "count_word": "This question asks for a plain number: leave out '{detail}' and give the number alone.",
    "currency": "Give the amount as a plain number: leave out '{detail}', write any thousands or millions as a "
                "power of ten (4.2e6 for 4.2 million), and no separators.",
    "scale_suffix": "Write the power of ten out: for '{detail}' write {fix} ({why}).{more}",
    "scientific_notation": "Inside a calculation, write a power of ten with e: write {fix} for '{detail}'.",
    "unit_in_formula": "A formula carries no unit: drop '{detail}' (the question says what the formula counts).",
    "unknown_option": "Choose one of: {options}.",
    "too_expensive": "Checking this answer took more than {limit}, the most one answer may take: simplify it "
                     "(drop terms that add nothing) and try again.",
    "no_record": "No answer was recorded for this question: {detail}",
}

_WRONG = {
    "ratio": "Off by a factor of {factor}: {comparison}.",
    "sign": "The sign is wrong.",
    "not_real": "The answer is not a real number at typical values of {names}.",
    "extra_symbol": "Your answer depends on {detail}, but the answer should not.",
    # An answer with a count the answer lacks, that tends to the answer as the count grows ((N-1)/N kept): right
    # for large N only.
    "large_only": "Your answer depends on {detail}, but the answer should not: yours tends to it as {detail} "
                  "grows large.",
    "missing_symbol": "The answer depends on {detail}; yours does not.",
    # "missing_symbol" of an answer that is a number (``number``): often a formula whose symbols a cell had made
    # numbers (S, M = 4, 8); the symbols it lacks are not named, a number lacks them all.
    "missing_symbol:number": "This is a number, not a formula: the question asks for a formula in its symbols. If "
                          "you wrote one, a cell may have assigned numbers to its symbols (e.g. S = 4): re-run the "
                          "setup cell, or take the symbols from course.symbols, and compute it again.",
    # After "missing_symbol" in the self-check, where the notebook's names of the symbols it lacks hold numbers
    # (course.answers._shadowed): {said} "B = 16, D = 64", {names} "B, D".
    "shadowed_symbols": "\nIn this notebook {said}: a cell gave these names numbers, so a formula typed with them "
                        "holds the numbers, not the symbols. Bring the symbols back with `from course.symbols import "
                        "{names}`, and give sizes names of their own (B_size, say).",
    # The answer's leading term is right, and what differs grows more slowly: where the expected formula is its own
    # leading term (2*B*D*F), the answer has terms too many; where it has lower-order terms of its own (an exact
    # count, (S-1)/(M+S-1)), they are counted otherwise ("lower_terms:counted", ``counted`` in the verdict's
    # context: the self-check data says which, one bit per question, nothing of the terms).
    "lower_terms": "The leading term is right, but yours has lower-order terms the expected formula leaves out: "
                   "keep the leading term alone.",
    "lower_terms:counted": "The leading term is right, but the lower-order terms differ: the expected formula counts "
                           "every term exactly, so recount the smaller ones (a term left out, or a count off by one).",
    # one term of a sum wrong, the others right (kinds/formula.py, ``_one_term``): which term, and by what factor, are
    # not said (the answer would be one step away)
    "term_factor": "One term of your sum is off by a simple factor; the others agree with the expected formula: "
                   "recheck each term's coefficient (bytes per value, FLOPs per multiply-add, a count of directions, "
                   "passes or devices).",
    "term_extra": "One term of your sum should not be there; the others agree with the expected formula: recheck "
                  "what each term counts.",
    "term_missing": "A term is missing: your answer is the expected formula less one of its terms. Recheck what else "
                    "contributes (another collective, pass or direction, the other operand).",
    # the answer's ratio to the reference changes with some of the symbols, not all (kinds/formula.py,
    # ``_ratio_depends``): those are said, the factor is not
    "ratio_symbols": "Your answer's ratio to the expected one changes with {detail}, and with no other symbol: recheck "
                     "how your answer uses {detail} (a factor of it left out or put in, a size divided among devices, "
                     "a count of hops or steps, a sum where a product belongs).",
    # within 3 significant figures of the reference times one constant, yet not right (kinds/formula.py)
    "constant_close": "The form is right, but its constant is slightly off: keep 3 significant figures in each "
                      "coefficient, or count every contribution to it.",
    # floor() or ceiling() around a right formula (kinds/formula.py)
    "whole_number": "The question asks for the formula itself, not rounded to a whole number: drop the floor() or "
                    "ceiling() around it.",
    # right where the record's limit symbols are huge, but neither the large-N form nor the exact one (kinds/formula.py)
    "limit_only": "Right for large {limit}, but not the exact form: give the large-{limit} form, or the exact one.",
    # right at the self-check's sample points, not at the grader's own (kinds/formula.py, grader_points)
    "elsewhere": "Your formula gives the expected values at the self-check's sample points, but not at other "
                 "values of {names}: it must hold for all of them (check each max, min or abs in it, and which "
                 "term it picks where).",
    "partly": "Your answer agrees with the expected one in only part of the range of {names}: {advice}.",
    "not_equivalent": "Not equivalent to the expected formula, and not off by a simple factor: recheck each "
                      "term (which quantities enter it, and whether they multiply or add).",
    "unit": "This looks like the answer in {guess}; the question asks for {unit}. Give the number in "
            "{unit}, or write the unit, e.g. '{example}'.",
    # a size written with a decimal prefix that is right with the binary one, or the other way round
    "unit:binary": "{decimal} is 10^{decimal_power} bytes and {binary} is 2^{binary_power} bytes: your number reads "
                   "as the other one. Check which one your calculation gives, and write that unit.",
    # a size written in bits whose number is right in bytes ("141 Gb" for 141 GB)
    "unit:bits": "'{unit_given}' counts bits (b is a bit, B a byte of eight bits): your number reads as bytes. Check "
                 "which one your calculation gives, and write that unit.",
    "close": "Close, but the question accepts {tolerance}.",
    # "close" beyond what a rounding explains (kinds/number.py, ROUNDING): the same diagnosis, other words
    "close_far": "Within 25% of the expected value, but further off than a rounding explains (the question "
                 "accepts {tolerance}): recheck each term, and each value you used.",
    # "close_far" near a range (kinds/number.py): its reference may lie much further off than 25%
    "close_range_far": "Within 25% of the expected range, but further outside it than a rounding of its ends "
                       "explains (the question accepts {tolerance}): recheck each term, and each value you used.",
    # an exact count answered by a whole number within 25% of it but not one away (kinds/number.py): a rounding or a
    # wrong term alike, for words of their own would tell the count's digits one by one
    "close_count": "Within 25% of the expected count, but not it (the question accepts {tolerance}): give every "
                   "digit, and recheck each term and where the count starts and ends.",
    # an exact count answered by a whole number one away from it (kinds/number.py): the diagnosis stays "close"; the
    # rounding is named only where the count is a rounded quotient (``Tolerance.rounded``)
    "off_by_one": "Off by one: check where the count starts and ends (the question accepts {tolerance}).",
    "off_by_one:rounded": "Off by one: check where the count starts and ends, and how the division that gives it "
                          "rounds, floor against round (the question accepts {tolerance}).",
    "edge": "At the very edge of what is accepted ({tolerance}): the self-check cannot tell on which side. {advice}",
    "magnitude": "Off by about a factor of {factor} (to within 25%): check {scale}, and which quantities "
                 "you combined.{percent}",
    # a number whose reciprocal is right (kinds/number.py)
    "inverted": "Your answer is the expected value upside down: is the ratio taken the other way round?",
    "not_equal": "Not the expected value, nor a simple multiple of it: recheck which quantities you combined, "
                 "and how.",
    # any wrong value of a simple number question that is not close, nor a factor said (kinds/number.py, ``simple``):
    # no factor, power of ten or direction, and not "nor a simple multiple" (it may be one)
    "withheld": "Not the expected value: recheck which quantities you combined, and how, and {scale}.",
    "not_equal:case": "Not the expected value in this case: recheck which terms your function "
                      "counts at these inputs, and how it combines them.",
    # the wrong elements of a returned array are right values in other places (kinds/function.py, ``_reordered``)
    "permuted": "The returned array holds the right values, some in the wrong places: check the order the question "
                "asks for (increasing, or by position).",
    "shifted:+1": "Each wrong element of the returned sequence holds the value that belongs one place later: is each "
                  "value recorded a step late (after an update where the question asks for before it), or does a "
                  "loop start one step on?",
    "shifted:-1": "Each wrong element of the returned sequence holds the value that belongs one place earlier: is "
                  "each value recorded a step early, or does a loop start one step before where it should?",
    "wrong_elements": "{bad} of the {length} elements of the returned array are wrong; the first is element {index} "
                      "({finding}). Check the rule that computes each element from the inputs.",
    "wrong_option": "Not the right choice: weigh what each option says against what you worked out above.",
    "book_value": "That is the answer at the book's values; your exercise setting uses other values: run "
                  "course.setting(\"{setting}\") to see them.",
    "stale_values": "That is right for the values course.setting(\"{setting}\") showed before it ran again: run "
                    "again the cells that compute this answer from them.",
    "judged_by_grader": "Recorded: the grader judges this answer (a grading kernel holds no self-check data).",
}

# How to get simulated devices, the same in each sentence that offers them (and in the README).
_SIMULATED = ("restart the kernel, run %env SCALING_COURSE_DEVICES=cpu in a new cell above the first one, then the "
              "first cell (see the README).")
# The start of the sentences of a cell that builds too large a mesh: ``course.answers`` reads the size back from it.
MESH_BUILT = "this cell builds a mesh of {need} devices"

# Verdicts about the answer as a whole, not about its value: keyed by their full code (the part after ":"
# says which variant of the diagnosis), looked up before the tables above.
_VERDICTS = {
    "correct": "Correct.",
    # the self-check's "edge" of a formula with a branch (max, min, abs) never active at its points (kinds/formula.py)
    "edge:branch": "The self-check cannot fully check this answer: a branch of a max(), min() or abs() in it is "
                   "never the active one at its sample points, or a floor() or ceiling() in it never rounds there, so "
                   "only the grader tests it. Is that part meant to be there?",
    "raised": "Your function raised an error: {error}",
    "raised:case": "your function raised an error: {error}",  # inside a test case's frame
    # after either, where the function takes other parameter names than the prompt's
    "raised+keyword": " The check calls your function by the prompt's parameter names ('{name}' is one): name your "
                      "parameters as the prompt writes them.",
    # The self-check's bounds on calling a function (record.bounded_calls), inside a test case's frame.
    "timeout:case": "your function did not return within {seconds} s, where the self-check stops it: an endless "
                    "loop, or far more work than the question needs?",
    "timeout:trace": "your function did not return within {seconds} s when the self-check traced it, where it stops "
                     "it: an endless loop, or far more work than the question needs?",
    "timeout:not_called": "not called: your function's calls on the cases before it took {seconds} s, all the time "
                          "the self-check gives one answer (an endless loop, or far more work than the question "
                          "needs?)",
    # A question whose mesh has more devices than the kernel (course.setup()): the kernel, not the answer, is at
    # fault. ``have``: "1 device", "4 devices".
    "devices:no_setup": "This kernel has {have}; this question's mesh needs {need}: restart the kernel and run the "
                        "setup cell (course.setup()) before any other.",
    "devices:real": "This kernel has {have}; this question's mesh needs {need}: check it on a machine with {need}, "
                    "or on {need} simulated devices: " + _SIMULATED,
    # A cell that builds a mesh (course.mesh) of more devices than the kernel has (autograder/meshes.py): one line.
    "devices:mesh": MESH_BUILT + "; this kernel has {have}: run it on a machine with {need}, or on {need} simulated "
                    "devices: " + _SIMULATED,
    "devices:mesh_too_large": MESH_BUILT + "; this kernel has {have}, and the course's meshes have at most {most}: "
                              "check the sizes of its axes (see the README).",
    # After "raised:lowering" of a program checked on a kernel with more devices than the question's mesh.
    "devices:program_mesh": " The checks run your program on an {need}-device mesh, and this kernel has {have}: build "
                            "meshes with course.mesh(...) in the question's shape, not from jax.device_count().",
    # A NameError in any cell for a name that is an answer of this notebook, not given yet (course/answers.py).
    "answer_first": "{error}: this cell uses your answer `{name}`{qid}: fill in its answer cell and run it first.",
    # A check cell run before its answer cell: its argument names a variable no cell has set yet (course/answers.py).
    "run_first": "{error}: run the answer cell above (the one that sets {name}) first.",
    # A NameError for a name that a cell run earlier sets, where that cell stopped before setting it.
    "stopped_first": "{error}: a cell you ran earlier sets `{name}`, cell {cell}, but it stopped with an error "
                     "before it did: fix that cell (its message says how), run it again, then this one.",
    # The same, where this kernel's devices stopped that cell (course/answers.py): running it again repeats that.
    "stopped_first:devices": "{error}: a cell you ran earlier sets `{name}`, cell {cell}, but this kernel's devices "
                             "stopped it before it did, and running it again only repeats that: {advice}",
    "devices:restart": "restart the kernel and run the first cell before any other.",
    "devices:elsewhere": "run the notebook on a machine with {need} devices, or on {need} simulated devices: "
                         + _SIMULATED,
    "interrupted": "{qid}: the check was interrupted before it finished, and nothing was recorded. If your function "
                   "was still running, look for an endless loop.",
    "devices:setup": "Warning: this kernel has {have}; the program questions need {need} (their meshes have "
                     "{need}), and their checks will say so; the other questions work. For {need} simulated devices, "
                     + _SIMULATED,
    # A progress file that cannot be read (course/progress.py): never written over.
    "progress:moved": "Your progress file {path} could not be read ({why}): it is kept as {kept}, and a new one "
                      "is started.",
    "progress:stuck": "Your progress file {path} could not be read ({why}) nor moved aside ({error}): it is left as "
                      "it is, and this check is not saved. Repair the file or move it away.",
    "progress:unreadable": "The progress file {path} cannot be read ({why}), so nothing is shown from it. It is left "
                           "as it is: repair it, or the next check moves it aside (keeping it) and starts a new one.",
    # `scaling-course selfcheck`'s table (autograder/selfcheck.py): a row stays within the table's width, and
    # what to do about questions this machine cannot check is said once, in full, under the table.
    "selfcheck:undefined": "not checked: the answer cell ran but did not define {name}",
    "selfcheck:cannot_check": "not checked on this machine (see below the table)",
    "selfcheck:cannot_check_below": "{questions} ({points}) could not be checked on this machine: {why}",
    "selfcheck:missing": "not checked: its check cell is missing",
    # Under the table: the total where some questions could not be checked here, and where no check recorded.
    "selfcheck:total_checked": "{earned} of {checked} checked points ({unchecked} not checkable on this machine)",
    "selfcheck:nothing_answered": "Nothing is answered yet: fill in an answer cell (where it says YOUR ANSWER HERE), "
                                  "then run selfcheck again.",
    "selfcheck:no_verdict": "No check recorded its verdict: does the first cell run? Is the progress file writable?",
    # The notebook's way to simulated devices (_SIMULATED), and the command line's (a selfcheck run has no kernel
    # of the learner's to restart).
    "selfcheck:notebook_steps": _SIMULATED,
    "selfcheck:command_steps": "run it again as SCALING_COURSE_DEVICES=cpu {command} (or unset "
                               "SCALING_COURSE_DEVICES; see the README).",
    # What a function returned, when it is not what the question reads (inside a test case's frame).
    "returned:none": "your function returned None: did you forget `return`?",
    "returned:type": "your function returned {got}; expected {want}.",
    # an array of another shape than the reference's (its elements are not compared): a flattened, transposed or
    # reshaped result, or rows of unequal lengths
    "returned:shape": "your function returned {got}; expected an array of shape {want}. Check which dimension "
                      "each index runs over, and that nothing flattens or transposes the result.",
    "returned:count": "your function returned {got}; expected {want} values (return them as a tuple).",
    "returned:dict": "your function returned a dict; expected {want} values: return them as a tuple, not a dict "
                     "(return a, b, in the order the question gives them).",
    "returned:one": "Your function returned a {got} of one value, where the question asks for the value itself: "
                    "return it without the {fix}.",
    "returned:one:case": "your function returned a {got} of one value, where the question asks for the value "
                         "itself: return it without the {fix}.",
    "not_a_function": "Expected a function, got {got}: define it with def and pass its name, without calling it.",
    "raised:lowering": "Your function could not be lowered: {error}",
    "no_program": "Expected a function (no program was recorded).",
    "not_checked": "Your program could not be checked: {error}",
    "program_failed": "Your program could not be run within the grader's limits (time or memory).",
    "wrong_sharding": "Right numbers, but the result is sharded as {got}; expected {want}.",
    "collectives": "Right numbers, but your program runs {found}; expected {expected}.",
    "no_drawn_cases": "Your function's results on the test cases drawn at grading time were not recorded, so nothing "
                      "can be credited (did the notebook change the grading environment?).",
    "unknown_kind": "This course version cannot check {kind!r} answers.",
    "too_expensive:limits": "Checking this answer exceeded the grader's limits (time or memory).",
    "grader_error": "The grader could not check this answer ({error}); please tell the course staff.",
    "unjudgeable": "This answer could not be evaluated ({error} while reading it), though the expected one can: "
                   "write it in a plainer form (simplify it, or expand it by hand) and check it again.",
    # A program question whose mesh shape the student chooses (``ProgramSpec.mesh_choices``): why the choice
    # cannot be judged. The choice is the defaults of the function's keyword parameters named after the axes.
    "mesh_choice:not_a_function": "Expected your step function, with the mesh shape you chose as the defaults of its "
                                  "keyword parameters {axes} (e.g. def step(x, ..., *, {example}):).",
    "mesh_choice:missing": "Your function does not say which mesh shape it chose: give it keyword parameters {axes} "
                           "whose defaults are that shape (e.g. def step(x, ..., *, {example}):), and build its mesh "
                           "from them, course.mesh({call}). Missing: {missing}.",
    "mesh_choice:not_whole": "The mesh's {axis} is a number of devices, a whole number from 1 to {devices}; your "
                             "function's default for it is {value}.",
    "mesh_choice:earns_half": "Right numbers, but the {shape} mesh you chose (where the collectives and the memory "
                              "are right too) is not the shape expected: {why}",
    "mesh_choice:not_allowed": "Your function chose a {shape} mesh ({shape_axes}), which this question does not "
                               "allow: choose one of {allowed}.",
}

# A plain number off by a factor of 100, or about: a percentage where a fraction is asked, or the reverse.
PLAIN = "a plain number"  # the unit a number question without one names (kinds/number.py, ``context``)
_PERCENT = " A percentage where a fraction is asked, or the reverse? 25% is 0.25."


def _percentage(arg: str, ctx: Mapping[str, object]) -> bool:
    """Whether a plain number off by about 100 may be a percentage: a fraction written as one without its sign (25
    for 0.25, so at most 150), or a percentage written as a fraction (at most 1) or with a sign it should not have
    (0.25% for 0.25). An array's entry of 448 answered 1.5 is neither (the value and its sign, where the judge
    passes them)."""
    if ctx.get("unit") != PLAIN or arg not in ("100", "1/100", "+2", "-2"):
        return False
    value = ctx.get("value")
    if not isinstance(value, int | float):
        return True
    if arg in ("100", "+2"):
        return abs(value) <= 150
    return abs(value) <= 1 or str(ctx.get("unit_given") or "").strip() in ("%", "percent")

# What to write in place of a function a formula may not use, after "unknown_function"'s sentence.
_INSTEAD = {"Piecewise": " Write a Piecewise with Max or Min: Max(a, b) is a where a >= b, and b elsewhere."}

# What one element of an array answer gets instead of "not_equal"'s sentence, inside "wrong_elements".
_ELEMENT_NOT_EQUAL = "neither the expected value nor a simple multiple of it"

# Frames: where in a function's results a finding was made, put before its sentence.
_FRAMES = {
    "every_element": "every element: {message}",
    "element": "element {index} of the array: {message}",
    "returned_value": "returned value {n} of {count}: {message}",
    "every_case": "In every test case: {message}",
    "every_case:drawn": "In every test case drawn at grading time: {message}",
    # the self-check's public cases: the grade is the share passed of other cases, drawn where a mistake shows
    "failing_cases": "{failed} of {cases} test cases fail (the grade counts other cases, where the same mistake can "
                     "fail more of them). First, with {args}: {message}",
    "failing_cases:drawn": "{failed} of {cases} test cases drawn at grading time fail. First, with {args}: {message}",
    "hints": "{message} Hint: {hints}",
    # the book's answer (``kinds.at_book``) that is also a slip or a simple factor at the student's own values
    "book_value+own": "{message} If you did use your own values: {own}",
}
_HINT_JOINER = " Or: "

# Diagnoses of a wrong program result (``autograder.programs``). A sentence may quote values: the
# inputs are drawn when the program is checked, so values give nothing away. "+" keys are added to
# another sentence; "error:" keys are why a program could not be checked, after "not_checked"'s colon.
_PROGRAM = {
    "wrong_shape": "The result has shape {got}; expected shape {want}.",
    "wrong_shape:nothing": "The program returned nothing (None): did you forget `return`? Expected an array of shape "
                           "{want}.",
    # added to "wrong_shape" when the result is exactly one block of the expected one
    "wrong_shape+block": " It is exactly one device's block of the expected result: block {block} of {n} along "
                         "dimension {dim}, as {axes} splits it. Does out_specs name every axis the result is "
                         "split over?",
    "wrong_type": "The result has dtype {dtype}; expected real numbers.",
    "not_finite": "{bad} of {size} entries of the result are NaN or infinite (the first at index {index}): look "
                  "for a division by zero, an overflow, or an entry read before it is written.",
    "zeros": "Every entry of the result is 0, and the expected one is not: is the result ever filled in (a buffer "
             "a loop never updates, or a mask that is never true)?",
    "scaled:mesh": "Every value is {k}x the expected one, and {k} is the number of devices along {axes}: is "
                   "something summed over {axes} twice, e.g. a psum too many (a gradient psummed after autodiff "
                   "already summed it), or a mean taken over one device's share (divided by its own count of rows "
                   "or tokens) where the whole count belongs?",
    "scaled:1/mesh": "Every value is 1/{n} of the expected one, and {n} is the number of devices along {axes}: is "
                     "a psum (an AllReduce) over {axes} missing, or a pmean used where a sum belongs?",
    "scaled:2": "Every value is twice the expected one: is something counted twice, e.g. a block added by both "
                "directions of a ring, or a sum taken twice?",
    "scaled:1/2": "Every value is half the expected one: is half of the terms missing, e.g. one direction of a "
                  "bidirectional ring?",
    "scaled:-1": "Every value has the wrong sign: the result is exactly the negative of the expected one. Is a "
                 "difference taken the wrong way round?",
    "scaled": "Every value is {k} times the expected one: look for a factor of {k} (a count of devices, steps or "
              "copies, or a size such as the batch a mean divides by) in how your program sums or scales.",
    "scaled:root": "Every value is {k} times the expected one: is a scale such as attention's 1/sqrt(H) applied "
                   "where the question asks for none, or left out where it asks for one?",
    "scaled:negative": "Every value is {k} times the expected one: the sign is flipped, and the size is off by a "
                       "factor of {size}.",
    "transposed": "The result is the expected one transposed ({how}): check the order of a matmul's operands, a "
                  ".T, or the output axes of an einsum.",
    "partial_sum": "Each entry of the result is a partial sum where the expected one is the total: of the sum over "
                   "{letters} in {einsum} it adds up only one share along {axes} ({n} shares in all). Is a psum "
                   "(or psum_scatter) over {axes} missing?",
    # each entry the max (or min) of the shares a psum adds: the reduction runs, with the wrong operation
    "reduced_by": "Each entry of the result is the {op} of the {n} shares along {axes} of the sum over {letters} in "
                  "{einsum}, where the expected one is their total: the all-reduce over {axes} takes the {op} of "
                  "the shares; the sum needs psum (not p{op}).",
    "partial_sum:local": "The result is what one device computes from its own blocks of the operands (split "
                         "along {axes}): one of {n} shares of {einsum}, where the expected result adds them all. Is "
                         "a psum (or psum_scatter) over {axes} missing?",
    "misplaced_blocks": "Every block of the result is a block of the expected one, in the wrong place (dimension "
                        "{dim} in {n} blocks, as {axes} splits it): block {i} holds what belongs at block {j}. "
                        "Check the order in which blocks arrive, and the index you compute from axis_index.",
    "same_block": "Every block of the result (dimension {dim} in {n} blocks, as {axes} splits it) holds block {j} "
                  "of the expected one: does every device compute the same block? Use axis_index to pick each "
                  "device's own.",
    "zero_rows": "{n} of {rows} rows of the result are all zeros where the expected ones are not (the first is row "
                 "{first}), and every other row is right: are those rows never written, e.g. a loop that stops a step "
                 "short (a ring's block that never arrives), or tokens dropped because a buffer holds fewer than are "
                 "routed to it?",
    "permuted_rows": "Every row of the result is a row of the expected one, but {moved} of {rows} are in the wrong "
                     "place (row {i} holds what belongs at row {j}): is a sort undone, or a block put where it "
                     "arrived rather than where it belongs (results left in the order they were grouped or "
                     "received in)?",
    "wrong_values": "The result differs from {einsum} on random inputs in {bad} of {size} entries; the first is "
                    "at index {index}: got {got}, expected {want}.",
    "wrong_values:exact": "The result differs from {einsum} in {bad} of {size} counts (integers, compared "
                          "exactly); the first is at index {index}: got {got}, expected {want}.",
    # added to a wrong result when some blocks are right: where to look
    "wrong_values+blocks": " Along dimension {dim} ({n} blocks, as {axes} splits it) only block{s} {right} "
                           "{are} right.",
    # added to "wrong_values" when an integer result is compared with an expected one that is not
    # added to "wrong_values" when every entry is off by little: a precision, not a logic, mistake is likely
    "wrong_values+precision": " Every entry is within {pct}% of the largest expected value, beyond the check's "
                              "tolerance ({tolerance}): is something computed in lower precision (bfloat16 or "
                              "float16 operands or sums) where float32 is expected, or a small term left out?",
    # ... or when the difference is small as a whole, though some entries are further off (a rounding grown through
    # several matmuls)
    "wrong_values+precision:overall": " Your result is within {pct}% of the expected one as a whole (the size of the "
                                      "difference over the size of the result), beyond the check's tolerance "
                                      "({tolerance}): is something computed in lower precision (bfloat16 or float16 "
                                      "operands or sums) where float32 is expected? Its rounding grows through each "
                                      "matmul of a step. Or is a small term left out?",
    "wrong_values+dtype": " Your result has dtype {dtype}; the expected one is not whole numbers.",
    # a diagnosis of one of a program's several results (a train step's loss and gradients)
    "output": "{name}: {message}",
    "memory": "Right numbers, but your program holds {held:,} bytes per device in its results and "
              "temporaries (XLA's memory analysis of the compiled program), {k}x what is expected at most: "
              "{limit:,}. {why}",
    # added to a message about a program's collectives when it also holds too much
    "memory+": "It also holds {held:,} bytes per device, {k}x the {limit:,} expected at most. {why}",
    # a program that computes the right numbers with the right collectives but sends more than it needs
    "traffic": "Right numbers, but your {kind}s (the right ones, as many as expected) move {k}x the bytes the "
               "expected program's do ({got:,.0f} bytes per device where {want:,.0f} are enough): is a collective "
               "applied to more than it needs, such as a whole array where one device's block would do?",
    # the same, where the program sums one array an axis at a time (psum over Y, then over X)
    "traffic:in_parts": "Right numbers, but your all-reduces move {k}x the bytes the expected program's do "
                        "({got:,.0f} bytes per device where {want:,.0f} are enough): you sum one array a mesh axis "
                        "at a time, and each of those rings moves the whole array again (2(n-1)/n of it over n "
                        "devices), where one psum over both axes at once moves it once. Name every axis in one psum.",
    "traffic:compiled": "Right numbers, but as compiled, your program's {kind}s move {k}x the bytes the expected "
                        "program's do ({got:,.0f} bytes per device where {want:,.0f} are enough). The compiled "
                        "program is weighed: the collectives the compiler places count (to reshard an operand, or "
                        "for a sharding constraint), a conditional counts as its costliest branch, and a stated "
                        "collective that never runs stands in for none.",
    "traffic:permute": "Right numbers, but your collective-permutes (as many as expected) move {k}x the "
                       "bytes the expected program's do, counted on every link they cross ({got:,.0f} bytes per device "
                       "where {want:,.0f} are enough): does each step send only what the receiver still needs, and "
                       "only to its neighbour?",
    "traffic:one_way": "Right numbers, but your collective-permutes load one direction of "
                       "the links {k}x as much as the expected program's do ({got:,.0f} bytes per device where "
                       "{want:,.0f} are enough): the question asks for both directions at once, half of the data "
                       "each way round the ring at every step.",
    # a program that computes the right numbers and communicates as it should, with far more matrix-product FLOPs
    "compute": "Right numbers and collectives, but each device's matrix products do {k}x the FLOPs the expected "
               "program's do ({got} FLOPs per device where {want} are enough; loops counted at every step, one of "
               "unknown length once, a conditional as its costliest branch): is a product formed that the result "
               "does not need (two weight matrices multiplied together before the input meets them), a chain of "
               "products multiplied in a costlier order (A @ B @ C is (A @ B) @ C: at these sizes A @ (B @ C) may "
               "cost far less), a whole product computed where a device keeps only its share of it, or the same "
               "product done twice?",
    # a ring question answered with permutes the compiler placed (jnp.roll outside a shard_map) that jump
    "not_ring": "Right numbers, but {n} of the {count} collective-permutes in your compiled program were placed by "
                "the compiler, not written in your program (an array operation outside a shard_map, such as "
                "jnp.roll of a sharded array, does this), and each sends its blocks past the neighbouring device, "
                "up to {far} links away: they are not steps of a ring. Write the ring's steps yourself: inside a "
                "shard_map, a ppermute to the neighbour at every step.",
    "unchanged": "Your program returns its input as it came, sharded as {got}: nothing moved, and the exercise is "
                 "to deliver it as {want}.",
    "unknown_count": "Right numbers, but your program runs {found}: the grader cannot count a collective in a loop "
                     "whose length it cannot read (one bounded by the data, or by a condition of several parts). "
                     "Give the loop a fixed length: a Python loop, lax.fori_loop with constant bounds, lax.scan, or "
                     "a while_loop that steps one counter by a constant to a constant.",
    # after the costliest of many collectives a program runs, those it does not describe
    # added to the expected collectives where fewer, each carrying several arrays, are right too
    # added where the counts are those asked for but for all-reduces written as a reduce-scatter and an all-gather
    "collectives+halves": " A reduce-scatter followed by an all-gather is an all-reduce in two halves (as sequence "
                          "parallelism writes it), moving the same bytes, but this question asks for the all-reduce "
                          "itself, one psum.",
    "collectives+fused": " (or fewer of a kind, each carrying several arrays, moving the same bytes)",
    "collectives+more": "and {n} more, each moving fewer bytes",
    # added to the collectives a program states when the compiler added others around them
    "placed": "Right numbers, but the compiler placed {placed} for you: {stated}. This question asks you to write "
              "them yourself, inside jax.shard_map (in_specs that ask for a whole operand, mesh axes left out of "
              "its axis_names, or a plain operation on sharded arrays, leave the communication to XLA).",
    "placed+none": "your program writes no collective",
    "placed+some": "your program writes {stated}",
    "collectives+compiler": ", and {found} that the compiler added outside your shard_map (to reshard an operand "
                            "or a result into the specs it names, or for a sharding constraint)",
    # the same where a shard_map block leaves mesh axes to the compiler: it places collectives inside the block too
    "collectives+compiler:left": ", and {found} that the compiler added over the mesh axes your shard_map leaves to "
                                 "it (those not in its axis_names), or outside it for a reshard or a sharding "
                                 "constraint",
    "output_order": "Right results in the wrong order: the function returns them in the order ({got}); expected "
                    "({want}).",
    "error:raised": "{kind}: {detail}",
    # Why a function could not be exported, after "raised:lowering"'s colon, where JAX's words mislead or say
    # nothing. {at}: " (at `the line of the student's code`)", or nothing.
    "lowering:callback": "it calls back into Python (jax.debug.print, jax.debug.callback, io_callback or "
                         "pure_callback). The check exports the program, and an exported program cannot call back "
                         "into Python: remove jax.debug.print and other callbacks from the function before checking "
                         "it (they are fine while you develop).",
    "lowering:inside_jit": "it calls {name} inside itself{at}, and the check compiles your function with jax.jit, "
                           "inside which {name} cannot be used. Set the mesh outside the function (jax.set_mesh(...) "
                           "in a cell of its own), or pass it explicitly: shard_map(..., mesh=course.mesh(...)), "
                           "NamedSharding(mesh, P(...)).",
    "lowering+no_mesh": " The check compiles your function with jax.jit, where a mesh set inside the function cannot "
                        "be used: pass mesh=course.mesh(...) to shard_map, or call jax.set_mesh(...) outside the "
                        "function, in a cell of its own.",
    "lowering+concrete": " The check traces your function, as jax.jit does, to export it: inside, arrays are "
                         "abstract, so keep to JAX operations and return JAX arrays (no np.asarray, float(), .item(), "
                         ".block_until_ready(), or Python if on an array's values: jnp.where or jax.lax.cond). Run "
                         "eagerly in a cell, such a function works; traced, it cannot.",
    "lowering+other_mesh": " The inputs are split as the question says, on the course's mesh; they read as unsplit "
                           "because the shard_map runs on another mesh. A mesh from jax.make_mesh has Explicit axes in "
                           "this JAX: use course.mesh(...) (or axis_types=(jax.sharding.AxisType.Auto,) * n).",
    "lowering+axes": " The mesh's axes are {axes}: name one of them.",
    "lowering:axis": "its {op} names the axis {name}, which the mesh does not have: the mesh's axes are {axes}. JAX "
                     "raised an AssertionError without a message{at}.",
    "lowering:assertion": "JAX raised an AssertionError without a message{at}. A collective (psum, pmean, pmax, "
                          "ppermute) over an axis the mesh does not have does this: check that every axis a "
                          "collective names is one of the mesh's axes ({axes}).",
    # JAX's check that a shard_map's result is what its out_specs claim, said of the spec (its advice to turn the
    # check off would hide the slip: the result would then differ along the axis).
    "lowering:replication": "out_specs {spec} says the result is the same on every device along {axes}, and "
                            "nothing in your function makes it so: sum the blocks with a psum over {axes}, or gather "
                            "them with all_gather(..., {axes_arg}, tiled=True, to='invarying') (a plain all_gather's "
                            "result counts as different on each device); or, where the result should differ along "
                            "{axes}, name {axes} in out_specs.",
    "lowering:empty": "{kind} without a message{at}: call your function on the exercise's inputs to see the whole "
                      "traceback.",
    "error:not_an_array": "the function returned {kind}, not an array",
    "copies_differ": "The result is right on one device, but the copy device {device} holds differs from it at index "
                     "{index}: a result that every device holds must be the same on each (does each device place "
                     "its blocks by its own index, jax.lax.axis_index?).",
    "error:not_the_outputs": "the function returned ({kinds}); expected a tuple of {n} arrays: {names}",
    "error:unreadable": "the recorded program cannot be read ({kind})",
    "error:foreign_call": "the program calls {target!r}, which is not allowed here",
    # the grader's reading of what the program compiled to raised, where it reads the question's reference fine
    "error:cannot_read": "the grader cannot read this program's collectives ({kind}): use the chapter's collectives "
                         "(psum, all_gather, psum_scatter, all_to_all, ppermute) with ordinary arguments",
    # the census reads the program but cannot weigh it (``collectives.UnreadableCollective``: ``why`` says what)
    "error:unweighable": "{why}. The course weighs the bytes every collective moves, so it refuses a program it "
                         "cannot weigh: use the chapter's collectives with ordinary arguments",
    # judging the program's report raised, where judging the question's reference does not
    "error:frontend_attributes": "the program sets XLA frontend attributes (jax.experimental.xla_metadata), which "
                                 "the course does not read: take them out, the exercise needs none",
    "error:unknown_collective": "the program uses {op}, which the course cannot weigh; use the collectives of the "
                                "chapter (all-gather, reduce-scatter, all-reduce, all-to-all, collective-permute)",
    "error:signature": "the program takes {got} on {devices} devices",
    "error:devices": "the program was exported for {devices} device(s), not for the {want} devices of the "
                     "question's mesh (a program whose results do not depend on its inputs is exported for one)",
    # a program for another mesh than the one it is judged at: its body's, or (in a forged record) its operands'
    "error:mesh": "the program builds a {got} mesh ({axes}), but it is judged on course.mesh({want}), the shape the "
                  "question (or your function's keyword defaults) sets: build every mesh it uses from that shape",
    "error:in_shardings": "the program takes operand {i} ({shape}) sharded as {got}; the question shards it as "
                          "{want} over the {mesh} mesh ({axes}) it is judged at",
    "error:in_mesh": "the program takes its operands sharded over another mesh than the {mesh} one ({axes}) it is "
                     "judged at",
    "error:too_big": "the program's results take {size:,} bytes; no question needs more than {limit:,}",
    "error:dtype": "a result has dtype {dtype}, which is not compared: return float32 (the results are compared "
                   "at float32 precision or better)",
}

# "too_expensive:notebook": an answer left unjudged because the notebook's answers used up its budget.
_NOTEBOOK_SPENT = ("Not checked: checking this notebook's answers took more than {seconds:g} s, the most one "
                   "notebook may take. Simplify the answers that are slow to check (drop terms that add nothing) "
                   "and try again.")


def phrase(code: str, **ctx: object) -> str:
    """The sentence for a diagnosis code. ``ctx`` supplies names, unit and options, and the facts a
    verdict quotes (an error, a sharding)."""
    head, _, arg = code.partition(":")
    if head == "ratio":
        return _ratio_sentence(arg) + (_PERCENT if _percentage(arg, ctx) else "")
    if head == "too_expensive" and arg == "notebook":
        return _NOTEBOOK_SPENT.format(seconds=bounds.NOTEBOOK_SECONDS)
    fields = {"detail": arg or ctx.get("detail", ""), **ctx}
    said_of_a_number = _WRONG.get(f"{head}:number") if ctx.get("number") else None  # e.g. "missing_symbol:number"
    said_of_a_count = _WRONG.get(f"{head}:counted") if ctx.get("counted") else None  # "lower_terms:counted"
    template = _VERDICTS.get(code) or _INVALID.get(head) or said_of_a_number or said_of_a_count or _WRONG.get(code) \
        or _WRONG.get(head)
    if template is None:
        return "Not the expected answer."
    if head == "wrong_type" and _CONTAINER.match(str(fields["detail"])):  # record.container_words
        template = _CONTAINED
        fields["fix"] = _container_fix(str(fields["detail"]), str(ctx.get("shape", "")))
    elif head == "wrong_type":
        fields["detail"] = in_words(str(fields["detail"]))
    if head == "implicit_multiplication":
        d = str(fields["detail"])
        fields["fix"] = d[:1] + "*" + d[1:].lstrip() if d else ""
    if head == "scale_suffix":  # "13B" or "13 billion" -> 13e9
        number, scale = re.fullmatch(r"(.*?)\s*([A-Za-z]+)", str(fields["detail"])).groups()  # type: ignore[union-attr]
        fields["fix"] = number + _SCALES.get(scale, "")
        # 8K tokens is 8192 as often as 8000
        fields["more"] = f" Where K means 1024 ({number}K tokens), write {number}*1024." if scale in ("k", "K") else ""
        fields["why"] = _SCALE_WHY.get(scale, "a letter after a number reads as a unit" if len(scale) == 1
                                       else "a count is written in digits")
    if head == "scientific_notation":  # "1.5 x 10^-3" -> 1.5e-3
        from .numbers import e_notation

        fields["fix"] = e_notation(str(fields["detail"])) or "1.5e-3"
    if head == "unit":
        fields.update(_unit_guess(arg, str(ctx.get("unit", ""))))
    if head == "unit_dimension":
        fields["rate"] = _rate_note(str(fields["detail"]), str(ctx.get("unit", "")))
    if head == "too_expensive":
        fields["limit"] = f"{bounds.ANSWER_CPU_SECONDS:g} s of computing ({bounds.ANSWER_WALL_SECONDS:g} s in all)"
    if head == "unknown_function":
        fields["instead"] = _INSTEAD.get(str(fields["detail"]), "")
    if head == "edge":  # ``precise``: the answer has figures enough that more would not move it
        fields["advice"] = _EDGE_PRECISE if ctx.get("precise") else "Give the value with one more significant figure."
    if head == "partly":  # an answer with a max of its own has one: a side of it is wrong, not the max
        fields["advice"] = "check the terms of each side of your max or min (one agrees where it is the active " \
            "one, another does not)" if ctx.get("own_branch") else "check which term dominates where (a max or min?)"
    if head == "withheld":
        fields["scale"] = _scale(ctx)
    if head == "magnitude":
        fields["scale"] = _scale(ctx)
        fields["factor"] = f"10^{arg.lstrip('+')}" if arg else "a power of ten"
        fields["percent"] = _PERCENT if _percentage(arg, ctx) else ""
    if head in ("extra_symbol", "large_only", "missing_symbol"):
        fields["detail"] = " and ".join(arg.split(","))
    if head == "ratio_symbols":
        names = arg.split(",")
        fields["detail"] = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    if head == "wrong_elements":  # ``finding``: the first wrong element's sentence, ``finding_code`` its code
        fields["finding"] = _ELEMENT_NOT_EQUAL if ctx.get("finding_code") == "not_equal" \
            else str(ctx.get("finding", "")).rstrip(".")
    return template.format_map(_Default(fields))


# A course object given where another value is asked, as ``record.course_object`` names it ("the setting
# ch03-e2", "the chip TPU v5p"), with the fix a kind adds after it.
_COURSE_OBJECT = re.compile(r"(the (setting|chip|node|model) |an? (setting|chip|node|model) of the course)")


def in_words(detail: str) -> str:
    """A wrong type's detail in words: a course object as its kind names it, else as ``record.in_words`` says it."""
    return detail if _COURSE_OBJECT.match(detail) else record.in_words(detail)


# "wrong_type" of one value given in a container: what ``record.container_words`` calls it, and what to give instead.
_CONTAINERS = sorted({"list", "tuple", "array"} | {re.sub(r"^an? ", "", n) for n in record.ARRAY_NAMES.values()},
                     key=len, reverse=True)
_CONTAINER = re.compile(rf"an? ({'|'.join(map(re.escape, _CONTAINERS))}) of "
                        r"(one value|\d+ values|shape \(([\d, ]*)\))$")
_CONTAINED = "Expected {expected}, got {detail}: {fix}."


def _container_fix(detail: str, shape: str = "") -> str:
    """What to give instead of ``detail``; ``shape``: a Choice's first option where every option is a shape
    ("8x8"), to show how a tuple such as (16, 4) is written (the first option, whichever is right)."""
    m = _CONTAINER.match(detail)
    name, size = (m.group(1), m.group(2)) if m else ("array", "")
    dims = [int(d) for d in m.group(3).replace(" ", "").split(",") if d] if m and m.group(3) is not None else []
    if name == "sympy Matrix":  # a Matrix has no .item(): M[0] is its first value
        if dims and all(d == 1 for d in dims):
            return "give the one value it holds, M[0], not the matrix"
        return "give the one value the question asks for, not a matrix of them"
    if name not in ("list", "tuple"):
        name = "array"
    if name == "array" and dims and all(d == 1 for d in dims):  # an array that holds one value, but not a number
        return "give the one value it holds, x.item(), not the array"
    if size != "one value" and shape:
        return f"write it as text, such as '{shape}'"
    if size != "one value":
        return f"give the one value the question asks for, not {'an' if name == 'array' else 'a'} {name} of them"
    if name == "tuple":
        return "give the value itself, x[0], not the tuple (a comma after a value makes a tuple)"
    return "give the value itself, x[0], not the list"


# "unit_dimension" of a FLOP count ("TFLOPs", the course's count) where a rate is asked: how a rate is written.
_FLOP_COUNT = re.compile(r"(?P<prefix>[kKMGTPEZ]?)(?:FLOPs?|[Ff]lop)")


def _rate_note(given: str, unit: str) -> str:
    from .numbers import UNITS

    m = _FLOP_COUNT.fullmatch(given)
    if m is None or UNITS.get(unit, ("",))[0] != "flops/s":
        return ""
    return f" FLOPs is a count: a rate is {m.group('prefix')}FLOP/s or {m.group('prefix')}FLOPS."


def frame(name: str, message: str, **ctx: object) -> str:
    """``message`` (a finding's sentence) said of the part of a function's results named by ``name``
    (one element, one returned value, the failing test cases), so a finding reads the same wherever it
    is made."""
    return _FRAMES[name].format(message=message, **ctx)


def with_hints(message: str, hints: Sequence[str]) -> str:
    """``message`` followed by the hints of the slips the answer behaves like, if any, unless it gives a
    hint already (a returned number's own slip, which names the slip more closely)."""
    if not hints or "Hint:" in message:
        return message
    return _FRAMES["hints"].format(message=message, hints=_HINT_JOINER.join(hints))


def phrase_program(code: str, **ctx: Any) -> str:
    """The sentence of a program diagnosis (``_PROGRAM``). Strict, unlike ``phrase``: these sentences quote
    values the checker measured, so a missing one is the checker's bug, not a gap to paper over."""
    fields = dict(ctx)
    if code == "scaled":  # ``k``: the factor; some have a sentence of their own, a negative one says so
        own = f"scaled:{ctx['k']}"
        code = own if own in _PROGRAM else "scaled:negative" if str(ctx["k"]).startswith("-") else "scaled"
    if code == "transposed":  # ``perm``: the order of axes that turns the expected result into this one
        perm = tuple(ctx["perm"])  # type: ignore[arg-type]
        fields["how"] = "rows and columns swapped" if perm == (1, 0) else f"its axes in the order {perm}"
    if "axes" in fields and not fields["axes"]:  # a block split by no named axis: by all of them
        fields["axes"] = "the mesh"
    if code == "wrong_values+blocks":  # ``right``: the blocks that are right
        right = list(ctx["right"])  # type: ignore[call-overload]
        fields.update(s="s" if len(right) > 1 else "", right=", ".join(map(str, right)),
                      are="are" if len(right) > 1 else "is")
    return _PROGRAM[code].format(**fields)


def phrase_invalid(inv: Invalid, **ctx: object) -> str:
    """Sentence for an unreadable answer, with a caret under the fault when the offset is known."""
    sentence = phrase(inv.code, detail=inv.detail, **ctx)
    if ctx.get("options") and inv.code != "unknown_option":  # a choice's every refusal names its options
        sentence += " " + phrase("unknown_option", **ctx)
    if inv.offset is not None and inv.text and len(inv.text) <= 120 and inv.code not in ("empty",):
        sentence += f"\n    {inv.text}\n    {' ' * inv.offset}^"
    return sentence


def _scale(ctx: Mapping[str, object]) -> str:
    """What to check for a power of ten: a count or a ratio has no unit to convert, its powers of ten come from the
    quantities alone."""
    return "the powers of ten" if ctx.get("unit") == PLAIN else "the units and the powers of ten"


def _ratio_sentence(arg: str) -> str:
    if arg in ("", "other"):
        return "Off by a constant factor: the right symbols, but a wrong coefficient."
    if arg == "-1":
        return _WRONG["sign"]
    try:
        k = Fraction(arg)
    except (ValueError, ZeroDivisionError):
        return "Off by a constant factor."
    if k < 0:
        return _WRONG["sign"] + " " + _ratio_sentence(str(-k))
    named = {Fraction(2): "twice the expected value", Fraction(1, 2): "half the expected value"}
    if k in named:
        comparison = "yours is " + named[k]
    elif k > 1:
        comparison = f"yours is {_num(k)} times the expected value"
    else:
        comparison = f"yours is {_num(k)} of the expected value"
    return _WRONG["ratio"].format(factor=_num(k), comparison=comparison)


def _num(k: Fraction) -> str:
    if k.denominator != 1:
        return f"{k.numerator}/{k.denominator}"
    n = k.numerator
    power_of_ten = n >= 10**4 and str(n).rstrip("0") == "1"
    return f"1e{len(str(n)) - 1}" if power_of_ten else str(n)


# A count's scale as the book writes it (13B parameters) or in words, as a power of ten.
# Why a scale letter is not read as its scale, where it names a unit: B, the book's billion, is bytes.
_SCALE_WHY = {"B": "a letter after a number reads as a unit, and B is bytes, not billions"}
_SCALES = {"k": "e3", "K": "e3", "thousand": "e3", "M": "e6", "million": "e6", "G": "e9", "B": "e9", "bn": "e9",
           "billion": "e9", "T": "e12", "trillion": "e12"}

# An answer at the edge that more figures cannot move: it is what it is, so the values it was computed from decide.
_EDGE_PRECISE = ("More figures would not decide it: recheck the constants you used (a rounded one moves an answer by "
                 "about this much).")

_TIME_NAMES = {1e-3: "ms", 1e-6: "us", 1e-9: "ns", 1e3: "ks", 1e-12: "ps"}


# The time units a question may ask for, in seconds, and the names of the others it may be off by.
_TIME_SECONDS = {"s": 1.0, "min": 60.0, "h": 3600.0, "hours": 3600.0, "days": 86400.0, "years": 31557600.0}
_TIME_WORDS = {1.0: "seconds", 60.0: "minutes", 3600.0: "hours", 86400.0: "days", 604800.0: "weeks",
               31557600.0: "years"}  # a year of 365.25 days, as autograder/numbers.py reads one


def _unit_guess(arg: str, unit: str) -> dict[str, str]:
    """Given the student's value is ``arg`` times the reference, name the unit they likely used."""
    try:
        factor = float(Fraction(arg))
    except (ValueError, ZeroDivisionError):
        factor = 1.0
    guess = f"units {arg} times smaller than {unit or 'expected'}"
    if unit == "s" and factor > 1:
        guess = {1e3: "milliseconds", 1e6: "microseconds", 1e9: "nanoseconds"}.get(factor, guess)
    elif unit in ("B", "B/s", "FLOP", "FLOP/s", "Hz") and factor < 1:
        prefix = {1e-3: "k", 1e-6: "M", 1e-9: "G", 1e-12: "T", 1e-15: "P"}.get(factor)
        guess = f"{prefix}{unit}" if prefix else guess
    if unit in _TIME_SECONDS:  # 24 times a time in days is in hours; 1/60 of one in seconds, in minutes
        guess = _TIME_WORDS.get(round(_TIME_SECONDS[unit] / factor, 6), guess)
    example_unit = {"s": "ms", "B": "GB", "B/s": "GB/s", "FLOP": "TFLOP", "FLOP/s": "TFLOP/s",
                    "Hz": "GHz"}.get(unit, unit)
    return {"guess": guess, "example": f"1.5 {example_unit}"}


class _Default(dict):
    def __missing__(self, key: str) -> str:
        return "?"
