"""The compiled program's collectives (HLO text, as ``jax.jit(f).lower(...).compile().as_text()`` prints it): what
the compiler placed in a ``jit`` program, how often each runs, and the collective-permutes a program did not state.

Why a package of its own: some questions ask students to write readers of this text. The grader's readers must not
answer those questions, so no grading kernel can read this folder (``grading.jail.isolation_paths`` denies it, as it
denies the reference programs; a learner's own machine can, a known limit in docs/security.md) and nothing a kernel
imports imports it: only the program runner, where compiled programs are read, and a student's own self-check
(``programs.run``) do. The stated reader (``collectives.inspect_text``), which ``course.comms`` shows students,
stays in ``collectives``.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from ..collectives import (
    _ELEMENT_TYPES,
    MAX_COUNT,
    MAX_DEPTH,
    Collective,
    UnknownCollective,
    UnreadableCollective,
    _all_if_none,
    _axes,
    _checked,
    _hops,
    _unravel,
    group_size,
)

_HLO_DTYPES = {hlo: stated for stated, hlo, _ in _ELEMENT_TYPES}
# The collectives a compiled program may run, as HLO names them (an async one as its ``-start`` half).
_PLACED = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
# Communicating instructions the census does not weigh; beyond these names, any instruction that carries a channel
# or device groups and is not one of ``_PLACED`` is unknown too (``collectives.UNKNOWN_STABLEHLO`` is the stated twin).
_KNOWN_HLO = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"}
_UNKNOWN_HLO = {"collective-broadcast", "send", "send-done", "recv", "recv-done", "ragged-all-to-all", "infeed",
                "outfeed", "all-reduce-scatter"}
_GROUPED_HLO = re.compile(r"\b(channel_id|replica_groups|source_target_pairs)=")


_COMPILED_SHAPE = re.compile(r"=\s*\(?\s*([a-z]+[0-9a-z]*)\[([\d,]*)\]")
_COMPILED_PAIRS = re.compile(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}")
_STATED_PAIRS = re.compile(r"source_target_pairs\s*=\s*dense<(\[[\[\]\d,\s]*\])>")


def _hlo_array(dtype: str, dims: str) -> tuple[tuple[int, ...], str]:
    """A compiled array's shape and element type (``DTYPE_BITS``' name) from HLO's ``c64[64,320]``; raises
    ``UnreadableCollective`` for an element type the census cannot weigh."""
    return _checked(tuple(int(d) for d in dims.split(",") if d), _HLO_DTYPES.get(dtype, dtype))


def _pairs(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(tuple(int(d) for d in p) for p in re.findall(r"(\d+)\s*,\s*(\d+)", text))


def ring_step(pairs: Sequence[Sequence[int]], mesh: Sequence[tuple[str, int]]) -> bool:
    """Whether every pair of a permute sends to a neighbour on the ring of one mesh axis, either way round: the
    device one place on or one place back along that axis, the same on every other."""
    shape = [n for _, n in mesh]

    def one_link(src: int, dst: int) -> bool:
        moved = [(b - a) % n for a, b, n in zip(_unravel(src, shape), _unravel(dst, shape), shape, strict=True)]
        steps = [min(d, n - d) for d, n in zip(moved, shape, strict=True) if d]
        return steps == [1]
    return bool(pairs) and all(one_link(src, dst) for src, dst in pairs)


def compiled_permutes(compiled_text: str, mesh: Sequence[tuple[str, int]],
                      width: str | None = None) -> list[tuple[Collective, bool, tuple[tuple[int, int], ...]]]:
    """Every collective-permute of a compiled program (HLO text) that runs (``compiled_runs``; one in a branch not
    counted runs 0 times and is left out), as a Collective run as often as it runs, with whether it is a ring step
    (``ring_step``) and its pairs. ``width``: as for ``compiled_collectives`` (CPU runs a bf16 permute in f32)."""
    out = []
    for line, runs in compiled_runs(compiled_text):
        found = _compiled_kind(line)
        pairs_m = _COMPILED_PAIRS.search(line)
        if found is None or found[0] != "collective-permute" or pairs_m is None or runs == 0:
            continue
        pairs = _pairs(pairs_m.group(1))
        shape_m = _COMPILED_SHAPE.search(line)
        if shape_m is None:
            raise UnreadableCollective("a collective-permute of it moves a value of no shape the course reads")
        dims, dtype = _hlo_array(shape_m.group(1), shape_m.group(2))
        groups = [list(p) for p in pairs]
        if not groups:  # no pairs: it moves nothing
            continue
        out.append((Collective("collective-permute", _axes(groups, mesh), _at_width(dtype, width), dims, 2, runs,
                               _hops(groups, mesh)), ring_step(pairs, mesh), pairs))
    return out


def placed_permutes(stated_text: str, compiled_text: str,
                    mesh: Sequence[tuple[str, int]]) -> list[tuple[Collective, bool]]:
    """The collective-permutes of a compiled program (HLO text) that its StableHLO (``stated_text``) does not state:
    those the compiler placed, for array operations outside a shard_map (``jnp.roll`` of a sharded array places
    one that sends every block k devices on). A compiled permute is the program's own where a stated one has the
    same pairs, however often it runs: a step stated once may run as several compiled ones (a loop unrolled, a
    jit-wrapped step called in a Python loop), which the stated census counts through their calls. One the compiler
    placed with the same pairs as a stated one shows in the count instead (``programs.added_collectives``), and in
    the compiled program's bytes (``compiled_permutes``). Each comes with whether it is a ring step; on CPU its dtype
    may be wider than the program's."""
    stated = {_pairs(m.group(1)) for m in _STATED_PAIRS.finditer(stated_text)}
    return [(c, ring) for c, ring, pairs in compiled_permutes(compiled_text, mesh) if pairs not in stated]


