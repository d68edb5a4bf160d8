"""The collective inspector: which collectives a program runs, over which mesh axes, how often, and
how many bytes each moves per device, read from the program's lowered StableHLO.

Why StableHLO and not the compiled program: on CPU, XLA converts bf16 collectives to f32 (doubling
their bytes), combines all-reduces into tuples and replaces reduce-scatters by all-reduce + slice.
A ``shard_map`` program states its collectives explicitly, in its own dtypes, before any of that.
Loops are counted with their trip counts (a ``scan`` body runs ``length`` times). Programs whose
collectives are chosen by the compiler (``jit`` with shardings) have none in StableHLO; for those
``compiled_census`` counts the compiled program's, with the caveats above.

Bytes per device follow the book's ring algorithms (Part 3): with N devices in the group and an
operand of S bytes per device, an all-gather receives (N-1)*S, a reduce-scatter and an all-to-all
move (N-1)/N*S, an all-reduce 2*(N-1)/N*S, a collective-permute sends S.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

KINDS = {"stablehlo.all_gather": "all-gather", "stablehlo.reduce_scatter": "reduce-scatter",
         "stablehlo.all_reduce": "all-reduce", "stablehlo.all_to_all": "all-to-all",
         "stablehlo.collective_permute": "collective-permute"}
DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "ui8": 1, "i16": 2, "i32": 4,
               "ui32": 4, "i64": 8, "f8E4M3FN": 1, "f8E5M2": 1}
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([A-Za-z0-9]+)>")
_SCALAR = re.compile(r"dense<(-?\d+)>")
# The result's shape is one token, or a tuple of shapes where XLA combined several collectives into one.
_COMPILED = re.compile(r"=\s*(?:\([^()=]*\)|\S+)\s+(all-reduce|all-gather|reduce-scatter|all-to-all|"
                       r"collective-permute)(?:-start)?\(")


@dataclass(frozen=True)
class Collective:
    kind: str  # "all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute"
    axes: tuple[str, ...]  # mesh axes the devices of one group differ along
    dtype: str
    operand_shape: tuple[int, ...]  # per device
    group_size: int
    count: int | None  # executions, loop trip counts included; None when a loop's count is unknown

    @property
    def operand_bytes(self) -> int:
        return math.prod(self.operand_shape) * DTYPE_BYTES.get(self.dtype, 4)

    @property
    def bytes_per_device(self) -> float:
        """Bytes one device sends (or receives) per execution, by the book's ring algorithms."""
        n, s = self.group_size, self.operand_bytes
        return {"all-gather": (n - 1) * s, "reduce-scatter": (n - 1) / n * s, "all-to-all": (n - 1) / n * s,
                "all-reduce": 2 * (n - 1) / n * s, "collective-permute": s}[self.kind]

    def describe(self) -> str:
        shape = ",".join(map(str, self.operand_shape))
        over = "+".join(self.axes) or "no axis"
        what = f"{self.kind} of {self.dtype}[{shape}] over {over} ({self.bytes_per_device:,.0f} bytes per device each"
        if self.count is None:  # inside a while loop whose trip count depends on the data
            return f"{what}, once per step of a loop whose length depends on the data)"
        return f"{self.count} x {what})"


def _shape_dtype(type_text: str) -> tuple[tuple[int, ...], str]:
    m = _TENSOR.search(type_text)
    if not m:
        return (), "?"
    dims = tuple(int(d) for d in m.group(1).split("x") if d)
    return dims, m.group(2)


