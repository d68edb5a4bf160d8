"""Chapter 9, Profiling: every graded question of the chapter, as records with references.

Book: Part 9 "How to Profile TPU Programs", https://jax-ml.github.io/scaling-book/profiling/
Labels follow the syllabus: E1-E7 the chapter's worked examples, Q1 and Q2 its problems (Q2 in its
CPU variant: a mock transformer layer compiled on the simulated mesh), CX1-CX5 coding exercises. CX6 and
CX7 are programs graded by what they compile to: the profile's feed-forward block ending in its
reduce-scatter, and Q2's attention with its sharding constraints fixed (the book's Q2 asks for that fix).
CX8 reads a compiled program's collectives, fusions and memory back from its text: the grader's cases are
the chapter's own programs compiled at other sizes (kept in ``solutions/ch09_programs.json``), and the
notebook points it at the student's CX6 and CX7 programs.
The book's E8 is a reading of a TPU memory-profile figure; the course cannot reproduce that figure
and grades ``memory_analysis()`` of a program on the simulated mesh instead (CX5).

Where the answer is a fact of a compiled program (a shape, a collective, its bytes), the reference is
computed from the program's definition with the course's formulas, never read back from XLA's output,
so it does not depend on the machine; ``tests/chapters/test_ch09.py`` compiles every program and
checks that XLA (jax 0.10.2, CPU) prints what the formulas say. The HLO texts the parsing exercises
run on are public inputs: lines written in the grammar of the book's TPU profiles (tiling and memory
spaces exist only there), and programs compiled once on 8 simulated CPU devices with jax 0.10.2,
kept in ``solutions/ch09_listings.hlo`` with their metadata (which names source files) removed.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from fractions import Fraction
from pathlib import Path

import numpy as np

import course
import course.symbols as sym
from autograder.kinds.function import vary as rescale
from autograder.numbers import round_figures
from course.symbols import B, C, D, F, N, T
from course.timeline import Op
from solutions._kit import *  # noqa: F403 (the authoring vocabulary: solutions/_kit.py)
from solutions._kit import NamedSharding, P, make_mesh

V5E = hw.TPU_V5E
SECTION = "profiling/"
STACK = SECTION + "#a-thousand-foot-view-of-the-tpu-software-stack"
READ_OP = SECTION + "#how-to-read-an-xla-op"
EXAMPLE = SECTION + "#looking-at-a-realish-example-profile"
MEMORY = SECTION + "#memory-profile"
PROBLEMS = SECTION + "#worked-problems"
COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")

# --- reading HLO text (pure Python): the exercises' answers, read_instruction, replica_groups and census,
# and split_instruction with its parts, which the wrong answers, the drawn cases and the tests use ----------
# HLO dtypes and their bytes per element (sub-byte types such as s4 do not occur in the probes).
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "s16": 2, "u16": 2, "f16": 2,
               "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8}
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\](\{[^{}]*\})?")
_OPEN, _CLOSE = "([{", ")]}"


def _group_end(text: str, start: int) -> int:
    """Index just past the bracket group that opens at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _OPEN:
            depth += 1
        elif text[i] in _CLOSE:
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError(f"unbalanced brackets in {text[start:start + 60]!r}")


def split_instruction(line: str) -> tuple[str, str, str, str, str]:
    """``[ROOT] %name = TYPE opcode(OPERANDS), ATTRIBUTES`` -> (name, type, opcode, operands, attributes).
    TYPE is an array type such as ``bf16[8,128]{1,0:T(8,128)(2,1)S(1)}`` or a tuple of them in parentheses."""
    m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*", line)
    if not m:
        raise ValueError(f"not an HLO instruction: {line[:60]!r}")
    i = m.end()
    if line[i] == "(":
        end = _group_end(line, i)
    else:
        end = i
        while end < len(line) and not line[end].isspace():
            end = _group_end(line, end) if line[end] in _OPEN else end + 1
    type_text = line[i:end]
    op = re.match(r"\s*([\w\-]+)\(", line[end:])
    if not op:
        raise ValueError(f"no opcode after the type in {line[:60]!r}")
    open_at = end + op.end() - 1
    close = _group_end(line, open_at)
    return m.group(1), type_text, op.group(1), line[open_at + 1:close - 1], line[close:].lstrip(", ")


def arrays(type_text: str) -> list[tuple[str, tuple[int, ...], str]]:
    """(dtype, shape, layout text) of every array in a type (one, or several for a tuple)."""
    return [(d, tuple(int(n) for n in s.split(",") if n), lay or "") for d, s, lay in _ARRAY.findall(type_text)]


def layout(text: str) -> tuple[tuple[int, ...], list[tuple[int, ...]], int]:
    """``{2,1,0:T(8,128)(2,1)S(1)}`` -> minor-to-major order (2, 1, 0), tiles [(8, 128), (2, 1)], memory
    space 1. No layout, no tiles, or no S(n) (HBM on a TPU; the only space a CPU has) give (), [], 0."""
    body = text.strip("{}")
    order, _, rest = body.partition(":")
    minor_to_major = tuple(int(n) for n in order.split(",") if n.strip())
    tiles = [tuple(int(n) for n in t.split(",")) for t in re.findall(r"T\(([0-9,]+)\)", rest)]
    space = re.search(r"S\((\d+)\)", rest)
    return minor_to_major, tiles, int(space.group(1)) if space else 0