def compiled_census(hlo_text: str, keep: Callable[[str], bool] | None = None) -> dict[str, int]:
    """Collectives in compiled HLO text by kind (async ``-start`` halves counted once), each as often as it runs
    (``compiled_runs``: a loop's body is printed once, with its trip count beside it; a loop of unknown length counts
    once). On CPU bf16 appears as f32 and all-reduces may be combined. Raises ``UnknownCollective`` for a
    communicating instruction it does not know (``collective-broadcast``, ``send``, ``recv``...). ``keep``: which
    instruction lines count (as ``compiled_runs`` gives them), all where None."""
    counts: Counter[str] = Counter()
    for line, runs in compiled_runs(hlo_text):
        if keep is not None and not keep(line):
            continue
        found = _instruction(line)
        if found is None:
            continue
        op = found[1]
        half = op.rsplit("-", 1)[0] if op.endswith(("-start", "-done")) else ""
        known = op in _KNOWN_HLO or op.startswith("async-") or half in _KNOWN_HLO
        if op in _UNKNOWN_HLO or (not known and _GROUPED_HLO.search(line)):
            raise UnknownCollective(op)
        kind = _placed_kind(op)
        if kind == "collective-permute" and _NO_PAIRS.search(line):  # a permute of no pairs moves nothing
            continue
        if kind:
            counts[kind] = min(counts[kind] + (1 if runs is None else runs), MAX_COUNT)  # 0: a branch not taken
    return dict(counts)


# The JAX operations that write a collective (inside a shard_map, or as the transpose of one under jax.grad): XLA
# names each compiled instruction after the operation it came from, last in its ``op_name``. A collective named after
# any other operation (``dot_general``, ``sharding_constraint``) is one the compiler placed to run it on sharded arrays.
WRITTEN_BY = frozenset({"psum", "psum_invariant", "pmax", "pmin", "all_gather", "all_gather_invariant",
                        "reduce_scatter", "psum_scatter", "all_to_all", "ragged_all_to_all", "ppermute", "pshuffle",
                        "pbroadcast"})
# its ``op_name`` wherever it stands among the metadata's fields (``op_type`` may come first), quoted values read whole
_OP_NAME = re.compile(r'\bmetadata=\{(?:[^"}]|"(?:[^"\\]|\\.)*")*?\bop_name="((?:[^"\\]|\\.)*)"')


# What a collective's own lowering adds under its name in a shard_map's block (the reshapes and transposes around an
# all_to_all, a convert of its operand): data moved within the device's block, for which no compiler places one.
_LOWERED_WITH = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy", "reshape",
                           "transpose", "broadcast", "convert", "slice", "dynamic-slice", "dynamic-update-slice",
                           "concatenate", "iota", "add", "multiply", "maximum", "minimum", "and", "or"})
# The computations a shard_map's block is lowered to, before the compiler shards the program (Shardy's name).
_MANUAL_BODY = "xla.sdy.manual_computation_body"


def _parts(op_name: str) -> list[str]:
    """The names an instruction's ``op_name`` holds: one, or each of those XLA combined it from ``(a/psum:b/psum)``."""
    return [part.strip("()") for part in op_name.split(":")]


