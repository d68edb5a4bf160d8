"""The book's symbols, declared once for the whole course.

Every symbol is a positive real (``positive=True``): sizes, rates and times are positive, and sympy
only simplifies ``sqrt(4*B**2)`` to ``2*B`` when it knows that. Both the student's side and the
grader's side must use these same objects: ``Symbol('B') != Symbol('B', positive=True)``. So they live
in the core, which the formula parser uses, and notebooks import them as ``course.symbols``.

Whether a symbol is a count (an integer >= 2, such as a device count) is not an assumption on the
symbol but a property of the question that uses it, because the book reuses letters (``N`` is a
vector length in Part 1 and a device count in Part 3).
"""

from __future__ import annotations

import keyword
import re
import string

import sympy as sp

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")


def symbol(name: str) -> sp.Symbol:
    """The course's positive symbol called ``name`` (the same object on every call)."""
    if not _NAME.match(name) or keyword.iskeyword(name):
        raise ValueError(f"{name!r} is not a valid symbol name (a letter, then letters, digits or _)")
    return sp.Symbol(name, positive=True)


def symbols(names: str) -> tuple[sp.Symbol, ...]:
    """Several symbols from a space-separated string: ``B, D, F = symbols("B D F")``."""
    return tuple(symbol(n) for n in names.split())


# Single capitals as the book uses them: B batch (tokens), D model width, F feed-forward width,
# N a vector length or device count, C peak FLOP/s, W bandwidth (bytes/s), L layers, T sequence
# length, K key/value heads, H head dimension, V vocabulary, X, Y, Z mesh axis sizes, and so on.
(A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q, R, S, T, U, V, W, X, Y, Z) = symbols(
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z"
)
# Part 1 (rooflines): FLOP and byte counts, the int8 peak, bandwidths, matmul tiles. Bandwidths in
# bytes/s: W_link one inter-chip link in one direction; W_hbm a chip's HBM; W_ici the book's ICI
# bandwidth of one link counted in both directions, as its tables state it (W_ici = 2 W_link).
FLOPs, Bytes, C8, W_link, W_hbm, W_ici = symbols("FLOPs Bytes C8 W_link W_hbm W_ici")
bm, bk, bn, tm, tn, tk = symbols("bm bk bn tm tn tk")

SINGLE_CAPITALS = list(string.ascii_uppercase)
__all__ = ["symbol", "symbols", *SINGLE_CAPITALS, "FLOPs", "Bytes", "C8", "W_link", "W_hbm", "W_ici",
           "bm", "bk", "bn", "tm", "tn", "tk"]