def _axes(groups: list[list[int]], mesh: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """Mesh axes along which the device ids of a group (logical, row-major over the mesh) differ."""
    shape = [n for _, n in mesh]
    names = [a for a, _ in mesh]
    varying: set[int] = set()
    for group in groups:
        coords = [_unravel(i, shape) for i in group]
        for dim in range(len(shape)):
            if len({c[dim] for c in coords}) > 1:
                varying.add(dim)
    return tuple(names[d] for d in sorted(varying))


def _unravel(index: int, shape: list[int]) -> tuple[int, ...]:
    out = []
    for n in reversed(shape):
        out.append(index % n)
        index //= n
    return tuple(reversed(out))


def _attr(op, name: str) -> str | None:
    attrs = op.attributes
    return str(attrs[name]) if name in attrs else None


def _dense_list(text: str) -> list:
    """``dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>`` -> [[0, 1], [2, 3]] (a splat ``dense<0>`` -> [[0]])."""
    m = re.search(r"dense<(.*?)>\s*:", text)
    body = m.group(1) if m else "[[0]]"
    return ast.literal_eval(body) if body.startswith("[") else [[int(body)]]


def _constant(value) -> int | None:
    owner = getattr(value, "owner", None)
    op = getattr(owner, "operation", owner)
    if op is None or getattr(op, "name", "") != "stablehlo.constant":
        return None
    m = _SCALAR.search(str(op.attributes["value"]))
    return int(m.group(1)) if m else None


def _trip_count(while_op) -> int | None:
    """jax's loops (scan, fori_loop) count an index from a constant to a constant with LT."""
    cond = while_op.regions[0].blocks[0]
    for op in cond.operations:
        op = op.operation
        if op.name == "stablehlo.compare" and "LT" in (_attr(op, "comparison_direction") or ""):
            lhs, rhs = op.operands
            args = list(cond.arguments)
            if lhs in args:
                start = _constant(while_op.operands[args.index(lhs)])
                stop = _constant(rhs)
                if start is not None and stop is not None:
                    return max(stop - start, 0)
    return None


def inspect_text(module_text: str, mesh: Sequence[tuple[str, int]]) -> list[Collective]:
    """Collectives of a StableHLO module (as text), aggregated by kind, axes, dtype and shape."""
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    with jmlir.make_ir_context():
        module = ir.Module.parse(module_text)
        funcs = {}
        for op in module.body.operations:
            name = _attr(op.operation, "sym_name")
            if name:
                funcs[name.strip('"')] = op.operation
        found: Counter = Counter()
        unknown: set = set()

        def walk(op, times: int | None, depth: int) -> None:
            if depth > 64:
                return
            name = op.name
            if name in KINDS:
                shape, dtype = _shape_dtype(str(op.operands[0].type))
                groups_text = _attr(op, "replica_groups") or _attr(op, "source_target_pairs") or "dense<[[0]]>"
                groups = _dense_list(groups_text)
                axes = _axes(groups, mesh)
                size = len(groups[0]) if name != "stablehlo.collective_permute" else 2
                key = (KINDS[name], axes, dtype, shape, size)
                if times is None:
                    unknown.add(key)
                else:
                    found[key] += times
            if name == "stablehlo.while":
                trip = _trip_count(op)
                inner = None if times is None or trip is None else times * trip
                for region in op.regions:
                    for block in region.blocks:
                        for child in block.operations:
                            walk(child.operation, inner, depth + 1)
                return
            if name == "func.call":
                callee = (_attr(op, "callee") or "").lstrip("@").strip('"')  # @"f_<lambda>" is quoted
                if callee in funcs:
                    walk(funcs[callee], times, depth + 1)
                return
            for region in op.regions:
                for block in region.blocks:
                    for child in block.operations:
                        walk(child.operation, times, depth + 1)

        main = funcs.get("main") or next(iter(funcs.values()), None)
        if main is not None:
            walk(main, 1, 0)
    out = [Collective(k, a, d, s, n, c) for (k, a, d, s, n), c in found.items()]
    out += [Collective(k, a, d, s, n, None) for (k, a, d, s, n) in unknown if (k, a, d, s, n) not in found]
    return sorted(out, key=lambda c: (c.kind, c.axes, c.operand_shape))


def census(collectives: Sequence[Collective]) -> dict[str, int]:
    """Executions per kind (a collective in a loop of unknown length counts once)."""
    counts: Counter = Counter()
    for c in collectives:
        counts[c.kind] += c.count if c.count is not None else 1
    return dict(counts)


def compiled_census(hlo_text: str) -> dict[str, int]:
    """Collectives in compiled HLO text by kind (async ``-start`` halves counted once); loops are
    not unrolled, and on CPU bf16 appears as f32 and all-reduces may be combined."""
    return dict(Counter(m.group(1) for m in _COMPILED.finditer(hlo_text)))