def _written(op_name: str, masks: frozenset[str] = frozenset()) -> bool:
    """Whether an instruction came from collectives alone: each part of its name ends in a collective's, and none is
    (or ends in) a name that another operation took (``masquerades``)."""
    return all(part.rsplit("/", 1)[-1] in WRITTEN_BY and not any(part == m or part.endswith("/" + m) for m in masks)
               for part in _parts(op_name))


def masquerades(stated_hlo: str) -> frozenset[str]:
    """The names that end in a collective's but that the program, before the compiler shards it (HLO text with its
    metadata, as ``lowered.compiler_ir("hlo").as_hlo_module().to_string()`` prints it), gives to an operation that
    is no collective: outside a shard_map's block any such operation, inside one any beyond what a collective's own
    lowering adds (``_LOWERED_WITH``). A primitive of the program's own named ``psum`` that lowers to a matmul is
    one: a collective the compiler places to run it on sharded arrays carries its name. Names are relative to their
    computation, as a compiled program's end in them."""
    computations, _, _ = _computations(stated_hlo, names=True)
    manual: set[str] = set()
    todo = [name for name in computations if name.startswith(_MANUAL_BODY)]
    while todo:  # a block's loops, branches and calls are the block's
        name = todo.pop()
        if name not in manual:
            manual.add(name)
            todo += [c for raw in computations[name] for m in _CALLED.finditer(without_named_text(raw))
                     for c in _NAMES.findall(m.group(2)) if c in computations]
    out = set()
    for name, lines in computations.items():
        for raw in lines:
            named, found = _OP_NAME.search(raw), _instruction(without_named_text(raw))
            if named is None or found is None or _placed_kind(found[1]):
                continue
            if (name not in manual or found[1] not in _LOWERED_WITH) and any(
                    part.rsplit("/", 1)[-1] in WRITTEN_BY for part in _parts(named.group(1))):
                out.update(_parts(named.group(1)))
    return frozenset(out)


# Shardy's record of a shard_map block, on the custom calls that enter and leave it: the mesh axes it is manual over
# (``axis_names``; the others it leaves to the compiler) and the mesh its shardings name; the module names the meshes.
_BLOCK_EDGE = re.compile(r'custom_call_target="xla\.sdy\.(?:GlobalToLocalShape|LocalToGlobalShape)"')
_MANUAL_AXES = re.compile(r'xla\.sdy\.manual_axes="#sdy<manual_axes\{([^}]*)\}>"')
_BLOCK_MESH = re.compile(r"<@([\w.\-]+)\s*,")
_MESHES = re.compile(r"([\w.\-]+)\s*=\s*#sdy\.mesh<\[([^\]]*)\]\s*>")  # one with device_ids is not read
_AXIS = re.compile(r'\\?"([^"\\]*)\\?"\s*=\s*(\d+)')
_METADATA = re.compile(r"\bmetadata=\{")
_AXIS_NAME = re.compile(r'\\?"([^"\\]*)\\?"')
# each device's coordinates on the axes a block leaves to the compiler, by its position in the mesh
Places = tuple[tuple[int, ...], ...]


def left_to_compiler(stated_hlo: str) -> tuple[Places, ...]:
    """For each shard_map block that leaves mesh axes to the compiler (a block with ``axis_names``), each device's
    place along those axes (its coordinates on them), read from the program before the compiler shards it (as for
    ``masquerades``). The compiler places collectives over those axes inside the block, named after the operation
    they serve (a primitive of the program's own named ``psum_scatter`` that lowers to slices, or the block's own
    ``all_gather`` over another axis), and no collective the program writes in that block can run over them: a
    compiled collective whose group holds devices at two places is the compiler's (``compiler_placed``). Devices
    are the mesh's positions, as compiled groups number them. A block whose mesh cannot be read (one with
    ``device_ids``) has no places: each device stands alone, so a reading that failed counts nothing as the
    student's. The compiled program does not say which block a collective came from (each is ``shard_map`` in its
    name, unless the program names it otherwise), so an axis one block leaves to the compiler is the compiler's in
    every block: a collective over Y written in a block manual over both axes, beside a block that leaves Y to the
    compiler, counts as the compiler's too."""
    header = next((line for line in stated_hlo.splitlines() if line.startswith("HloModule")), "")
    meshes = {name: [(a, int(n)) for a, n in _AXIS.findall(axes)] for name, axes in _MESHES.findall(header)}
    out: set[Places] = set()
    for raw in stated_hlo.splitlines():
        line = without_named_text(raw, _METADATA)  # Shardy's frontend attributes kept, the program's names dropped
        manual = _MANUAL_AXES.search(line)
        if not _BLOCK_EDGE.search(line) or manual is None:
            continue
        named = _BLOCK_MESH.search(line)
        axes = meshes.get(named.group(1)) if named else next(iter(meshes.values())) if len(meshes) == 1 else None
        shape = [n for _, n in axes or ()]
        auto = [i for i, (a, _) in enumerate(axes or ()) if a not in _AXIS_NAME.findall(manual.group(1))]
        if not axes or math.prod(shape) > _MAX_GROUP_IDS:
            out.add(())
        elif auto:
            out.add(tuple(tuple(_unravel(d, shape)[i] for i in auto) for d in range(math.prod(shape))))
    return tuple(sorted(out))


