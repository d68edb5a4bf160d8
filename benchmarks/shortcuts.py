"""Timing a shortcut that must not change results: the run as shipped, then with the shortcut taken out, compared."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from autograder.questions import chapter_names


def with_and_without(run: Callable[[], tuple[float, Any]],
                     stand_ins: list[tuple[Any, str, Any]]) -> tuple[float, float]:
    """(seconds without the shortcuts, seconds as shipped) of ``run`` (which returns its seconds and its results),
    the second time with each (module, name, stand-in) put in place; the results must be the same both times."""
    quick, results = run()
    shipped = [(module, name, getattr(module, name)) for module, name, _ in stand_ins]
    for module, name, stand_in in stand_ins:
        setattr(module, name, stand_in)
    try:
        full, same = run()
    finally:
        for module, name, value in shipped:
            setattr(module, name, value)
    assert results == same, "the shortcut changed the results"
    return full, quick


def print_ratio(headline: str, without: str, full: float, quick: float) -> None:
    print(headline)
    width = max(len(without), len("as shipped")) + 1
    print(f"  {without + ':':<{width}} {full:8.2f} s")
    print(f"  {'as shipped:':<{width}} {quick:8.2f} s")
    print(f"  {'ratio:':<{width}} {full / quick:8.1f}x")


def chosen_chapters(doc: str, default: list[str]) -> list[str]:
    """The chapters named on the command line (``all``: every chapter; none: ``default``)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("chapters", nargs="*", default=default,
                        help=f"chapters, or all (default: {' '.join(default)})")
    chapters = parser.parse_args().chapters
    return chapter_names() if chapters == ["all"] else chapters