def padded_elements(shape: tuple[int, ...], minor_to_major: tuple[int, ...], tile: tuple[int, ...]) -> int:
    """Elements an array occupies once tiled: the dimensions in memory order (most major first) have
    their minor-most len(tile) dimensions rounded up to multiples of the tile. Inner tiles such as
    bf16's (2, 1) subdivide the outer tile and add no padding where they divide it."""
    order = list(reversed(minor_to_major)) or list(range(len(shape)))
    physical = [shape[d] for d in order]
    k = min(len(tile), len(physical))
    for j in range(k):
        n, t = physical[len(physical) - k + j], tile[len(tile) - k + j]
        physical[len(physical) - k + j] = -(-n // t) * t
    return math.prod(physical)


def read_instruction(line):
    """CX1: (result bytes, result bytes once padded to its tiles, memory space of the result, number of
    operands) of one HLO instruction. A tuple result counts all its arrays; operands are the
    instructions it reads (``%name`` references), so parameter(0) and constant(...) have none."""
    rhs = line.split("=", 1)[1].lstrip()
    i = 0  # the result type ends at the first space outside brackets: one array, or a tuple in parentheses
    if rhs[0] == "(":
        i = _group_end(rhs, 0)
    else:
        while not rhs[i].isspace():
            i = _group_end(rhs, i) if rhs[i] in "([{" else i + 1
    result, rest = rhs[:i], rhs[i:].lstrip()
    start = rest.index("(")
    operands = rest[start:_group_end(rest, start)]
    plain = padded = 0
    spaces = []
    for dtype, dims, lay in re.findall(r"([a-z][a-z0-9]*)\[([0-9,]*)\](\{[^{}]*\})?", result):
        shape = [int(n) for n in dims.split(",") if n]
        order, _, extra = lay.strip("{}").partition(":")  # "{1,0:T(8,128)S(1)}": order, then tiles and space
        major_first = [shape[int(d)] for d in reversed(order.split(",")) if d] or shape
        tiles = re.findall(r"T\(([0-9,]+)\)", extra)
        if tiles:  # the outer tile pads the minor-most dimensions in memory order
            tile = [int(n) for n in tiles[0].split(",")]
            for k in range(1, len(tile) + 1):
                major_first[-k] = math.ceil(major_first[-k] / tile[-k]) * tile[-k]
        plain += DTYPE_BYTES[dtype] * math.prod(shape)
        padded += DTYPE_BYTES[dtype] * math.prod(major_first)
        space = re.search(r"S\((\d+)\)", extra)
        spaces.append(int(space.group(1)) if space else 0)
    return plain, padded, spaces[0], operands.count("%")


def replica_groups(line):
    """CX2: (devices per group, number of groups, the ids of the group holding device 0 in increasing
    order) from a collective's replica groups, in any of the forms this JAX version prints: explicit
    lists ``{{0,1},{2,3}}``, iota ``[2,2]<=[4]`` (optionally transposed), mesh ``mesh['x'=2,'y'=2] {'y'}``,
    or StableHLO's ``dense<[[0, 1], [2, 3]]>``."""
    rest = re.split(r"replica_groups\s*=\s*", line, maxsplit=1)[1]
    if rest.startswith("mesh"):  # devices row-major over the mesh; a group varies only the listed axes
        axes = re.findall(r"'([^']+)'=(\d+)", rest[:rest.index("]")])
        chosen = re.findall(r"'([^']+)'", rest[rest.index("{"):rest.index("}")])
        names, sizes = [a for a, _ in axes], [int(n) for _, n in axes]
        ids = np.arange(math.prod(sizes)).reshape(sizes)
        order = [i for i, a in enumerate(names) if a not in chosen] + [i for i, a in enumerate(names) if a in chosen]
        size = math.prod(sizes[i] for i, a in enumerate(names) if a in chosen)
        groups = ids.transpose(order).reshape(-1, size)
    elif rest.startswith("["):  # iota: [G,S]<=[dims] reshapes arange(prod(dims)), transposed by T(perm)
        m = re.match(r"\[(\d+),(\d+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", rest)
        dims = [int(n) for n in m.group(3).split(",")]
        ids = np.arange(math.prod(dims)).reshape(dims)
        if m.group(4):
            ids = ids.transpose([int(n) for n in m.group(4).split(",")])
        groups = ids.reshape(int(m.group(1)), int(m.group(2)))
    else:  # explicit groups: {{...},{...}} or dense<[[...], [...]]>
        body = rest[:rest.index("}}") + 2] if rest.startswith("{") else rest[:rest.index("]]") + 2]
        groups = np.array([[int(n) for n in g.split(",")] for g in re.findall(r"[{\[]([0-9, ]+)[}\]]", body)])
    first = sorted(int(i) for i in next(g for g in groups if 0 in g))
    return len(groups[0]), len(groups), first


def census(text, kind):
    """CX3: how many collectives of ``kind`` a compiled program runs, and the bytes of their results
    (summed over the arrays of tuple results). An asynchronous pair (``kind-start`` ... ``kind-done``)
    counts once, at its start; names and operands that merely contain the word do not count."""
    count = nbytes = 0
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%[\w.\-]+\s*=\s*", line)
        if not m:
            continue  # headers, braces, blank lines
        rhs = line[m.end():]
        i = _group_end(rhs, 0) if rhs[0] == "(" else rhs.index(" ")  # past the result type
        opcode = rhs[i:].lstrip().split("(", 1)[0]
        if opcode in (kind, kind + "-start"):
            count += 1
            nbytes += read_instruction(line)[0]
    return count, nbytes


# --- typical wrong parsers (each must fail) -----------------------------------------------------------
def cx1_bf16_as_four_bytes(line: str):
    plain, padded, space, operands = read_instruction(line)
    widen = 2.0 if " bf16[" in " " + split_instruction(line)[1] else 1.0
    return plain * widen, padded * widen, space, operands


def cx1_tiles_logical_order(line: str):
    """Pads the last dimensions as written, ignoring the layout's minor-to-major order."""
    _, type_text, _, operands, _ = split_instruction(line)
    plain = padded = 0.0
    for dtype, shape, lay in arrays(type_text):
        _, tiles, _ = layout(lay)
        plain += DTYPE_BYTES[dtype] * math.prod(shape)
        padded += DTYPE_BYTES[dtype] * (padded_elements(shape, (), tiles[0]) if tiles else math.prod(shape))
    return plain, padded, float(layout(arrays(type_text)[0][2])[2]), float(operands.count("%"))


def cx2_ignores_transpose(line: str):
    """Reads an iota list as if it had no T(...) part."""
    return replica_groups(re.sub(r"(<=\[[0-9,]+\])T\([0-9,]+\)", r"\1", line))


def cx3_counts_every_mention(text: str, kind: str):
    """Counts the word anywhere: operand names such as %all-reduce.1 and -done halves too."""
    count = text.count(" " + kind + "(") + text.count("%" + kind)
    return float(count), 0.0


def cx3_counts_done_too(text: str, kind: str):
    count, nbytes = census(text, kind)
    done = sum(1 for line in text.splitlines() if f" {kind}-done(" in line)
    return count + done, nbytes


# --- the programs the chapter reads (compiled once: jax 0.10.2, 8 simulated CPU devices) ------------------
# x f32[8, 2048] @ P('X', 'Y') times W f32[2048, 8192] @ P('Y', None) on an Auto (X=2, Y=4) mesh, jitted
# with out_shardings P('X', None) (ROWS) and P('X', 'Y') (BLOCKS): the syllabus's CX3 program.
CX3_X, CX3_W, CX3_MESH = (8, 2048), (2048, 8192), (("X", 2), ("Y", 4))
# The syllabus's CX4 program: a data-parallel two-layer MLP whose hidden activation is replicated.
CX4_X, CX4_W1, CX4_W2 = (64, 128), (128, 256), (256, 128)
# Q1 on the simulated mesh: the book's two matmuls, 8-way model parallel, shrunk to D = 512, F = 4 D.
Q1_CPU = dict(B=8, D=512, F=2048)
# Q2's mock layer: B sequences of T tokens, width D, MLP width F, N heads of H; (X=4 data) x (Y=2 model).
# A student is dealt B, T and F (autograder/variants.py); MOCK holds the book's CPU variant, their first values.
Q2_B, Q2_T, Q2_F = (16, 24, 40), (128, 64), (1024, 2048, 4096)
MOCK = dict(B=Q2_B[0], T=Q2_T[0], D=256, F=Q2_F[0], N=8, H=32)
MOCK_MESH = (("X", 4), ("Y", 2))
# The compiled programs the parsing exercises read (and a GPU-style excerpt): a data file, one listing each.
LISTINGS_FILE = Path(__file__).with_name("ch09_listings.hlo")


def read_listings(path: Path = LISTINGS_FILE) -> dict[str, str]:
    """The listings of ``path`` by name: each is the text after its ``=== name ===`` line, up to the next."""
    parts = re.split(r"^=== (\w+) ===\n", path.read_text(), flags=re.MULTILINE)
    return {name: text.strip() + "\n" for name, text in zip(parts[1::2], parts[2::2], strict=True)}


LISTINGS = read_listings()
# Both CX3 programs compile the same reduction and matmul fusion; they differ in the result's layout and in
# the ENTRY, where BLOCKS slices its own columns out of the all-reduced rows.
MATMUL_ROWS_HLO, MATMUL_BLOCKS_HLO = LISTINGS["matmul_rows"], LISTINGS["matmul_blocks"]
NAIVE_MLP_HLO, Q1_HLO = LISTINGS["naive_mlp"], LISTINGS["q1"]  # CX4's replicated MLP; Q1 at the CPU sizes
MOCK_LAYER_ENTRY_HLO = LISTINGS["mock_layer_entry"]  # the ENTRY of Q2's mock layer
GPU_STYLE_HLO = LISTINGS["gpu_style"]  # asynchronous -start/-done pairs, a combined tuple all-reduce

# Lines of HLO in the grammar of the book's TPU profiles (tiles T(...), memory spaces S(n), typed
# operands), written by the course from the chapter's shapes.
def e2_line(batch: int, width: int) -> str:
    """E2's fusion: a reduce-scatter fused into the op that made bf16[batch, 32, 8192], keeping ``width``
    columns, its result in VMEM."""
    tiled = "{2,1,0:T(8,128)(2,1)S(1)}"
    return (f"%fusion.7 = bf16[{batch},32,{width}]{tiled} fusion(bf16[{batch},32,{E2_IN_WIDTH}]{tiled} "
            "%fusion.41), kind=kCustom, calls=%all-reduce-scatter.7")


def q1_lines(batch: int, block: int, groups: str) -> tuple[str, str]:
    """Q1's two instructions: the first matmul's fusion (x[batch, 8192] with one device's block of w1,
    ``block`` rows) and the all-reduce that ends the program, over ``groups`` (an iota form)."""
    tiled = "{1,0:T(8,128)(2,1)}"
    fusion = (f"%fusion.1 = bf16[{batch},{block}]{{1,0:T(8,128)(2,1)S(1)}} fusion(bf16[{batch},{Q1_D}]{tiled} "
              f"%param.3, bf16[{block},{Q1_D}]{tiled} %param.4), kind=kOutput, calls=%fused_computation.2")
    allreduce = (f"%all-reduce.4 = bf16[{batch},{Q1_D}]{tiled} all-reduce(bf16[{batch},{Q1_D}]{tiled} %fusion.9), "
                 f"channel_id=5, replica_groups={groups}, use_global_device_ids=true, to_apply=%add.6")
    return fusion, allreduce


E2_IN_WIDTH = 8192  # the last dimension entering E2's reduce-scatter
Q1_D = 8192  # d_model of the book's Q1 profile
# The values a student may be dealt (autograder/variants.py), the book's first.
E2_BATCH, E2_WIDTH = (32, 24, 40), (4096, 2048, 1024)
Q1_BATCH_SIZES, Q1_BLOCKS = (8, 16, 4), (4096, 3072)
Q1_GROUPS = ("[16,8]<=[8,16]T(1,0)", "[32,4]<=[4,32]T(1,0)", "[8,16]<=[16,8]T(1,0)")  # 128 devices, 8/4/16-way
E2_LINE = e2_line(E2_BATCH[0], E2_WIDTH[0])
E3_LINE = "%param.5 = f32[3,5]{1,0:T(2,2)} parameter(0)"
E4_LINE = "%param.6 = bf16[4,8]{1,0:T(2,4)(2,1)} parameter(1)"
E6_LINE = ("%fusion.2 = bf16[8,1024,4096]{2,1,0:T(8,128)(2,1)} fusion(bf16[8,1024,8192]{2,1,0:T(8,128)(2,1)} "
           "%fusion.30), kind=kCustom, calls=%all-reduce-scatter.2")
Q1_LINE, Q1_ALLREDUCE = q1_lines(Q1_BATCH_SIZES[0], Q1_BLOCKS[0], Q1_GROUPS[0])
Q1_GROUPS_LISTED = "replica_groups={" + ",".join(
    "{" + ",".join(str(g + 16 * k) for k in range(8)) + "}" for g in range(16)) + "}"
PADDED_BF16 = ("%convert.8 = bf16[3,200]{1,0:T(8,128)(2,1)} convert(f32[3,200]{1,0:T(8,128)} %param.7)")
COLUMN_MAJOR = ("%transpose.5 = f32[100,3]{0,1:T(8,128)} transpose(f32[3,100]{1,0:T(8,128)} %param.9), "
                "dimensions={1,0}")
# Results laid out in another order than their dimensions are written in, as most of CX1's grading-time cases are
# (draw_read_line): tiles pad the minor-most dimensions of the layout, which these lines' padding shows.
OTHER_ORDERS = (
    "%copy.11 = bf16[16,300]{0,1:T(8,128)(2,1)} copy(bf16[16,300]{1,0:T(8,128)(2,1)} %param.2)",
    "%transpose.12 = f32[4,6,200]{1,2,0:T(8,128)} transpose(f32[4,200,6]{2,1,0:T(8,128)} %param.3), "
    "dimensions={0,2,1}",
    "%fusion.13 = bf16[24,1000]{0,1:T(8,128)(2,1)S(1)} fusion(f32[24,1000]{1,0:T(8,128)} %param.5), kind=kLoop, "
    "calls=%fused_computation.4",
    "%all-gather.14 = f32[64,3]{0,1:T(8,128)} all-gather(f32[8,3]{0,1:T(8,128)} %param.6), channel_id=2, "
    "replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true",
    "%dot.15 = f32[100,10]{0,1:T(8,128)} dot(f32[100,64]{1,0:T(8,128)} %param.7, f32[64,10]{1,0:T(8,128)} "
    "%param.8), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
)
ASYNC_COPY = ("%copy-start.3 = (bf16[4096,8192]{1,0:T(8,128)(2,1)S(1)}, bf16[4096,8192]{1,0:T(8,128)(2,1)}, "
              "u32[]{:S(2)}) copy-start(bf16[4096,8192]{1,0:T(8,128)(2,1)} %param.4)")
# The E1 program compiled on CPU: x f32[128, 256], y bf16[256, 16], einsum 'bf,fd->db'.
E1_X, E1_Y = (128, 256), (256, 16)
E1_DOT = ("ROOT %dot_general.3 = f32[16,128]{1,0} dot(%wrapped_convert, %x.1), lhs_contracting_dims={0}, "
          "rhs_contracting_dims={1}")
E1_CONVERT = "%wrapped_convert = f32[256,16]{1,0} fusion(%y.1), kind=kLoop, calls=%wrapped_convert_computation"
E1_PARAM = "%y.1 = bf16[256,16]{1,0} parameter(1)"


def program_line(text: str, opcode: str, needle: str = "") -> str:
    """The first instruction of ``text`` whose opcode is ``opcode`` (and which contains ``needle``)."""
    for line in text.splitlines():
        try:
            if split_instruction(line)[2] == opcode and needle in line:
                return line
        except (ValueError, IndexError):
            continue
    raise LookupError(opcode)


# --- the exercises' grading-time cases: the public ones, redrawn -----------------------------------------
_NUMBERED = re.compile(r"\b([A-Za-z_][\w\-]*)\.(\d+)\b")  # an instruction's name: %fusion.7, x.1
_GROUPS = "\0groups\0"


def redrawn_hlo(rng: random.Random, text: str) -> str:
    """``text`` with fresh array sizes (each distinct size, but 1, becomes one 1/2 to 2 times it, the same
    wherever it occurs) and renumbered instructions (%fusion.7 -> %fusion.23): a case of the same kind,
    with other answers, that no table of the public cases knows."""
    sizes: dict[str, str] = {"": "", "1": "1"}

    def resize(m: re.Match) -> str:
        if m.group(1) not in DTYPE_BYTES:
            return m.group(0)
        dims = m.group(2).split(",")
        for n in dims:
            if n not in sizes:
                sizes[n] = str(max(1, round(int(n) * 2 ** rng.uniform(-1, 1))))
        return f"{m.group(1)}[{','.join(sizes[n] for n in dims)}]{m.group(3) or ''}"
    shift = rng.randint(1, 99)
    return _NUMBERED.sub(lambda m: f"{m.group(1)}.{int(m.group(2)) + shift}", _ARRAY.sub(resize, text))


def draw_instruction(rng: random.Random, probe: dict) -> dict:
    return {k: redrawn_hlo(rng, v) if k in ("line", "text") else v for k, v in probe.items()}


# A function is scored by the share of its drawn cases that pass, so what an exercise teaches must occur in most of
# them (a reading that ignores it is right wherever it does not): CX1's cases lay out most results in tiles in
# another order than written, and most in bf16; CX2's print most groups as transposed iota; CX3's run the
# all-reduces as asynchronous pairs, and combine most collectives of the kind a case counts with a second array into
# one tuple result, as XLA's combiners do on TPUs and GPUs.
# CX1: the share of result arrays (of two dimensions or more) tiled in another order, and of lines made bf16.
LAID_OUT, IN_BF16 = 0.8, 0.5


def _relaid(rng: random.Random, dtype: str, shape: tuple[int, ...], lay: str) -> str:
    """One array of a result type, tiled in a minor-to-major order other than the written one (most arrays of two
    dimensions or more), where that order pads to other bytes than the written."""
    _, tiles, space = layout(lay)
    dims = ",".join(map(str, shape))
    if len(shape) < 2 or rng.random() >= LAID_OUT:
        return f"{dtype}[{dims}]{lay}"
    tile = tiles[0] if tiles else (8, 128)
    written = tuple(range(len(shape) - 1, -1, -1))
    orders = [o for o in itertools.permutations(written) if o != written
              and padded_elements(shape, o, tile) != padded_elements(shape, (), tile)]
    if not orders:
        return f"{dtype}[{dims}]{lay}"
    tail = "".join(f"T({','.join(map(str, t))})" for t in [tile, *tiles[1:]])
    if dtype == "bf16" and len(tiles) < 2:
        tail += "(2,1)"
    tail += f"S({space})" if space else ""
    return f"{dtype}[{dims}]{{{','.join(map(str, rng.choice(orders)))}:{tail}}}"


def draw_read_line(rng: random.Random, probe: dict) -> dict:
    """CX1's grading-time cases: the probe's line redrawn (``redrawn_hlo``), its f32 arrays (operands too, so a
    transpose or a copy keeps its type) made bf16 in half of them, and its result laid out in tiles in another
    order than its dimensions are written in most (``_relaid``). With the probes' own bf16 lines, most results
    are bf16."""
    line = redrawn_hlo(rng, probe["line"])
    if rng.random() < IN_BF16:
        line = re.sub(r"\bf32\[", "bf16[", line)
    type_text = split_instruction(line)[1]
    at = line.index(type_text, line.index("="))
    relaid = _ARRAY.sub(lambda m: _relaid(rng, m.group(1), tuple(int(n) for n in m.group(2).split(",") if n),
                                          m.group(3) or ""), type_text)
    return dict(line=line[:at] + relaid + line[at + len(type_text):])


def _combined(rng: random.Random, text: str, kind: str) -> str:
    """``text`` with each collective of ``kind`` whose result is one array made, with probability 3/4 (and one at
    least, where there is one), a tuple of that array and a second one of the same type and a fresh size, from two
    operands: a reading that takes a tuple's first array alone, or skips tuple results, is wrong there."""
    one = re.compile(rf"^(\s*(?:ROOT\s+)?%[\w.\-]+\s*=\s*)([a-z]+[0-9a-z]*)\[([\d,]*)\](\{{[^}}]*\}})? "
                     rf"{re.escape(kind)}\((%[\w.\-]+)(.*)$")
    lines = text.splitlines()
    found = [i for i, line in enumerate(lines) if one.match(line)]
    chosen = {i for i in found if rng.random() < 0.75} or ({rng.choice(found)} if found else set())
    for i in chosen:
        head, dtype, dims, lay, operand, rest = one.match(lines[i]).groups()
        size = rng.choice((128, 256, 512, 1024, 4096))
        lines[i] = (f"{head}({dtype}[{dims}]{lay or ''}, {dtype}[{size}]{{0}}) {kind}({operand}, {operand}{rest}")
    return "\n".join(lines) + "\n"


def draw_census(rng: random.Random, probe: dict) -> dict:
    """CX3's grading-time cases: the probe's program redrawn (``redrawn_hlo``), most collectives of the kind it
    counts combined into tuple results (``_combined``), then its all-reduces run as asynchronous pairs,
    ``all-reduce-start`` then ``all-reduce-done`` (as XLA:GPU prints them; an all-reduce-start's result is the
    all-reduce's), each with probability 3/4 and at least one where the case counts all-reduces."""
    text = _combined(rng, redrawn_hlo(rng, probe["text"]), probe["kind"])
    found = [i for i, line in enumerate(text.splitlines()) if _SYNC_ALL_REDUCE.match(line)]
    chosen = {i for i in found if rng.random() < 0.75}
    if found and not chosen and probe["kind"] == "all-reduce":
        chosen = {rng.choice(found)}
    return dict(probe, text=asynchronous(text, chosen))


_SYNC_ALL_REDUCE = re.compile(r"^(\s*)(ROOT\s+)?%([\w.\-]+)(\s*=\s*)(\S+|\([^=]*?\)) all-reduce\((.*)$")


def asynchronous(text: str, chosen: set[int] | None = None) -> str:
    """``text`` with its all-reduces (those on the lines ``chosen``, or every one) run as asynchronous pairs,
    ``all-reduce-start`` then ``all-reduce-done``, as XLA:GPU prints them."""
    out = []
    for i, line in enumerate(text.splitlines()):
        m = _SYNC_ALL_REDUCE.match(line)
        if not m or (chosen is not None and i not in chosen):
            out.append(line)
            continue
        indent, root, name, eq, type_text, rest = m.groups()
        out.append(f"{indent}%{name}-start{eq}{type_text} all-reduce-start({rest}")
        out.append(f"{indent}{root or ''}%{name}{eq}{type_text} all-reduce-done(%{name}-start)")
    return "\n".join(out) + "\n"


def _partition(rng: random.Random) -> list[list[int]]:
    """Devices 0..n-1 cut at random into groups of one size (2 to 16 devices, 2 to 16 groups)."""
    size, count = 2 ** rng.randint(1, 4), 2 ** rng.randint(1, 4)
    devices = list(range(size * count))
    rng.shuffle(devices)
    return sorted(sorted(devices[i * size:(i + 1) * size]) for i in range(count))


def _transposed_iota(rng: random.Random) -> str:
    """Iota replica groups ``[G,S]<=[dims]T(perm)`` over 2 or 3 dimensions, whose transpose moves the groups: a
    reading without it finds other groups."""
    while True:
        dims = [2 ** rng.randint(1, 3) for _ in range(rng.randint(2, 3))]
        n = math.prod(dims)
        size = 2 ** rng.randint(1, max(1, n.bit_length() - 2))
        perm = list(range(len(dims)))
        while perm == sorted(perm):
            rng.shuffle(perm)
        plain = f"[{n // size},{size}]<=[{','.join(map(str, dims))}]"
        text = plain + f"T({','.join(map(str, perm))})"
        if replica_groups("replica_groups=" + text) != replica_groups("replica_groups=" + plain):
            return text


def draw_groups(rng: random.Random, probe: dict) -> dict:
    """CX2's grading-time cases: the probe's line with fresh replica groups. The probes of ``CX2_OWN_FORM`` keep
    their printed form (explicit lists, mesh axes or StableHLO's dense), so each form is read at grading; every
    other case prints transposed iota (``_transposed_iota``), the form the exercise is about."""
    line = probe["line"]
    at = re.search(r"replica_groups\s*=\s*", line).end()
    rest = line[at:]
    if rest.startswith("{"):
        end, groups = _group_end(rest, 0), _partition(rng)
        text = "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"
    elif rest.startswith("["):
        end = re.match(r"\[\d+,\d+\]<=\[[0-9,]+\](?:T\([0-9,]+\))?", rest).end()
        text = _transposed_iota(rng)
    elif rest.startswith("mesh"):
        m = re.match(r"mesh\[([^\]]*)\]\s*\{[^}]*\}", rest)
        end, names = m.end(), re.findall(r"'([^']+)'=", m.group(1))
        chosen = [a for a in names if rng.random() < 0.5] or [rng.choice(names)]
        text = ("mesh[" + ",".join(f"'{a}'={2 ** rng.randint(0, 3)}" for a in names) + "] {"
                + ",".join(f"'{a}'" for a in chosen) + "}")
    else:
        end, groups = re.match(r"dense<.*?>\s*:\s*tensor<[^>]*>", rest).end(), _partition(rng)
        text = ("dense<[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups)
                + f"]> : tensor<{len(groups)}x{len(groups[0])}xi64>")
    if line not in CX2_OWN_FORM:
        text = _transposed_iota(rng)
    return dict(line=redrawn_hlo(rng, line[:at] + _GROUPS + rest[end:]).replace(_GROUPS, text))


def draw_matmul(rng: random.Random, probe: dict) -> dict:
    """CX5's grading-time cases: the probe's mesh; B, D, F fresh powers of two (B and F split evenly),
    peak and bandwidth rescaled. Such small matmuls are memory-bound on any TPU, so a time that never read the peak
    passed every case: where the probe splits F (3 probes of 5), the case is a chip whose peak is 2 to 8 times too
    low for its intensity, and compute-bound."""
    case = rescale(rng, probe) | dict(B=probe["batch_ways"] * 2 ** rng.randint(1, 7), D=2 ** rng.randint(6, 10),
                                      F=probe["f_ways"] * 2 ** rng.randint(3, 8))
    if probe["f_ways"] > 1:
        flops, nbytes, _ = matmul_roofline(**case)
        case["peak"] = float(f"{flops / nbytes * case['bw'] / 2 ** rng.uniform(1, 3):.4g}")
    return case


CX1_PROBES = tuple(dict(line=x) for x in (
    E1_DOT, E2_LINE, E1_CONVERT, E1_PARAM, E3_LINE, E4_LINE, E6_LINE, Q1_LINE, PADDED_BF16, COLUMN_MAJOR,
    ASYNC_COPY, program_line(MATMUL_ROWS_HLO, "all-reduce"), program_line(MATMUL_BLOCKS_HLO, "constant", "u32[8]"),
    program_line(MATMUL_BLOCKS_HLO, "partition-id"), program_line(MATMUL_BLOCKS_HLO, "dynamic-slice", "ROOT"),
    program_line(NAIVE_MLP_HLO, "all-gather"), program_line(MOCK_LAYER_ENTRY_HLO, "parameter"),
    program_line(GPU_STYLE_HLO, "all-reduce"), *OTHER_ORDERS))
CX2_PROBES = tuple(dict(line=x) for x in (
    program_line(MATMUL_ROWS_HLO, "all-reduce"), program_line(MATMUL_BLOCKS_HLO, "all-reduce"),
    program_line(MOCK_LAYER_ENTRY_HLO, "all-reduce"), program_line(NAIVE_MLP_HLO, "all-gather"),
    program_line(Q1_HLO, "all-reduce"), Q1_ALLREDUCE, Q1_GROUPS_LISTED,
    "replica_groups=mesh['X'=2,'Y'=4] {'X'}", "replica_groups=mesh['a'=2,'b'=2,'c'=2] {'a','c'}",
    "replica_groups=[2,4]<=[2,2,2]T(2,1,0)",
    "replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>",
    "replica_groups=[4,2]<=[2,4]T(1,0)", "replica_groups=[2,4]<=[4,2]T(1,0)"))
# The CX2 probes whose drawn cases keep their printed form: the first explicit lists, both mesh forms written by
# hand (one axis of two, two axes of three) and the dense one; the other nine of thirteen draw transposed iota (four
# of them are, so that reading an iota list without its transpose fails a quarter of the public cases too).
CX2_OWN_FORM = {CX2_PROBES[i]["line"] for i in (0, 7, 8, 10)}
CX3_PROBES = tuple(dict(text=t, kind=k) for t, k in (
    (MATMUL_ROWS_HLO, "all-reduce"), (MATMUL_BLOCKS_HLO, "all-reduce"), (MATMUL_BLOCKS_HLO, "reduce-scatter"),
    (NAIVE_MLP_HLO, "all-gather"), (Q1_HLO, "all-reduce"), (MOCK_LAYER_ENTRY_HLO, "all-reduce"),
    (MOCK_LAYER_ENTRY_HLO, "all-gather"), (GPU_STYLE_HLO, "all-reduce"), (GPU_STYLE_HLO, "collective-permute"),
    (GPU_STYLE_HLO, "reduce-scatter"),
    # The pairs of GPU_STYLE_HLO's kind, in programs of the other listings: most of the grading-time cases that count
    # all-reduces run them so (draw_census).
    (asynchronous(MATMUL_ROWS_HLO), "all-reduce"), (asynchronous(Q1_HLO), "all-reduce"),
    (asynchronous(MOCK_LAYER_ENTRY_HLO), "all-reduce")))

# --- the exercises whose numbers each student is dealt (autograder/variants.py); the book's values first ---------


# E1: the einsum 'bf,fd->db' of x f32[b, f] and y bf16[f, d] on CPU (the book's b = 128, d = 16; f = 256).
E1_X, E1_Y = (128, 256), (256, 16)
E1_B, E1_D = (E1_X[0], 96, 160, 224), (E1_Y[1], 8, 32)


def e1(b: int, d: int) -> tuple[Number, ...]:
    """E1: what XLA counts for the student's einsum: the dot's FLOPs, the convert's, the argument bytes."""
    f = E1_X[1]
    dot, convert, arguments = 2 * b * f * d, f * d, 4 * b * f + 2 * f * d
    shapes = f"x f32[{b}, {f}], y bf16[{f}, {d}]"
    return (
        number("ch09-e1-dot-flops", section=STACK, prompt=f"FLOPs of the dot of E1 ({shapes}).", reference=dot,
               unit="FLOP", tolerance=THREE_FIGURES,
               slips=(Slip(dot / 2, "ratio:1/2", "count the multiply and the add."),)),
        number("ch09-e1-convert-flops", section=STACK,
               prompt=f"FLOPs cost_analysis() counts beyond the dot ({shapes}).", reference=convert,
               unit="FLOP", tolerance=THREE_FIGURES,
               slips=(Slip(2 * convert, "ratio:2", "one operation per converted element."),)),
        number("ch09-e1-argument-bytes", section=MEMORY,
               prompt=f"memory_analysis() argument bytes of the E1 program ({shapes}).", reference=arguments,
               unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(4 * (b * f + f * d), "close", "y is passed in bf16."),
                      Slip(arguments + 4 * d * b, slip_code(arguments + 4 * d * b, arguments, THREE_FIGURES),
                           f"the result f32[{d}, {b}] is the program's output, not an argument."))))