def _crosses(line: str, blocks: tuple[Places, ...], devices: int) -> bool:
    """Whether a compiled collective (an instruction line) runs over an axis a block leaves to the compiler: one of
    its groups (a permute's pairs) holds devices at two places of ``left_to_compiler``'s; a device past the
    places, or groups not read, at a place of its own."""
    pairs = _COMPILED_PAIRS.search(line)
    groups = [list(p) for p in _pairs(pairs.group(1))] if pairs else _compiled_groups(line, devices)
    if groups is None:
        groups = [list(range(devices))]
    return any(len({places[d] if d < len(places) else (-1, d) for d in g}) > 1 for places in blocks for g in groups)


def compiler_placed(hlo_text: str, masks: frozenset[str] = frozenset(),
                    blocks: tuple[Places, ...] = ()) -> dict[str, int]:
    """The collectives of a compiled program that no collective of the program wrote, by kind, as
    ``compiled_census`` counts them: those named after another operation (``WRITTEN_BY``), or after one that only
    bears a collective's name (``masks``, from ``masquerades``), and, whatever their name, those over an axis a
    shard_map block leaves to the compiler (``blocks``, from ``left_to_compiler``). A program's own names (scopes,
    functions) come before the operation's in ``op_name``, and cannot take its place. An instruction with no name
    is given the benefit of the doubt, unless its groups cross such an axis. So a collective the program states but
    the compiler removed (one behind a branch that never runs) no longer stands in for one the compiler placed."""
    placed = set()
    devices = _devices(hlo_text)
    for raw in hlo_text.splitlines():
        m, line = _OP_NAME.search(raw), without_named_text(raw)
        if (m is not None and not _written(m.group(1), masks)) or (
                blocks and _compiled_kind(line) and _crosses(line, blocks, devices)):
            placed.add(line)
    return compiled_census(hlo_text, keep=placed.__contains__) if placed else {}


def over_left_axes(hlo_text: str, blocks: tuple[Places, ...]) -> dict[str, int]:
    """The collectives of a compiled program over an axis a shard_map block leaves to the compiler (``blocks``,
    from ``left_to_compiler``), by kind: the compiler's (``compiler_placed``), placed in that block or outside it,
    which a message cannot call added "outside your shard_map"."""
    devices = _devices(hlo_text)
    return compiled_census(hlo_text, keep=lambda line: _crosses(line, blocks, devices)) if blocks else {}


def _devices(hlo_text: str) -> int:
    """The devices a compiled program runs on (its ``num_partitions``; 1 where it names none)."""
    partitions = _PARTITIONS.search(hlo_text[:2000])
    return int(partitions.group(1)) if partitions else 1


