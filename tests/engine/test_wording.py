"""Student-facing wording lives in ``autograder/messages.py`` alone, so the self-check and the grader say
the same thing in the same words and a sentence is changed in one place. A verdict built elsewhere takes
its message from there: no ``Verdict(...)`` outside it spells its message as a string literal or f-string."""

from __future__ import annotations

import ast
from pathlib import Path

import autograder

PACKAGE = Path(autograder.__file__).parent
EXEMPT = {"messages.py", "verdict.py"}  # the wording itself, and the class it fills


def _message(call: ast.Call) -> ast.expr | None:
    """The message argument of a ``Verdict(status, score, diagnosis, message, data)`` call."""
    if len(call.args) > 3:
        return call.args[3]
    return next((k.value for k in call.keywords if k.arg == "message"), None)


def _is_verdict(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Name) and f.id == "Verdict") or (isinstance(f, ast.Attribute) and f.attr == "Verdict")


def _spelled(node: ast.expr) -> bool:
    """A literal sentence: a string, an f-string, or a sum that contains one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) or isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and (_spelled(node.left) or _spelled(node.right))


def inline_wording() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in EXEMPT and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and _is_verdict(node):
                message = _message(node)
                if message is not None and _spelled(message):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_verdict_messages_come_from_messages_py() -> None:
    assert inline_wording() == []


def test_the_scan_sees_an_inline_sentence() -> None:
    """The scan itself: it flags each way of spelling a sentence at the call site, and nothing else."""
    def flagged(src: str) -> bool:
        call = ast.parse(src).body[0].value  # type: ignore[attr-defined]
        return _spelled(_message(call))  # type: ignore[arg-type]

    assert flagged('Verdict(s, 0.0, "x", "Correct.")')
    assert flagged('Verdict(s, 0.0, "x", f"{where} raised an error")')
    assert flagged('Verdict(s, 0.0, "x", where + "raised")')
    assert flagged('Verdict(s, 0.0, "x", message="Correct.")')
    assert not flagged('Verdict(s, 0.0, "x", phrase("correct"))')
    assert not flagged('Verdict(s, 0.0, "x", v.message)')