def e2(batch: int, width: int) -> tuple[Number, ...]:
    """E2: the bytes of the fusion's result and the ways it scatters, read from the student's line."""
    line = e2_line(batch, width)
    out_bytes = read_instruction(line)[0]
    ways = arrays(line.split("fusion(", 1)[1])[0][1][-1] / arrays(split_instruction(line)[1])[0][1][-1]
    return (
        number("ch09-e2-output-bytes", section=READ_OP,
               prompt=f"Bytes of fusion.7's result bf16[{batch},32,{width}] (no padding: the tiles divide it).",
               reference=out_bytes, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(2 * out_bytes, "ratio:2", "bf16 is 2 bytes.", maybe=True),)),
        number("ch09-e2-ways", section=READ_OP,
               prompt=f"Over how many devices does fusion.7 scatter ({E2_IN_WIDTH} columns in, {width} out)?",
               reference=ways, exact=True,
               slips=(Slip(width, slip_code(width, ways, Tolerance.exact_count()),
                           "compare the input's and the output's last dimension."),)))


# E3: an f32 array and its tile (the book's f32[3,5] in T(2,2)); every pair pads, each to its own blow-up.
E3_SHAPES, E3_TILES = ((3, 5), (5, 13), (9, 9), (13, 13), (5, 5)), ((2, 2), (4, 4))