@functools.lru_cache(maxsize=4)  # the runner reads one compiled program several ways (census, bytes, permutes)
def compiled_runs(hlo_text: str) -> tuple[tuple[str, int | None], ...]:
    """Each instruction line of a compiled program (HLO text) with how many times it runs: a computation runs as
    often as the instructions that call it, a while loop's body and condition ``known_trip_count`` times per run of
    the loop (None, unknown, where XLA could not read the count), a conditional's branches as
    ``_costliest_per_kind`` reads them. Lines outside any computation, and computations ENTRY does not reach, count
    once: nothing the text holds goes unread. Lines come in the text's order."""
    computations, entry, loose = _computations(hlo_text)
    memo: dict[str, dict[str, int | None]] = {}
    devices, shapes = _devices(hlo_text), _result_shapes(hlo_text)

    def runs_of(name: str, depth: int) -> dict[str, int | None]:
        if name in memo:
            return memo[name]
        if depth > MAX_DEPTH:
            raise UnreadableCollective(f"its operations are nested more than {MAX_DEPTH} deep (loops, branches "
                                       "and calls inside one another), deeper than the course reads")
        memo[name] = {}  # a computation that calls itself (no HLO does) adds nothing more
        out: dict[str, int | None] = {}
        for line in computations[name]:
            found = _instruction(line)
            if found is None:
                continue
            _add(out, {line: 1}, 1)
            callees = [c for m in _CALLED.finditer(line) for c in _NAMES.findall(m.group(2)) if c in computations]
            if found[1] == "while":
                trip = _TRIP.search(line)
                for callee in callees:
                    _add(out, runs_of(callee, depth + 1), int(trip.group(1)) if trip else None)
            elif found[1] == "conditional":
                branches = [runs_of(c, depth + 1) for c in callees]
                if branches:
                    _add(out, _costliest_per_kind(branches, devices, shapes), 1)
            else:
                for callee in callees:
                    _add(out, runs_of(callee, depth + 1), 1)
        memo[name] = out
        return out

    reached = runs_of(entry, 0) if entry else {}
    passed = {line for name in memo for line in computations[name]}  # read from ENTRY, in a branch not counted too
    order = [line for name in computations for line in computations[name]] + loose
    return tuple((line, reached.get(line, 0 if line in passed else 1)) for line in dict.fromkeys(order))


@functools.lru_cache(maxsize=4)  # read by ``compiled_runs`` and ``_result_shapes`` alike: parsed once (never mutated)
def _computations(hlo_text: str, names: bool = False) -> tuple[dict[str, list[str]], str | None, list[str]]:
    """The computations of HLO text by name (their instruction lines, without the text a program names:
    ``without_named_text``, unless ``names``), the ENTRY computation's name, and the lines outside any computation
    (a single instruction, as the tests and a report read back may hold)."""
    computations: dict[str, list[str]] = {}
    entry, loose, current = None, [], None
    for raw in hlo_text.splitlines():
        line = without_named_text(raw)
        head = _HEAD.match(line)
        if head:
            current = computations.setdefault(head.group(2), [])
            entry = head.group(2) if head.group(1) else entry
        elif line.startswith("}"):
            current = None
        else:
            (loose if current is None else current).append(raw if names else line)
    return computations, entry, loose


# Fields of an instruction whose text the program chooses: ``metadata`` (scope and function names, source files) and
# ``frontend_attributes`` (``jax.experimental.xla_metadata``; a program that sets them is refused before it runs,
# ``programs.run``). A reader that matched a line through them read what the student wrote as XLA's own fields (a
# trip count, a permute of no pairs).
_NAMED_TEXT = re.compile(r"\b(?:metadata|frontend_attributes)=\{")


def without_named_text(line: str, fields: re.Pattern[str] = _NAMED_TEXT) -> str:
    """``line`` without its ``metadata={...}`` and ``frontend_attributes={...}`` (or the ``fields`` named), each
    read to its closing brace outside quoted strings (a string's escaped quotes and braces are its own); an unclosed
    one takes the line's end."""
    out, i = [], 0
    while (m := fields.search(line, i)) is not None:
        out.append(line[i:m.start()])
        depth, quoted, j = 0, False, m.end() - 1
        while j < len(line):
            ch = line[j]
            if quoted:
                j += ch == "\\"  # the escaped character is the string's
                quoted = ch != '"'
            elif ch == '"':
                quoted = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        i = j + 1
    return "".join(out) + line[i:]


def _add(into: dict[str, int | None], runs: Mapping[str, int | None], times: int | None) -> None:
    """Adds ``runs`` run ``times`` times each to ``into``; unknown (None) stays unknown, a count past MAX_COUNT is
    MAX_COUNT."""
    for line, n in runs.items():
        have = into.get(line, 0)
        into[line] = None if n is None or times is None or have is None else min(have + n * times, MAX_COUNT)


def _costliest_per_kind(branches: Sequence[Mapping[str, int | None]], devices: int,
                        shapes: Mapping[str, tuple[str, tuple[int, ...]]]) -> dict[str, int | None]:
    """A conditional's branches as they are counted and weighed: nobody can say which one runs (a predicate read from
    the data may be the same every time), so of each kind of collective, the branch whose collectives of that kind
    move the most bytes runs, and the other branches' collectives of that kind run 0 times. By bytes, not by count:
    a branch of several light collectives never stands in for one heavy one that may be the one run. A ring whose
    step holds the same permute in both branches counts it once. Matrix products are a kind too (``DOT``), weighed
    by their FLOPs (``matmul_flops``): the branch of the most compute runs."""
    merged: dict[str, int | None] = {line: 0 for runs in branches for line in runs}
    kinds = {_line_kind(line) for runs in branches for line in runs} - {None}
    for kind in sorted(kinds):  # type: ignore[type-var]
        best = max(branches, key=lambda runs: _branch_weight(runs, kind, devices, shapes))
        merged.update((line, n) for line, n in best.items() if _line_kind(line) == kind)
    return merged


def _permute_bytes(line: str) -> float:
    """Bytes a compiled permute sends in all, over every pair (each pair sends its source's block)."""
    pairs_m, shape_m = _COMPILED_PAIRS.search(line), _COMPILED_SHAPE.search(line)
    if pairs_m is None or shape_m is None:
        return 0.0
    dims, dtype = _hlo_array(shape_m.group(1), shape_m.group(2))
    return Collective("collective-permute", (), dtype, dims, 2, 1).operand_bytes * len(_pairs(pairs_m.group(1)))


def _line_kind(line: str) -> str | None:
    """The collective a line runs, ``DOT`` for a matrix product, else None: what a conditional's branches are
    weighed by (``_costliest_per_kind``)."""
    found = _instruction(line)
    return None if found is None else DOT if found[1] in (DOT, _REDUCE) else _placed_kind(found[1])


def _branch_weight(runs: Mapping[str, int | None], kind: str, devices: int,
                   shapes: Mapping[str, tuple[str, tuple[int, ...]]]) -> tuple[float, int]:
    """Bytes per device a branch's collectives of ``kind`` move (``Collective.bytes_per_device``: a result's size
    and its group's), or the FLOPs of its matrix products, each as often as it runs (one of unknown count as once),
    then how many run: the yardstick of ``_costliest_per_kind``. ``devices``: the program's, for a collective that
    names no groups."""
    moved, count = 0.0, 0
    for line, n in runs.items():
        if _line_kind(line) != kind:
            continue
        try:
            each = _dot_flops(line, shapes) if kind == DOT else _permute_bytes(line) \
                if kind == "collective-permute" else \
                sum(c.bytes_per_device for c in _line_collectives(line, 1, (("all", devices),), None))
        except UnreadableCollective:  # read, and refused, where the collective itself is read
            each = 0.0
        moved, count = moved + each * (n or 1), count + (n or 1)
    return moved, count


# A computation's first line: ``%name (params) -> type {``, ENTRY's with ``ENTRY`` before it.
_HEAD = re.compile(r"(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->.*\{\s*$")
# The computations an instruction calls: a loop's body and condition, a reduction's, fusion's or call's, a
# conditional's branches (one name, or a list of them in braces).
_CALLED = re.compile(r"\b(body|condition|to_apply|calls|branch_computations|true_computation|false_computation|"
                     r"called_computations)=(%?[\w.\-]+|\{[^}]*\})")
_NAMES = re.compile(r"%?([\w.\-]+)")
_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')


_NO_PAIRS = re.compile(r"source_target_pairs=\{\s*\}")
_PARTITIONS = re.compile(r"\bnum_partitions=(\d+)")


def _placed_kind(op: str) -> str | None:
    """The collective an HLO opcode runs (an async ``-start`` half as its collective; a ``-done`` half none)."""
    op = op.removesuffix("-start")
    return op if op in _PLACED else None


def _compiled_kind(line: str) -> tuple[str, str, str] | None:
    """(collective, result type, opcode) of an HLO instruction line that runs one, else None. The result type is
    read with balanced parentheses: a tuple of six or more arrays holds XLA's ``/*index=5*/`` comments."""
    found = _instruction(line)
    kind = _placed_kind(found[1]) if found else None
    return (kind, *found) if kind and found else None