def e3(shape: tuple[int, int], tile: tuple[int, int]) -> tuple[Number, ...]:
    """E3: elements once padded to whole tiles, and the blow-up over the plain array."""
    padded = padded_elements(shape, (1, 0), tile)
    plain = math.prod(shape)
    blowup = padded / plain
    array = f"f32[{shape[0]},{shape[1]}]{{1,0:T({tile[0]},{tile[1]})}}"
    return (
        number("ch09-e3-padded-elements", section=READ_OP, prompt=f"How many elements does {array} occupy in memory?",
               reference=padded, exact=True,
               slips=(Slip(plain, slip_code(plain, padded, Tolerance.exact_count()),
                           "tiles are whole: each dimension rounds up to a multiple of the tile."),)),
        number("ch09-e3-blowup", section=READ_OP, prompt=f"The memory blow-up of {array} over the unpadded array.",
               reference=blowup, tolerance=ONE_PERCENT,
               slips=(Slip(1 / blowup, slip_code(1 / blowup, blowup, ONE_PERCENT),
                           "padded over unpadded, not the other way round."),
                      Slip(blowup - 1, slip_code(blowup - 1, blowup, ONE_PERCENT),
                           "the blow-up is the factor padded over unpadded, not the growth beyond 1."))))


# E5-E7: the book's mock transformer on the 8 cores of a TPU v2-8 (4-way data x 2-way model): X bf16[B, T, D],
# W_in bf16[D, F] with F = 4 D, and W_Q[D, heads, D / heads]. A student is dealt B and D (the book's 32, 8192).
V2_CORE = hw.TPU_V2_BF16_FLOPS_PER_S_PER_CORE
V2_CORES, V2_DATA = 8, 4
MOCK_TPU_T, MOCK_TPU_HEADS = 1024, 32
MOCK_TPU_B, MOCK_TPU_D = (32, 40, 56), (8192, 4096, 6144)
T_MATMUL = 2 * B * T * D * F / (N * C)