_NAME = re.compile(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")
_ARRAY = re.compile(r"([a-z]+[0-9a-z]*)\[([\d,]*)\]")


def _instruction(line: str) -> tuple[str, str] | None:
    """An HLO instruction line's result type (a shape, or a tuple of them in parentheses) and opcode."""
    m = _NAME.match(line)
    if m is None:
        return None
    i = m.end()
    if line[i:i + 1] == "(":  # a tuple type, perhaps nested
        depth, j = 0, i
        while j < len(line):
            depth += (line[j] == "(") - (line[j] == ")")
            j += 1
            if depth == 0:
                break
    else:
        j = i
        while j < len(line) and not line[j].isspace():
            j += 1
    op = _OPCODE.match(line, j)
    return (line[i:j], op.group(1)) if op else None


def _compiled_groups(line: str, devices: int) -> list[list[int]] | None:
    """A compiled collective's device groups, in any of XLA's forms: explicit ``{{0,1},{2,3}}``, iota
    ``[2,4]<=[4,2]T(1,0)`` and Shardy's ``mesh['axis_0'=2,'axis_1'=4] {'axis_1'}``; all devices where none are
    written; None for a form not read here (or not read as groups of devices: odd iota shapes and transposes,
    groups of no devices), which the caller weighs as one group of every device."""
    m = re.search(r"replica_groups=(\{[\d,{}\s]*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?|mesh\[[^\]]*\]\s*\{[^}]*\})",
                  line)
    if m is None:
        return None if "replica_groups=" in line else [list(range(devices))]
    try:
        groups = _groups_of(m.group(1), devices)
    except (ValueError, IndexError, TypeError, MemoryError):  # a form numpy cannot reshape or transpose as written
        return None
    return groups if groups and all(groups) else None


_MAX_GROUP_IDS = 2**20  # device ids of a compiled iota form past this: no machine's groups, left unread


def _groups_of(text: str, devices: int) -> list[list[int]] | None:
    """``_compiled_groups``' reading of the text of one form (numpy raises on forms it cannot reshape)."""
    import numpy as np

    if text.startswith("{"):
        groups = [[int(d) for d in g.split(",") if d.strip()] for g in re.findall(r"\{([\d,\s]*)\}", text[1:-1])]
        return _all_if_none(groups, devices)
    if text.startswith("["):
        shape_m = re.match(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
        out_shape = [int(d) for d in shape_m.group(1).split(",")]
        dims = [int(d) for d in shape_m.group(2).split(",")]
        if math.prod(dims) > _MAX_GROUP_IDS:
            return None
        ids = np.arange(math.prod(dims)).reshape(dims)
        if shape_m.group(3):
            ids = ids.transpose([int(d) for d in shape_m.group(3).split(",")])
        return ids.reshape(out_shape).tolist() if math.prod(out_shape) == ids.size else None
    axes = re.findall(r"'([^']*)'\s*=\s*(\d+)", text[:text.index("]")])
    over = re.findall(r"'([^']*)'(?!\s*=)", text[text.index("]"):])
    names = [a for a, _ in axes]
    if any(":" in a or a not in names for a in over) or "(" in text[text.index("]"):]:
        return None  # sub-axes: not read here
    if math.prod(int(n) for _, n in axes) > _MAX_GROUP_IDS:
        return None
    ids = np.arange(math.prod(int(n) for _, n in axes)).reshape([int(n) for _, n in axes] or [1])
    inner = [names.index(a) for a in over]
    ids = ids.transpose([d for d in range(len(names)) if d not in inner] + inner)
    return ids.reshape(-1, math.prod(int(axes[d][1]) for d in inner) if inner else 1).tolist()


def compiled_collectives(hlo_text: str, mesh: Sequence[tuple[str, int]], width: str | None = None) -> list[Collective]:
    """The collectives of a compiled program (HLO text) other than collective-permutes (``compiled_permutes`` reads
    those), each run as often as ``compiled_runs`` says, with its operand as each device holds it, worked out from
    the result's shape: what the compiler placed in a ``jit`` program, to weigh against the model's traffic. A
    combined all-reduce of several arrays is one collective per array. ``width``: the widest float dtype of the
    question (``_at_width``)."""
    out = []
    for line, runs in compiled_runs(hlo_text):
        if runs != 0:
            out.extend(_line_collectives(line, runs, mesh, width))
    return out


def _line_collectives(line: str, runs: int | None, mesh: Sequence[tuple[str, int]],
                      width: str | None) -> list[Collective]:
    """The collectives (not permutes) one compiled instruction line runs, each ``runs`` times."""
    found = _compiled_kind(line)
    if found is None or found[0] == "collective-permute":
        return []
    devices = math.prod(n for _, n in mesh) or 1
    kind, result, op = found
    arrays = _ARRAY.findall(result)
    if op == "all-gather-start":  # (operands..., results...)
        arrays = arrays[len(arrays) // 2:]
    groups = _compiled_groups(line, devices)
    n = group_size(groups) if groups else devices
    axes = _axes(groups, mesh) if groups else tuple(a for a, _ in mesh)
    dim_m = re.search(r"dimensions=\{(\d+)\}", line)
    dim = int(dim_m.group(1)) if dim_m else 0
    out = []
    for hlo_dtype, dims in arrays:
        shape, dtype = _hlo_array(hlo_dtype, dims)
        dtype = _at_width(dtype, width)
        shape = list(shape) or [1]
        d = min(dim, len(shape) - 1)
        if kind == "all-gather":  # the result holds n operands
            shape[d] = max(shape[d] // max(n, 1), 1)
        elif kind == "reduce-scatter":  # the operand holds n results
            shape[d] *= n
        out.append(Collective(kind, axes, dtype, tuple(shape), n, runs))
    return out


def _at_width(dtype: str, width: str | None) -> str:
    """A compiled collective's element type as the program wrote it: XLA on CPU runs a bf16 or f16 collective in
    f32, so an f32 one of a question whose widest float is narrower counts at that width. A wider float than f32
    (f64) is the program's own choice, and counts at its own width."""
    return width if dtype == "f32" and width in _NARROW else dtype


_NARROW = {"bf16", "f16"}


# The compute a program does, as the course counts it (Chapter 1's 2 * M * K * N of a matrix product): the FLOPs of
# its ``dot`` instructions, and of its ``reduce`` instructions as a product written as a multiply and a sum (the
# ``reduce`` of an [M, K, N] array of products: 2 * M * K * N), each as often as it runs. XLA's own ``cost_analysis``
# counts a loop's body once, whatever its trip count, so a ring written as a ``fori_loop`` would read as a seventh of
# the same ring unrolled; here loops and branches are read as ``compiled_runs`` reads them for the collectives. Other
# elementwise work is not counted: it is never what makes a sharded program slow, and an honest ring's masks and
# adds would be counted against it.
DOT = "dot"
_REDUCE = "reduce"
_DEFINED = re.compile(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*([a-z]+[0-9a-z]*)\[([\d,]*)\]")
_LHS = re.compile(r"\b(?:dot|reduce)\(\s*(?:([a-z]+[0-9a-z]*)\[([\d,]*)\]\S*\s+)?%?([\w.\-]+)")
_CONTRACTING = re.compile(r"\blhs_contracting_dims=\{([\d,]*)\}")


@functools.lru_cache(maxsize=4)  # one compiled program is read several ways (``compiled_runs``, ``matmul_flops``)
def _result_shapes(hlo_text: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each instruction's result element type and shape by its name (an array's; a tuple's is not kept): a compiled
    ``dot`` names its operands without their types."""
    shapes: dict[str, tuple[str, tuple[int, ...]]] = {}
    for lines in _computations(hlo_text)[0].values():
        for line in lines:
            m = _DEFINED.match(line)
            if m:
                shapes[m.group(1)] = (m.group(2), tuple(int(d) for d in m.group(3).split(",") if d))
    return shapes


def _dot_flops(line: str, shapes: Mapping[str, tuple[str, tuple[int, ...]]]) -> float:
    """FLOPs of one run of a ``dot`` line: 2 times its result's elements times the length of what it contracts; of
    a ``reduce`` line of floating-point numbers, 2 times its (first) operand's elements (a reduction of truth values
    or integers, such as the bounds checks of an ``.at[...].set`` or an argmax's indices, is no product); 0 for any
    other line, or one whose operand cannot be found."""
    found = _instruction(line)
    if found is None or found[1] not in (DOT, _REDUCE):
        return 0.0
    result, lhs, contracting = _ARRAY.match(found[0]), _LHS.search(line), _CONTRACTING.search(line)
    typed = None if lhs is None else (lhs.group(1), tuple(int(d) for d in lhs.group(2).split(",") if d)) \
        if lhs.group(1) else shapes.get(lhs.group(3))
    if typed is None:
        return 0.0
    dtype, dims = typed
    if found[1] == _REDUCE:
        return 2.0 * math.prod(dims) if dtype.startswith(("f", "bf", "c")) else 0.0
    if result is None:
        return 0.0
    axes = [int(a) for a in contracting.group(1).split(",") if a] if contracting else []
    if any(a >= len(dims) for a in axes):
        return 0.0
    return 2.0 * math.prod(int(d) for d in result.group(2).split(",") if d) * math.prod(dims[a] for a in axes)


def matmul_flops(hlo_text: str) -> tuple[float, bool]:
    """FLOPs per device of a compiled program's matrix products over one run (its HLO text is one device's program),
    and whether every count is known: one in a loop of unknown length is counted once, as a collective there is,
    which is as few as it may run (a student's waste there is still seen; a model's count is no yardstick)."""
    shapes = _result_shapes(hlo_text)
    total, known = 0.0, True
    for line, runs in compiled_runs(hlo_text):
        flops = _dot_flops(line, shapes)
        known = known and not (flops and runs is None)
        total += flops * (1 if runs is None else runs)
    return total, known