def e5(B: int, D: int) -> tuple[Number | Formula, ...]:
    """E5-E7: roofline times of the up-projection, of the reduce-scatter after the down-projection (one
    hop) and of the Q projection, for a student's batch and width."""
    seq, ff, heads = MOCK_TPU_T, 4 * D, MOCK_TPU_HEADS
    tokens = B // V2_DATA * seq
    t_up = float(T_MATMUL.subs({sym.B: B, sym.T: seq, sym.D: D, sym.F: ff, sym.N: V2_CORES, sym.C: V2_CORE}))
    shard = 2 * B // V2_DATA * seq * D  # bf16[B/4, T, D] per data shard
    t_rs = shard / hw.TPU_V2_ICI_BIDIRECTIONAL_BYTES_PER_S  # one hop
    t_q = 2 * B * seq * D * (heads * (D // heads)) / (V2_CORES * V2_CORE)
    x = f"X bf16[{B}, {seq}, {D}]"
    return (
        number("ch09-e5-tokens-per-shard", section=EXAMPLE, prompt=f"Tokens per data-parallel shard of {x}.",
               reference=tokens, tolerance=THREE_FIGURES,
               slips=(Slip(B * seq // V2_CORES, "ratio:1/2", "only the batch is split four ways."),)),
        Formula(qid="ch09-e5-time-formula", points=1, section=EXAMPLE,
                prompt="Time of X[B, T, D] @ W_in[D, F] on N devices of C FLOP/s each, compute-bound.",
                reference=T_MATMUL, symbols="B T D F N C", counts="N",
                # the section's model has F = 4 D, which a student may put in: right for it, not for another F
                accept=(Accept(T_MATMUL.subs(F, 4 * sym.D), 0.5,
                               "That is the time with F = 4 D put in, right for this model alone: write it in F, as "
                               "asked, so that it holds for any width."),),
                slips=(Slip(2 * sym.B * T * sym.D * F / C, "missing_symbol:N", "N devices share the work."),
                       Slip(sym.B * T * sym.D * F / (N * C), "ratio:1/2"))),
        number("ch09-e5-time", section=EXAMPLE,
               prompt=f"Expected time of the up-projection {x} @ W_in bf16[{D}, {ff}] on 8 TPU v2 cores.",
               reference=t_up, unit="s", tolerance=ONE_PERCENT,
               slips=(Slip(t_up * 2, "ratio:2"), Slip(t_up * 1e3, "unit:1000"))),
        number("ch09-e6-shard-bytes", section=EXAMPLE,
               prompt=f"Bytes of one data shard bf16[{B // V2_DATA}, {seq}, {D}] entering the ReduceScatter.",
               reference=shard, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(shard * 4, "ratio:4", "the batch is split four ways."),)),
        number("ch09-e6-time", section=EXAMPLE, prompt="Expected time of that ReduceScatter over one TPU v2 hop.",
               reference=t_rs, unit="s",
               # the book rounds its time to two figures ("roughly 1.1 ms"): that passes too at its values
               tolerance=Tolerance(low=min(t_rs, round_figures(t_rs, 2)) * 0.99,
                                   high=max(t_rs * 1.02, round_figures(t_rs, 2) * 1.01))
               if (MOCK_TPU_B[0], MOCK_TPU_D[0]) == (B, D) else TWO_PERCENT,
               slips=(Slip(t_rs * 2, "ratio:2", "1.2e11 B/s is the bidirectional bandwidth."),)),
        number("ch09-e7-time", section=EXAMPLE,
               prompt=f"Expected time of the Q projection (W_Q[{D}, {heads}, {D // heads}]) on 8 TPU v2 cores.",
               reference=t_q, unit="s", tolerance=TWO_PERCENT,
               slips=(Slip(t_q * 4, "ratio:4", "W_Q has heads x head width = D columns, a quarter of W_in's."),)))


def q1(batch: int, block: int, groups: str) -> tuple[Number, ...]:
    """Q1: the model-parallel degree, the global hidden width and the batch, read from the student's two
    instructions."""
    fusion, allreduce = q1_lines(batch, block, groups)
    ways, n_groups, _ = replica_groups(allreduce)
    local = arrays(fusion.split("fusion(", 1)[1])  # x bf16[batch, D] and w1's block bf16[block, D]
    x_rows, d_ff = local[0][1][0], local[1][1][0] * ways
    return (
        number("ch09-q1-model-ways", section=PROBLEMS,
               prompt=f"Q1: the degree of model parallelism, replica_groups={groups} (exact).", reference=ways,
               exact=True, slips=(Slip(n_groups, f"ratio:{Fraction(n_groups, ways)}",
                                       "a group lists the devices that sum together."),)),
        number("ch09-q1-d-ff", section=PROBLEMS, prompt="Q1: the global hidden width d_ff (exact).",
               reference=d_ff, exact=True,
               slips=(Slip(d_ff // ways, f"ratio:{Fraction(1, ways)}", f"{block} is one device's block."),)),
        number("ch09-q1-batch", section=PROBLEMS, prompt="Q1: the batch size (exact).", reference=x_rows, exact=True,
               slips=(Slip(x_rows * ways, f"ratio:{ways}", "x is replicated, not sharded."),)))


# Q2 (CPU variant): the mock layer on (X=4 data) x (Y=2 model); a student is dealt B, T and F.
MOCK_X, MOCK_Y = (n for _, n in MOCK_MESH)
MOCK_DEVICES = MOCK_X * MOCK_Y
Q2_ALLREDUCES = 2  # after the attention output projection and after the MLP down-projection


def mock_counts(B: int, T: int, F: int) -> dict[str, float | dict[str, int]]:
    """What the mock layer of B sequences of T tokens and MLP width F costs: forward FLOPs of the whole
    layer per part (all devices), per device, the f32 bytes of each all-reduce's operand and of the
    arguments and output on one device."""
    D, heads, width = MOCK["D"], MOCK["N"], MOCK["H"]
    flops = {"projections": 4 * 2 * B * T * D * heads * width,  # Q, K, V and the output projection
             "attention": 2 * 2 * B * T * T * heads * width,  # scores and the weighted sum of values
             "mlp": 2 * 2 * B * T * D * F}  # up and down projections
    return {"flops": flops, "flops_per_device": sum(flops.values()) / MOCK_DEVICES,
            "allreduce_bytes": 4 * (B // MOCK_X) * T * D,  # f32 partial sums [B/X, T, D] on each device
            "argument_bytes": 4 * (B // MOCK_X * T * D + 4 * D * heads * width // MOCK_Y + 2 * D * F // MOCK_Y),
            "output_bytes": 4 * B // MOCK_X * T * D}


def q2_times(B: int, T: int, F: int) -> tuple[float, float]:
    """The same program on eight TPU v5e chips in bf16: matmuls at the bf16 peak, and two all-reduces of
    half the CPU's bytes, each 2 V / W on the links (Part 3)."""
    c = mock_counts(B, T, F)
    t_allreduce = 2 * (c["allreduce_bytes"] / 2) / V5E.ici_bidirectional_bytes_per_s
    return c["flops_per_device"] / V5E.bf16_flops_per_s, Q2_ALLREDUCES * t_allreduce


def q2_valid(B: int, T: int, F: int) -> bool:
    """The layer the prose describes: the MLP does the most FLOPs, and the all-reduces outlast them."""
    flops = mock_counts(B, T, F)["flops"]
    t_math, t_comms = q2_times(B, T, F)
    return max(flops, key=flops.get) == "mlp" and t_comms > t_math


def q2(B: int, T: int, F: int) -> tuple[Number | Choice, ...]:
    """Q2 (CPU variant): the layer's sharding, sizes, collectives and FLOPs read from its compiled
    program, and its times on TPU v5e; with memory_analysis()'s argument bytes (CX5)."""
    c = mock_counts(B, T, F)
    flops, per_device, allreduce_bytes = c["flops"], c["flops_per_device"], c["allreduce_bytes"]
    share = flops["mlp"] / sum(flops.values())
    no_attention = flops["mlp"] / (flops["mlp"] + flops["projections"])
    t_math, t_comms = q2_times(B, T, F)
    return (
        number("ch09-cx5-argument-bytes", section=MEMORY,
               prompt="memory_analysis() argument bytes per device of your mock layer.",
               reference=c["argument_bytes"], unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(c["argument_bytes"] * 2, "ratio:2", "the weights are split over Y.", maybe=True),)),
        Choice(qid="ch09-q2-strategy", points=1, section=PROBLEMS, prompt="The mock layer's sharding strategy.",
               reference="dp4-mp2", options=("dp8", "mp8", "dp4-mp2", "dp2-mp4"),
               slips=(Slip("dp2-mp4", "wrong_option", "each all-reduce group has two devices."),)),
        number("ch09-q2-batch", section=PROBLEMS, prompt="The mock layer's global batch in sequences (exact).",
               reference=B, exact=True,
               slips=(Slip(B // MOCK_X, "ratio:1/4", "the parameter's shape is one device's block."),)),
        number("ch09-q2-d-ff", section=PROBLEMS, prompt="The mock layer's global MLP width (exact).", reference=F,
               exact=True, slips=(Slip(F // MOCK_Y, "ratio:1/2", "W_in's columns are split over the model axis."),)),
        Choice(qid="ch09-q2-collective", points=1, section=PROBLEMS, prompt="The collective the mock layer runs.",
               reference="all-reduce", options=COLLECTIVES,
               slips=(Slip("all-gather", "wrong_option"),)),
        number("ch09-q2-allreduce-count", section=PROBLEMS, prompt="How many times it runs per layer.",
               reference=Q2_ALLREDUCES, exact=True,
               slips=(Slip(1, "ratio:1/2", "attention and the MLP each end with a sum of partial results.",
                           maybe=True),)),
        number("ch09-q2-allreduce-bytes", section=PROBLEMS,
               prompt="Bytes of each all-reduce's operand per device (as compiled, f32).", reference=allreduce_bytes,
               unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(allreduce_bytes * MOCK_X, "ratio:4", "each device reduces its own batch rows."),
                      Slip(allreduce_bytes / 2, "ratio:1/2", "the CPU program is f32.", maybe=True))),
        Choice(qid="ch09-q2-dominant", points=1, section=PROBLEMS, prompt="Which part of the layer has the most FLOPs?",
               reference=max(flops, key=flops.get), options=tuple(flops),
               slips=(Slip("attention", "wrong_option",
                           f"per token, attention costs 4 T N H FLOPs (T = {T}), the MLP 4 D F: compare them."),)),
        number("ch09-q2-mlp-share", section=PROBLEMS,
               prompt=f"The MLP's share of the layer's matmul FLOPs (T = {T}).", reference=share,
               tolerance=ONE_PERCENT, slips=(Slip(no_attention, "close", "count attention's FLOPs too."),)),
        number("ch09-q2-flops-per-device", section=PROBLEMS, prompt="The layer's matmul FLOPs per device.",
               reference=per_device, unit="FLOP",
               tolerance=ONE_PERCENT,  # cost_analysis() adds softmax and elementwise work: 0.5% more
               slips=(Slip(per_device * MOCK_DEVICES, "ratio:8", "per device: divide by all 8."),)),
        number("ch09-q2-t-math", section=PROBLEMS, prompt="Time of those FLOPs per chip on a TPU v5e (bf16 peak).",
               reference=t_math, unit="s", tolerance=TWO_PERCENT,
               slips=(Slip(t_math * MOCK_DEVICES, "ratio:8"),)),
        number("ch09-q2-t-comms", section=PROBLEMS, prompt="Time of the layer's all-reduces on TPU v5e links, in bf16.",
               reference=t_comms, unit="s", tolerance=TWO_PERCENT,
               slips=(Slip(t_comms * 2, "ratio:2", "on a TPU the partial sums are bf16: half the CPU's bytes."),
                      Slip(t_comms / 2, "ratio:1/2", "an all-reduce costs twice an all-gather."))),
        Choice(qid="ch09-q2-bound", points=1, section=PROBLEMS,
               prompt="At these sizes on TPU v5e, is the layer compute- or communication-bound?",
               reference="communication" if t_comms > t_math else "compute", options=("compute", "communication"),
               slips=(Slip("compute", "wrong_option", "compare your two times."),)))


def mock_timeline(t_proj: float, t_attn: float, t_mlp: float, t_allreduce: float):
    """The mock layer as a profile would lay it out: each all-reduce waits for the matmul that made its
    partial sums, and the next matmul waits for it (nothing to overlap with)."""
    return [Op("Q, K, V", "compute", 3 * t_proj / 4), Op("attention", "compute", t_attn, after=("Q, K, V",)),
            Op("out-proj", "compute", t_proj / 4, after=("attention",)),
            Op("all-reduce 1", "comms", t_allreduce, after=("out-proj",)),
            Op("MLP up", "compute", t_mlp / 2, after=("all-reduce 1",)),
            Op("MLP down", "compute", t_mlp / 2, after=("MLP up",)),
            Op("all-reduce 2", "comms", t_allreduce, after=("MLP down",))]


# --- CX4: fix a sharding constraint ---------------------------------------------------------------------------
def _constrain(x, *spec):
    return jax.lax.with_sharding_constraint(x, jax.sharding.NamedSharding(make_mesh((("X", 8),)), P(*spec)))


def mlp_fixed(x, w1, w2):
    """Keep the hidden activation sharded like the batch: each device's rows never leave it."""
    mesh = course.mesh(X=8)
    h = jax.lax.with_sharding_constraint(x @ w1, NamedSharding(mesh, P("X", None)))  # f32[64, 256] @ P('X', None)
    return jax.lax.with_sharding_constraint(h @ w2, NamedSharding(mesh, P("X", None)))  # f32[64, 128]


def mlp_replicated_hidden(x, w1, w2):
    """The syllabus's naive version: the hidden activation is replicated, so XLA all-gathers it."""
    h = _constrain(x @ w1, None, None)
    return _constrain(h @ w2, "X", None)


def mlp_hidden_split_on_f(x, w1, w2):
    """Shards the hidden activation on its feature dimension: more communication, not less."""
    h = _constrain(x @ w1, None, "X")
    return _constrain(h @ w2, "X", None)


def mlp_no_output_constraint(x, w1, w2):
    """Replicates the hidden activation and leaves the result replicated too."""
    return _constrain(x @ w1, None, None) @ w2


# --- CX5: XLA's cost model against the roofline ----------------------------------------------------------------
def matmul_roofline(B: int, D: int, F: int, batch_ways: int, f_ways: int, peak: float, bw: float):
    """Per device: FLOPs, HBM bytes and roofline seconds of f32 x[B, D] @ P('X', None) times
    w[D, F] @ P(None, 'Y') on a (X=batch_ways, Y=f_ways) mesh. Each device multiplies its own rows of x
    with its own columns of w: no communication."""
    b, f = B // batch_ways, F // f_ways
    flops = 2 * b * D * f
    nbytes = 4 * (b * D + D * f + b * f)
    return float(flops), float(nbytes), max(flops / peak, nbytes / bw)


def matmul_cost(B, D, F, batch_ways, f_ways, peak, bw):
    """Compile the sharded matmul for abstract inputs (nothing runs) and read XLA's per-device cost
    analysis; the roofline time is the larger of compute time and HBM time."""
    m = course.mesh(X=batch_ways, Y=f_ways)
    x = jax.ShapeDtypeStruct((B, D), jnp.float32, sharding=NamedSharding(m, P("X", None)))
    w = jax.ShapeDtypeStruct((D, F), jnp.float32, sharding=NamedSharding(m, P(None, "Y")))
    cost = jax.jit(lambda a, b: a @ b).lower(x, w).compile().cost_analysis()
    return cost["flops"], cost["bytes accessed"], max(cost["flops"] / peak, cost["bytes accessed"] / bw)


def cx5_global_shapes(B, D, F, batch_ways, f_ways, peak, bw):
    """Forgets the sharding: the whole matmul's FLOPs and bytes."""
    return matmul_roofline(B, D, F, 1, 1, peak, bw)


def cx5_sums_the_times(B, D, F, batch_ways, f_ways, peak, bw):
    flops, nbytes, _ = matmul_roofline(B, D, F, batch_ways, f_ways, peak, bw)
    return flops, nbytes, flops / peak + nbytes / bw


# Such small f32 matmuls are memory-bound on any TPU's MXU: the public cases are on three chips' (v5e, v6e, v5p), and
# three are compute-bound, on units whose FLOP rate is low for their bandwidth (the v5p's vector unit alone, a B200's
# fp32 vector units), so that an answer that never read the peak, or wrote in one chip's rates, fails a public case
# as it fails most of the cases drawn at grading.
CX5_CHIPS = {"v5e": (V5E.bf16_flops_per_s, V5E.hbm_bytes_per_s),
             "v6e": (hw.TPU_V6E.bf16_flops_per_s, hw.TPU_V6E.hbm_bytes_per_s),
             "v5p": (hw.TPU_V5P.bf16_flops_per_s, hw.TPU_V5P.hbm_bytes_per_s),
             "v5p VPU": (hw.TPU_V5P_VPU_FLOPS_PER_S, hw.TPU_V5P.hbm_bytes_per_s),
             "B200 fp32 vector": (hw.B200_FP32_VECTOR_FLOPS_PER_S_FMA, hw.B200.hbm_bytes_per_s)}
CX5_PROBES = tuple(dict(B=b, D=d, F=f, batch_ways=x, f_ways=y, peak=CX5_CHIPS[chip][0], bw=CX5_CHIPS[chip][1])
                   for b, d, f, x, y, chip in ((512, 256, 1024, 4, 2, "v5e"), (64, 512, 2048, 8, 1, "v6e"),
                                               (1024, 128, 512, 2, 4, "v5p"), (8, 1024, 4096, 1, 8, "v5e"),
                                               (4096, 256, 256, 8, 1, "v6e"), (256, 512, 1024, 2, 4, "v5p VPU"),
                                               (2048, 256, 2048, 4, 2, "B200 fp32 vector"),
                                               (1024, 1024, 1024, 8, 1, "v5p VPU")))

# --- CX6: the profile's feed-forward block, ending in a reduce-scatter --------------------------------------
# The book's example profile, shrunk onto the mock layer's 4 x 2 mesh: x[B_X, T, D] (4-way data parallel),
# w_in[D, F_Y] and w_out[F_Y, D] (2-way model parallel). Each device's down-projection is a partial sum over
# its half of F; the profile's fused ReduceScatter adds the two halves' sums and leaves each device half of D
# (E2, E6). XLA:CPU keeps a reduce-scatter that shard_map asks for (it all-reduces and slices one that jit
# places: section 4 of the notebook). B = 16 sequences of T = 8 tokens, D = 64, F = 256.
RS_B, RS_T, RS_D, RS_F = 16, 8, 64, 256
RS_SPECS = (("X", None, None), (None, "Y"), ("Y", None))


def _atol(*summed: int) -> float:
    """1e-3 of an output entry's typical size: random normal inputs, so an entry summed over these
    dimensions is about the square root of their product (float32 rounding stays far below)."""
    return 1e-3 * math.sqrt(math.prod(summed))


def ffw_reduce_scatter(x, w_in, w_out):
    """Each device multiplies its tokens by its half of F (the relu is exact: each hidden unit's D sum is
    whole), then one reduce-scatter over Y adds the two halves' partial sums and keeps this device's half
    of D, as the profile's fused ReduceScatter does."""
    def block(x_rows, w_in_cols, w_out_rows):  # f32[4, 8, 64], f32[64, 128], f32[128, 64]
        partial = jnp.maximum(x_rows @ w_in_cols, 0.0) @ w_out_rows  # f32[4, 8, 64]: half of the F sum
        return jax.lax.psum_scatter(partial, "Y", scatter_dimension=2, tiled=True)  # f32[4, 8, 32]

    mesh = course.mesh(X=4, Y=2)
    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", None, None), P(None, "Y"), P("Y", None)),
                         out_specs=P("X", None, "Y"))(x, w_in, w_out)


def ffw_keeps_its_half(x, w_in, w_out):
    """Keeps its half of D of its own partial sum, never adding the other device's: half of F's terms."""
    def block(x_rows, w_in_cols, w_out_rows):
        return own_block(jnp.maximum(x_rows @ w_in_cols, 0.0) @ w_out_rows, "Y", 2)
    return smap(block, MOCK_MESH, RS_SPECS, ("X", None, "Y"), check_vma=False)(x, w_in, w_out)


def ffw_all_reduce_then_slice(x, w_in, w_out):
    """What XLA:CPU compiles when jit places the collective: adds the whole partial sums (all-reduce),
    then slices its half of D. Right, but each device receives all of D, twice a reduce-scatter's bytes."""
    def block(x_rows, w_in_cols, w_out_rows):
        return own_block(jax.lax.psum(jnp.maximum(x_rows @ w_in_cols, 0.0) @ w_out_rows, "Y"), "Y", 2)
    return smap(block, MOCK_MESH, RS_SPECS, ("X", None, "Y"))(x, w_in, w_out)


FFW_RS_SPEC = ProgramSpec(
    mesh=MOCK_MESH, einsum="the feed-forward block relu(x @ w_in) @ w_out", reference="mlp",
    operands=(Operand((RS_B, RS_T, RS_D), RS_SPECS[0]), Operand((RS_D, RS_F), RS_SPECS[1]),
              Operand((RS_F, RS_D), RS_SPECS[2])),
    out_spec=("X", None, "Y"), collectives={"reduce-scatter": 1}, rtol=1e-3, atol=_atol(RS_D, RS_F))


# --- CX7: the mock layer's attention, its sharding constraints fixed -------------------------------------------
# Q2's layer splits the batch over X and the heads over Y: x[B_X, T, D], w_q, w_k, w_v [D, N_Y, H], w_o[N_Y, H, D].
# A constraint that keeps q, k and v whole over the heads makes XLA gather them; one that keeps them split
# like the weights leaves a single all-reduce, of the output projection's partial sums over the heads.
AT_B, AT_T, AT_D, AT_N, AT_H = 8, 16, 32, 8, 8
AT_SPECS = (("X", None, None), (None, "Y", None), (None, "Y", None), (None, "Y", None), ("Y", None, None))


def attention_fixed(x, w_q, w_k, w_v, w_o):
    """Constrain q, k and v to the weights' split (batch over X, heads over Y): every head's softmax runs
    where its q, k, v are, and only the output projection's sum over the heads needs an all-reduce."""
    mesh = course.mesh(X=4, Y=2)
    heads = NamedSharding(mesh, P("X", None, "Y", None))  # [B, T, N, H]: batch over X, heads over Y
    q, k, v = (jax.lax.with_sharding_constraint(jnp.einsum("btd,dnh->btnh", x, w), heads) for w in (w_q, w_k, w_v))
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / jnp.sqrt(q.shape[-1])  # f32[8, 8, 16, 16]
    out = jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)  # f32[8, 16, 8, 8]
    y = jnp.einsum("btnh,nhd->btd", out, w_o)  # f32[8, 16, 32]: the sum over heads crosses Y
    return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P("X", None, None)))


def attention_whole_heads(x, w_q, w_k, w_v, w_o):
    """The notebook's naive CX7 program: q, k and v constrained whole over the heads, so XLA gathers each
    of them over Y (not a slip: jit places its collectives, so they are counted, not sized)."""
    mesh = make_mesh(MOCK_MESH)
    whole = NamedSharding(mesh, P("X", None, None, None))
    q, k, v = (jax.lax.with_sharding_constraint(jnp.einsum("btd,dnh->btnh", x, w), whole) for w in (w_q, w_k, w_v))
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / jnp.sqrt(q.shape[-1])
    y = jnp.einsum("btnh,nhd->btd", jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v), w_o)
    return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P("X", None, None)))


def _local_heads(x_rows, wq, wk, wv):
    """This device's heads' attention outputs [B_X, T, N_Y, H] (a helper of the slips)."""
    q, k, v = (jnp.einsum("btd,dnh->btnh", x_rows, w) for w in (wq, wk, wv))
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / jnp.sqrt(q.shape[-1])
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)


def attention_no_head_sum(x, w_q, w_k, w_v, w_o):
    """Projects its own heads' outputs and stops: the other device's heads are never added."""
    def block(x_rows, wq, wk, wv, wo):
        return jnp.einsum("btnh,nhd->btd", _local_heads(x_rows, wq, wk, wv), wo)
    return smap(block, MOCK_MESH, AT_SPECS, ("X", None, None), check_vma=False)(x, w_q, w_k, w_v, w_o)


def attention_softmax_over_queries(x, w_q, w_k, w_v, w_o):
    """The right constraints, but the softmax normalises over the queries (axis -2) instead of the keys."""
    mesh = make_mesh(MOCK_MESH)
    heads = NamedSharding(mesh, P("X", None, "Y", None))
    q, k, v = (jax.lax.with_sharding_constraint(jnp.einsum("btd,dnh->btnh", x, w), heads) for w in (w_q, w_k, w_v))
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / jnp.sqrt(q.shape[-1])
    y = jnp.einsum("bnts,bsnh,nhd->btd", jax.nn.softmax(scores, axis=-2), v, w_o)
    return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P("X", None, None)))


def attention_gathers_heads(x, w_q, w_k, w_v, w_o):
    """Gathers every head's output and all of w_o over Y, then projects on every device: right, but it
    moves the whole [B_X, T, N, H] activation and w_o where one all-reduce of [B_X, T, D] suffices."""
    def block(x_rows, wq, wk, wv, wo):
        out = jax.lax.all_gather(_local_heads(x_rows, wq, wk, wv), "Y", axis=2, tiled=True, to="invarying")
        return jnp.einsum("btnh,nhd->btd", out, jax.lax.all_gather(wo, "Y", axis=0, tiled=True, to="invarying"))
    return smap(block, MOCK_MESH, AT_SPECS, ("X", None, None))(x, w_q, w_k, w_v, w_o)


ATTENTION_SPEC = ProgramSpec(
    mesh=MOCK_MESH, einsum="multi-head self-attention of x with w_q, w_k, w_v and w_o", reference="attention",
    operands=(Operand((AT_B, AT_T, AT_D), AT_SPECS[0]), *(Operand((AT_D, AT_N, AT_H), s) for s in AT_SPECS[1:4]),
              Operand((AT_N, AT_H, AT_D), AT_SPECS[4])),
    out_spec=("X", None, None), collectives={"all-reduce": 1}, rtol=1e-3, atol=_atol(AT_D, AT_N * AT_H),
    compiler_places=True)  # the exercise is the sharding constraint that makes XLA place the all-reduce


# --- CX8: reading the program you compiled ---------------------------------------------------------------------
# The chapter's own programs, compiled at several sizes: CX6's block as shard_map writes it and as jit places
# it, CX7's attention with the naive and the fixed constraints, CX4's naive MLP. The judging process must not
# start JAX (it runs under a 4 GiB address-space limit, and XLA reserves more than that), so a grading-time case
# cannot be compiled when it is drawn: ``compile_program`` compiles every size once (8 simulated CPU devices,
# jax 0.10.2), ``python -m solutions.ch09_profiling`` writes them with XLA's memory analysis to
# ``solutions/ch09_programs.json``, and tests/chapters/test_ch09.py checks that the pinned JAX still prints them.
# The first sizes of each program are the notebook's (the public cases); a drawn case is the same program at
# one of its other sizes, its instructions renumbered.
FFW_SIZES = ((RS_B, RS_T, RS_D, RS_F), (8, 8, 64, 128), (16, 4, 128, 256), (32, 8, 64, 128))  # B, T, D, F
ATTENTION_SIZES = ((AT_B, AT_T, AT_D, AT_N, AT_H), (4, 8, 32, 4, 8), (16, 8, 32, 8, 4), (12, 16, 16, 4, 4))
MLP_SIZES = ((*CX4_X, CX4_W1[1], CX4_W2[1]), (32, 64, 128, 64), (128, 64, 256, 32), (64, 256, 128, 128))
PROGRAM_SIZES = {"ffw-reduce-scatter": FFW_SIZES, "ffw-placed": FFW_SIZES, "attention-naive": ATTENTION_SIZES,
                 "attention-fixed": ATTENTION_SIZES, "mlp-naive": MLP_SIZES}
CX8_COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")


def program_key(name: str, sizes: tuple[int, ...]) -> str:
    return f"{name}/{'x'.join(map(str, sizes))}"


def ffw_placed(x, w_in, w_out):
    """CX6's block with jit placing the collective (compiled with the result sharded P('X', None, 'Y'))."""
    return jnp.maximum(x @ w_in, 0.0) @ w_out


def _drop_attribute(text: str, attr: str) -> str:
    """``text`` without any ``, attr={...}`` (braces balanced)."""
    out, i, key = [], 0, ", " + attr + "={"
    while (j := text.find(key, i)) >= 0:
        out.append(text[i:j])
        i = _group_end(text, j + len(key) - 1)
    return "".join(out) + text[i:]


def clean_hlo(text: str) -> str:
    """The notebook's ``hlo``: compiled text without the source-file tables, metadata and backend settings
    (they name files of the machine that compiled it)."""
    text = re.sub(r"\n(FileNames|FunctionNames|FileLocations|StackFrames)\n(?:.+\n)*", "", text)
    for attr in ("metadata", "backend_config", "frontend_attributes"):
        text = _drop_attribute(text, attr)
    return re.sub(r"\n{3,}", "\n\n", text)


def compile_program(name: str, sizes: tuple[int, ...]) -> dict[str, str | int]:
    """One of the chapter's programs compiled for abstract inputs of ``sizes``: its cleaned text and what
    ``memory_analysis()`` reports per device (needs JAX and 8 devices: ``course.setup()``)."""
    def sds(mesh, shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec)))

    if name.startswith("ffw"):
        b, t, d, f = sizes
        m = make_mesh(MOCK_MESH)
        args = [sds(m, s, p) for s, p in zip(((b, t, d), (d, f), (f, d)), RS_SPECS, strict=True)]
        fn = (jax.jit(ffw_reduce_scatter) if name == "ffw-reduce-scatter"
              else jax.jit(ffw_placed, out_shardings=NamedSharding(m, P("X", None, "Y"))))
    elif name.startswith("attention"):
        b, t, d, n, h = sizes
        m = make_mesh(MOCK_MESH)
        shapes = ((b, t, d), (d, n, h), (d, n, h), (d, n, h), (n, h, d))
        args = [sds(m, s, p) for s, p in zip(shapes, AT_SPECS, strict=True)]
        fn = jax.jit(attention_whole_heads if name == "attention-naive" else attention_fixed)
    else:
        b, d, f, e = sizes
        m = make_mesh((("X", 8),))
        args = [sds(m, (b, d), ("X", None)), sds(m, (d, f), ()), sds(m, (f, e), ())]
        fn = jax.jit(mlp_replicated_hidden)
    compiled = fn.lower(*args).compile()
    memory = compiled.memory_analysis()
    return {"text": clean_hlo(compiled.as_text()), "argument_bytes": memory.argument_size_in_bytes,
            "output_bytes": memory.output_size_in_bytes, "temp_bytes": memory.temp_size_in_bytes}


PROGRAMS_FILE = Path(__file__).with_name("ch09_programs.json")
PROGRAMS: dict[str, dict[str, str | int]] = json.loads(PROGRAMS_FILE.read_text())


def write_programs(path: Path = PROGRAMS_FILE) -> None:
    """Compile every program at every size and write them to ``path``, one line each (a data file, not code:
    nothing reads it but this module)."""
    programs = {program_key(n, s): compile_program(n, s) for n, sizes in PROGRAM_SIZES.items() for s in sizes}
    lines = [f"{json.dumps(key)}: {json.dumps(p, sort_keys=True)}" for key, p in programs.items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")


def read_compiled(text):
    """CX8: what a profile of a compiled program would show, read from its text, per device: (collectives
    it runs, bytes of their results, fusions it launches, argument bytes, output bytes). Only ENTRY runs;
    the computations above it are the bodies its fusions and reductions call, with parameters of their own."""
    entry = text[text.index("ENTRY"):]
    found = [census(entry, kind) for kind in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all",
                                              "collective-permute")]
    fusions = arguments = output = 0
    for line in entry.splitlines():
        m = re.match(r"\s*(ROOT\s+)?%[\w.\-]+\s*=\s*\S.*?\s([\w\-]+)\(", line)  # the opcode follows the type
        if not m:
            continue  # the header and the closing brace
        nbytes = read_instruction(line)[0]
        fusions += m.group(2) == "fusion"
        arguments += nbytes if m.group(2) == "parameter" else 0
        output = nbytes if m.group(1) else output
    return sum(n for n, _ in found), sum(b for _, b in found), fusions, arguments, output


# --- typical wrong readers (each must fail) ---------------------------------------------------------------------
def cx8_every_parameter(text: str):
    """Adds the parameters of every computation: the fused bodies' too, which are no arguments."""
    collectives, nbytes, fusions, _, output = read_compiled(text)
    arguments = sum(read_instruction(line)[0] for line in text.splitlines() if " parameter(" in line)
    return collectives, nbytes, fusions, arguments, output


def cx8_first_root(text: str):
    """Takes the first ROOT in the text as the output: a reduction's or a fusion body's, not ENTRY's."""
    collectives, nbytes, fusions, arguments, _ = read_compiled(text)
    return collectives, nbytes, fusions, arguments, read_instruction(next(
        line for line in text.splitlines() if line.lstrip().startswith("ROOT ")))[0]


def cx8_every_instruction_a_kernel(text: str):
    """Counts every ENTRY instruction (parameters, bitcasts, collectives) as a kernel, not the fusions."""
    collectives, nbytes, _, arguments, output = read_compiled(text)
    entry = text[text.index("ENTRY"):]
    return collectives, nbytes, len(re.findall(r"^\s*(?:ROOT\s+)?%\S+ = ", entry, re.M)), arguments, output


def renumbered(rng: random.Random, text: str) -> str:
    """``text`` with every instruction and computation renumbered (%fusion.7 -> %fusion.30): the same program."""
    shift = rng.randint(1, 99)
    return _NUMBERED.sub(lambda m: f"{m.group(1)}.{int(m.group(2)) + shift}", text)


def draw_program(rng: random.Random, probe: dict) -> dict:
    """CX8's grading-time cases: the probe's program compiled at another of its sizes, renumbered."""
    name = next(k for k, p in PROGRAMS.items() if p["text"] == probe["text"]).split("/")[0]
    sizes = rng.choice(PROGRAM_SIZES[name][1:])
    return dict(text=renumbered(rng, PROGRAMS[program_key(name, sizes)]["text"]))


CX8_PROBES = tuple(dict(text=PROGRAMS[program_key(name, sizes[0])]["text"]) for name, sizes in PROGRAM_SIZES.items())


# The book's printed answers (syllabus, pinned V2), for the tests that compare them with ours.
BOOK = {
    "ch09-e3-padded-elements": 24, "ch09-e3-blowup": 1.6, "ch09-e5-tokens-per-shard": 8192,
    "ch09-e5-time": 95.6e-3, "ch09-e6-shard-bytes": 134_217_728, "ch09-e6-time": 1.1e-3,
    "ch09-q1-model-ways": 8, "ch09-q1-d-ff": 32768, "ch09-q1-batch": 8,
}


CHAPTER = Chapter("ch09_profiling", "Profiling", (
    # E1: the stack; a dot as XLA:CPU compiles it.
    Choice(qid="ch09-e1-computes", points=1, section=STACK,
           prompt="What does dot(convert(y), x) with lhs_contracting_dims={0}, rhs_contracting_dims={1} compute?",
           reference="(x@y).T", options=("x@y", "(x@y).T", "elementwise"),
           slips=(Slip("x@y", "wrong_option", "the result is f32[d, b]: d comes before b."),)),
    Choice(qid="ch09-e1-convert", points=1, section=STACK,
           prompt="Why does the compiled program convert y before the dot?",
           reference="promote", options=("promote", "cpu-has-no-bf16", "layout"),
           slips=(Slip("cpu-has-no-bf16", "wrong_option", "the convert is already in the lowered StableHLO, "
                       "before any CPU-specific compilation."),)),
    vary("ch09-e1", e1, b=values(*E1_B), d=values(*E1_D)),
    # E2-E4: one TPU instruction.
    Choice(qid="ch09-e2-memory", points=1, section=READ_OP, prompt="Where does the result of fusion.7 live?",
           reference="VMEM", options=("HBM", "VMEM", "host"),
           slips=(Slip("HBM", "wrong_option", "S(1) is not the default space."),)),
    Choice(qid="ch09-e2-collective", points=1, section=READ_OP, prompt="Which collective does fusion.7 perform?",
           reference="reduce-scatter", options=COLLECTIVES,
           slips=(Slip("all-reduce", "wrong_option", "its output keeps only part of its input's last dimension."),)),
    vary("ch09-e2", e2, batch=values(*E2_BATCH), width=values(*E2_WIDTH)),
    vary("ch09-e3", e3, shape=values(*E3_SHAPES), tile=values(*E3_TILES)),
    Choice(qid="ch09-e4-inner-tile", points=1, section=READ_OP, prompt="Why do bf16 arrays carry an inner (2,1) tile?",
           reference="4-byte-words", options=("4-byte-words", "padding", "two-cores", "transpose"),
           slips=(Slip("two-cores", "wrong_option", "the tile is about bytes, not cores."),)),
    # E5-E7: the book's mock transformer on 8 TPU v2 cores.
    vary("ch09-e5", e5, B=values(*MOCK_TPU_B), D=values(*MOCK_TPU_D)),
    # Q1: the book's profile.
    Choice(qid="ch09-q1-program", points=1, section=PROBLEMS,
           prompt="What does the profile of Q1 compute?", reference="two-matmuls",
           options=("one-matmul", "two-matmuls", "matmul-and-softmax"),
           slips=(Slip("one-matmul", "wrong_option", "the all-reduce sums the second matmul's partial results."),)),
    vary("ch09-q1", q1, batch=values(*Q1_BATCH_SIZES), block=values(*Q1_BLOCKS), groups=values(*Q1_GROUPS)),
    # CX1-CX3: read HLO text.
    Function(qid="ch09-cx1-read-instruction", points=3, section=READ_OP,
             prompt="read_instruction(line): result bytes, padded bytes, memory space, operand count.",
             reference=read_instruction, probes=CX1_PROBES, draw=draw_read_line,
             output=(Output("number", tolerance=EXACT),) * 4,
             slips=(Slip(cx1_bf16_as_four_bytes, "ratio:2", "bf16 is 2 bytes an element."),
                    Slip(cx1_tiles_logical_order, "not_equal",
                         "tiles pad the minor-most dimensions in memory order: read the layout's minor-to-major "
                         "list, not the order the dimensions are written in."))),
    Function(qid="ch09-cx2-replica-groups", points=3, section=PROBLEMS,
             prompt="replica_groups(line): group size, number of groups, device 0's group, in every printed form.",
             reference=replica_groups, probes=CX2_PROBES, draw=draw_groups,
             output=(Output("number", tolerance=EXACT),) * 3,
             slips=(Slip(cx2_ignores_transpose, "wrong_elements",
                         "an iota list's T(...) transposes the reshaped device ids before they are cut into "
                         "groups."),)),
    Function(qid="ch09-cx3-census", points=3, section=EXAMPLE,
             prompt="census(text, kind): how many collectives of a kind a compiled program runs, and their bytes.",
             reference=census, probes=CX3_PROBES, draw=draw_census,
             output=(Output("number", tolerance=EXACT),) * 2,
             slips=(Slip(cx3_counts_every_mention, "ratio:2",
                         "count instructions by their opcode, not every mention of the word."),
                    Slip(cx3_counts_done_too, "not_equal",
                         "an asynchronous pair, -start then -done, is one collective: count its start alone."))),
    # CX4: fix a sharding constraint.
    Program(qid="ch09-cx4-fix-constraint", points=3, section=PROBLEMS,
            prompt="The data-parallel MLP with its constraints changed so the compiled program has no collectives.",
            spec=ProgramSpec(mesh=(("X", 8),), einsum="bd,df,fe->be",
                             operands=(Operand(CX4_X, ("X", None)), Operand(CX4_W1, (None, None)),
                                       Operand(CX4_W2, (None, None))),
                             # two f32 matmuls of random normals: entries reach ~200, so an absolute
                             # tolerance of 1e-2 is float32 rounding, not a wrong value
                             out_spec=("X", None), collectives={}, atol=1e-2),
            model=mlp_fixed,
            slips=(Slip(mlp_replicated_hidden, "collectives:all-gather"),
                   Slip(mlp_no_output_constraint, "wrong_sharding"))),
    # CX5: cost and memory analysis against the roofline.
    Function(qid="ch09-cx5-matmul-cost", points=3, section=EXAMPLE,
             prompt="matmul_cost(B, D, F, batch_ways, f_ways, peak, bw): per-device FLOPs, bytes, roofline time.",
             reference=matmul_roofline, model=matmul_cost, probes=CX5_PROBES, draw=draw_matmul,
             output=(Output("number", tolerance=ONE_PERCENT), Output("number", tolerance=ONE_PERCENT),
                     Output("number", unit="s", tolerance=ONE_PERCENT)),
             slips=(Slip(cx5_global_shapes, "ratio:8"), Slip(cx5_sums_the_times, "close"))),
    # Q2, CPU variant: read the mock layer's compiled program (and its memory_analysis(), CX5).
    vary("ch09-q2", q2, B=values(*Q2_B), T=values(*Q2_T), F=values(*Q2_F), valid=q2_valid),
    # CX6-CX7: programs graded by the collectives they compile to.
    Program(qid="ch09-cx6-ffw-reduce-scatter", points=3, section=EXAMPLE,
            prompt="The profile's feed-forward block on a (X=4, Y=2) mesh, its F partial sums reduce-scattered "
                   "over D.",
            spec=FFW_RS_SPEC, model=ffw_reduce_scatter,
            slips=(Slip(ffw_keeps_its_half, "wrong_values",
                        "each device's product is a partial sum over F: the other device's share of it is added in, "
                        "not dropped."),
                   Slip(ffw_all_reduce_then_slice, "collectives:all-reduce"))),
    Program(qid="ch09-cx7-attention-constraint", points=3, section=PROBLEMS,
            prompt="Q2's attention (batch over X, heads over Y) with constraints that leave one all-reduce.",
            spec=ATTENTION_SPEC, model=attention_fixed,
            slips=(Slip(attention_no_head_sum, "partial_sum:Y"),
                   Slip(attention_softmax_over_queries, "wrong_values",
                        "the softmax normalises each query's scores over the keys it attends to: check its axis."),
                   Slip(attention_gathers_heads, "collectives:all-gather"))),
    # CX8: the student's own compiled programs, read back.
    Function(qid="ch09-cx8-read-compiled", points=3, section=EXAMPLE,
             prompt="read_compiled(text): a compiled program's collectives, their bytes, its fusions, and its "
                    "argument and output bytes, per device.",
             reference=read_compiled, probes=CX8_PROBES, draw=draw_program,
             output=(Output("number", tolerance=EXACT),) * 5,
             slips=(Slip(cx8_every_parameter, "not_equal",
                         "only ENTRY's parameters are the program's arguments: the computations above it are "
                         "bodies with parameters of their own."),
                    Slip(cx8_first_root, "magnitude:-3",
                         "the output is the result of ENTRY's ROOT instruction, not of the first ROOT in the text."),
                    Slip(cx8_every_instruction_a_kernel, "not_equal",
                         "parameters, bitcasts and collectives are no kernels: count the fusion instructions."))),
))


if __name__ == "__main__":  # regenerate CX8's compiled programs (solutions/ch09_programs.json)
    course.setup()
    write_programs()
