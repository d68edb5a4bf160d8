"""Program answers: export a student's JAX function, run it on fresh random inputs, inspect it.

The student's kernel only *lowers* the function (``jax.export``) and records the serialized
program. The grader deserializes it in a separate process, runs it on inputs it draws itself and
counts the collectives in the program it compiled itself, so the artefact that is checked for
numerics is the same one checked for communication, and no student Python runs at grading time.
A forged artefact is only another program, judged like any other.

The offline self-check runs the same artefact through the same ``run_exported``, and both judge the
report with ``judge_report``: a wrong result is diagnosed once, by what it most likely means (a constant factor
that is a device count, a partial sum missing a psum over a named axis, blocks in the wrong place, a
transposition), so the self-check and the grader name the same slip.

Whatever places arrays on devices takes a mesh factory (``make_mesh``, such as ``course.mesh``) from
its caller: which devices exist is decided by the process that set them up, not here.
"""

from __future__ import annotations

import base64
import functools
import io
import itertools
import math
import os
import re
import sys
import sysconfig
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from . import record, reference_results
from .collectives import BUSIER, Collective, by_kind, census, inspect_text
from .collectives import over as traffic_over
from .collectives import traffic as collective_traffic
from .meshes import MeshFactory
from .messages import phrase, phrase_program
from .model_traffic import MATMUL_FLOPS
from .questions import ProgramSpec
from .verdict import Status, Verdict

# Custom calls that sharding annotations lower to; anything else (host callbacks above all) would
# run code outside the program, and is refused.
ALLOWED_CUSTOM_CALLS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                  "xla.sdy.FuncResultSharding", "xla.sdy.GlobalToLocalShape",
                                  "xla.sdy.LocalToGlobalShape", "annotate_device_placement"})
_CUSTOM = re.compile(r"custom_call\s*@([\w.$-]+)|call_target_name\s*=\s*\"([^\"]+)\"")
# The meshes a program names, as Shardy declares them in its StableHLO: sdy.mesh @mesh = <["X"=2, "Y"=4]>.
_MESH = re.compile(r"sdy\.mesh\s+@[\w.$-]+\s*=\s*<\[([^\]]*)\]")
_MESH_AXIS = re.compile(r'"([^"]*)"\s*=\s*(\d{1,12})(?!\d)')


GRADER_ERROR = "grader_error"  # a report's error code where the grader, not the program, failed (``error``: what)
# A report's error code where the grader's reading of what the program compiled to raised: whose fault that is
# depends on the input, not on the code that raised (the readers parse text the program decides). The grader reads
# the question's reference the same way (``kinds.program.judge_all``): if that fails too, the grader is broken; if
# not, the program is refused as the student's (``judge_report``, as the self-check does too). ``error``: the
# exception's name, as GRADER_ERROR's; ``judge_report`` phrases it.
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class Report:
    """What running one program showed; ``error`` set when it could not run at all. ``outputs`` holds the
    arrays it returned (one, or a train step's several) and ``out_specs`` their shardings."""

    outputs: tuple[np.ndarray, ...] = ()
    out_specs: tuple[tuple | None, ...] = ()
    census: dict[str, int] | None = None  # executions per collective kind
    collectives: tuple[Collective, ...] = ()  # empty when counted in the compiled program
    error: str = ""
    error_code: str = "raised"
    # Per device, from the compiled program's memory analysis: bytes of "arguments", "outputs", "temporaries"
    # (measured only for a question with a memory bound).
    memory: dict[str, int] | None = None
    # The collective-permutes the compiler placed (``collectives.placed_permutes``), and how many of them send past
    # a neighbour on the ring of their axis: weighed on the questions whose collectives are permutes.
    placed: tuple[Collective, ...] = ()
    jumps: int = 0
    # The compiled program's collectives other than permutes (``compiled_hlo.compiled_collectives``): what moves,
    # whatever the program states. Where it states none (a ``jit`` program) they are its traffic; where it states
    # some, they are weighed too (``judge_report``): XLA adds collectives and removes stated ones that never run.
    compiled: tuple[Collective, ...] = ()
    # Every collective-permute of the compiled program (``compiled_hlo.compiled_permutes``), stated or placed: weighed
    # with ``compiled`` for a program that states its own collectives.
    permutes: tuple[Collective, ...] = ()
    # Where a device's copy of a result differs from the copy it is judged by (a replicated result the program left
    # different per device): that device and the first index that differs, else None.
    differ: tuple[int, tuple[int, ...]] | None = None
    # The compiled program's collectives that no collective of the program wrote (``compiled_hlo.compiler_placed``),
    # by kind: where a question asks for them written in shard_map, the compiler's count for nothing.
    by_compiler: dict[str, int] | None = None
    # Those of them over a mesh axis a shard_map block leaves to the compiler (``compiled_hlo.over_left_axes``), by
    # kind: the compiler may place them inside the block, so no message says it added them outside it.
    over_left_axes: dict[str, int] | None = None
    # FLOPs per device of the compiled program's matrix products (``compiled_hlo.matmul_flops``: one in a loop of
    # unknown length counted once, ``flops_exact`` False): weighed against the model's (``model_traffic.MATMUL_FLOPS``).
    flops: float | None = None
    flops_exact: bool = True


def _shardings(q: ProgramSpec, make_mesh: MeshFactory) -> list[Any]:
    """Each operand's sharding, on the question's mesh as ``make_mesh`` builds it."""
    from jax.sharding import NamedSharding, PartitionSpec

    m = make_mesh(**dict(q.mesh))
    return [NamedSharding(m, PartitionSpec(*op.spec)) for op in q.operands]


# How far from zero every gate of a reference's gradient lies in drawn inputs (``kinks.KINKS``): ten
# times float32's error on a pre-activation of these sizes. Most draws are clear already; a draw that is not is
# replaced by the next from the same generator, so the grader and the self-check draw alike.
KINK_MARGIN = 2e-5
KINK_DRAWS = 400


SELFCHECK_SEED = 0  # public: the self-check runs offline, on inputs anyone can compute


def inputs(q: ProgramSpec, seed: int) -> list[np.ndarray]:
    """Random inputs (never arange or zeros: regular data hides indexing bugs), clear of the reference's
    kinks. Floats are normal; integers are nonzero and small (|v| <= 9), so sums of them stay exact in float64
    and int32."""
    from .kinks import KINKS

    rng = np.random.default_rng(seed)
    kinks = KINKS.get(q.reference or "")
    drawn = _draw(q, rng)
    for _ in range(KINK_DRAWS if kinks else 0):
        if min(np.abs(z).min() for z in kinks(*_as_views(q, drawn))) >= KINK_MARGIN:
            break
        drawn = _draw(q, rng)
    return drawn


def _draw(q: ProgramSpec, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for op in q.operands:
        if np.issubdtype(np.dtype(op.dtype), np.integer):
            v = rng.integers(1, 10, op.shape)
            signed = np.issubdtype(np.dtype(op.dtype), np.signedinteger)
            out.append((v * rng.choice([-1, 1], op.shape) if signed else v).astype(op.dtype))
        else:
            out.append(rng.standard_normal(op.shape).astype(op.dtype))
    return out


def export(q: ProgramSpec, fn: Any, *, make_mesh: MeshFactory) -> str:
    """Lower ``fn`` for the question's operand shapes and shardings; base64 of the serialized
    program. Raises what jax raises when the function cannot be traced."""
    import jax

    args = [jax.ShapeDtypeStruct(op.shape, op.dtype, sharding=s)
            for op, s in zip(q.operands, _shardings(q, make_mesh), strict=True)]
    exported = jax.export.export(jax.jit(fn))(*args)
    return base64.b64encode(exported.serialize()).decode()


def results(q: ProgramSpec, fn: Any, seed: int, *, make_mesh: MeshFactory) -> tuple[np.ndarray, ...]:
    """What a trusted program (a record's slip) computes at ``seed``'s inputs, as ``run`` reads its results, without
    reading what it compiled to (the release keeps slips' results: ``release.slip_results``)."""
    import jax

    args = [jax.device_put(x, s) for x, s in zip(inputs(q, seed), _shardings(q, make_mesh), strict=True)]
    out = jax.jit(fn)(*args)
    return tuple(np.asarray(o) for o in (out if q.outputs and isinstance(out, tuple | list) else (out,)))


def run(q: ProgramSpec, fn: Any, seed: int, *, make_mesh: MeshFactory) -> Report:
    """Run a callable (a live function, or a deserialized program's ``call``) and inspect it."""
    import jax

    from .collectives import UnknownCollective, UnreadableCollective
    from .compiled_hlo import (  # never in a graded kernel
        compiled_census,
        compiled_collectives,
        compiled_permutes,
        compiler_placed,
        left_to_compiler,
        masquerades,
        matmul_flops,
        over_left_axes,
        placed_permutes,
    )

    # Whose failure an exception is: the student's while their program is traced, compiled and run; the grader's
    # while it makes the inputs; while it reads what the program compiled to, the input's that made the reading fail
    # (UNREADABLE: the program's, unless the reference's reading fails too; see ``kinds.program.judge_all``).
    stage = "inputs"  # then "program" (the student's) and "reading" (the grader's readers), as each step starts
    try:
        args = [jax.device_put(x, s) for x, s in zip(inputs(q, seed), _shardings(q, make_mesh), strict=True)]
        stage = "program"
        jitted = jax.jit(fn)
        lowered = jitted.lower(*args)
        size = sum(math.prod(o.shape) * o.dtype.itemsize for o in jax.tree.leaves(lowered.out_info))
        if size > RESULT_BYTES:  # refused before it runs: results this large would not fit where they are judged
            return Report(error=phrase_program("error:too_big", size=size, limit=RESULT_BYTES),
                          error_code="bad_program")
        stated_text = lowered.as_text()  # once: a long program's text costs its printing each time
        if "frontend_attributes" in stated_text:  # its own text in XLA's fields (compiled_hlo.without_named_text)
            return Report(error=phrase_program("error:frontend_attributes"), error_code="bad_program")
        stated_hlo = lowered.compiler_ir("hlo").as_hlo_module().to_string()  # with the names XLA gives collectives
        stage = "reading"
        found = tuple(inspect_text(stated_text, q.mesh))  # before it runs: what the census cannot weigh is refused
        stage = "program"
        out = jitted(*args)
        compiled = lowered.compile()  # the executable that just ran, from JAX's cache
        compiled_text = compiled.as_text()
        stage = "reading"
        placed = compiled_census(compiled_text)
        blocks = left_to_compiler(stated_hlo)
        by_compiler = compiler_placed(compiled_text, masquerades(stated_hlo), blocks)
        left_over = over_left_axes(compiled_text, blocks)
        stated = census(found)
        a2a = "stablehlo.all_to_all" in stated_text  # one may be a gather (``collectives._as_gather``)
        # beside a stated loop of unknown length, the compiled program's count of that kind says nothing either
        unsure = {c.kind for c in found if c.count is None}
        unsure |= {"all-reduce"} if "reduce-scatter" in unsure else set()
        # the compiled program shows a permute per array where a ring step sends several (``collectives.RingSteps``)
        arrays = census(found, launches=False)
        added = {k: n for k, n in added_collectives(arrays, placed, a2a).items() if k not in unsure}
        counts = dict(Counter(stated) + Counter(added)) if found else placed
        permutes = placed_permutes(stated_text, compiled_text, q.mesh)
        placed_all = tuple(compiled_collectives(compiled_text, q.mesh, _float_width(q)))
        every_permute = tuple(c for c, _, _ in compiled_permutes(compiled_text, q.mesh, _float_width(q)))
        memory = _memory(compiled) if q.max_bytes else None
        flops, flops_exact = matmul_flops(compiled_text)
    except UnknownCollective as e:  # a closed world: a program that communicates in a way nobody weighs is refused
        return Report(error=phrase_program("error:unknown_collective", op=e.op), error_code="bad_program")
    except UnreadableCollective as e:  # the same world's element types, groups and depth
        return Report(error=phrase_program("error:unweighable", why=e.why), error_code="bad_program")
    except Exception as e:
        if stage == "inputs":
            return Report(error=type(e).__name__, error_code=GRADER_ERROR)
        if stage == "reading":  # the name alone, as GRADER_ERROR's: ``judge_report`` phrases it
            return Report(error=type(e).__name__, error_code=UNREADABLE)
        return Report(error=phrase_program("error:raised", kind=type(e).__name__, detail=error_text(e)))
    if not jax.tree.leaves(out):  # None, or a tuple of them: nothing came out
        return Report()
    outs = tuple(out) if q.outputs and isinstance(out, (tuple, list)) else (out,)
    if q.outputs and (len(outs) != len(q.outputs) or not all(isinstance(o, jax.Array) for o in outs)):
        kinds = [_kind(o) for o in (outs if isinstance(out, (tuple, list)) else (out,))]
        return Report(error=phrase_program("error:not_the_outputs", n=len(q.outputs), names=", ".join(q.outputs),
                                           kinds=", ".join(kinds) if len(kinds) <= 6 else f"{len(kinds)} values"),
                      error_code="wrong_type")
    if not isinstance(outs[0], jax.Array):
        return Report(error=phrase_program("error:not_an_array", kind=_kind(out)), error_code="wrong_type")
    odd = [o.dtype for o in outs if not _numpy_number(o.dtype)]
    if odd:
        return Report(error=phrase_program("error:dtype", dtype=odd[0]), error_code="wrong_type")
    specs = tuple(None if (s := getattr(o.sharding, "spec", None)) is None else tuple(s) for o in outs)
    values = tuple(np.asarray(o) for o in outs)
    return Report(values, specs, counts, found, memory=memory, placed=tuple(c for c, _ in permutes),
                  jumps=sum(not ring for _, ring in permutes), compiled=placed_all, permutes=every_permute,
                  differ=_copies_differ(q, outs, values), by_compiler=by_compiler, over_left_axes=left_over,
                  flops=flops, flops_exact=flops_exact)


def _copies_differ(q: ProgramSpec, outs: tuple[Any, ...], values: tuple[np.ndarray, ...]
                   ) -> tuple[int, tuple[int, ...]] | None:
    """The first device whose copy of a result differs from the value the result is judged by (one copy of each
    block), beyond the question's tolerance, and where. ``np.asarray`` reads one copy of a replicated result: a
    ``shard_map`` with ``check_vma=False`` may leave the others wrong (a ring right on device 0 only)."""
    for o, whole in zip(outs, values, strict=True):
        for shard in sorted(o.addressable_shards, key=lambda s: s.device.id):
            part, want = np.asarray(shard.data), whole[shard.index]
            if part.shape != want.shape:
                continue
            close = np.isclose(part, want, rtol=q.rtol, atol=q.atol, equal_nan=True)
            if not close.all():
                first = np.argwhere(~close)[0]
                starts = [s.start or 0 for s in shard.index] + [0] * (part.ndim - len(shard.index))
                return shard.device.id, tuple(int(a + f) for a, f in zip(starts, first, strict=False))
    return None


_FLOAT_NAMES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64"}


def _float_width(q: ProgramSpec) -> str | None:
    """The widest float dtype of the question's operands (as the census names it), at which a compiled collective
    is counted: XLA on CPU runs a bf16 collective in f32. None for a question of integers."""
    from .collectives import DTYPE_BITS

    floats = [_FLOAT_NAMES[str(op.dtype)] for op in q.operands if str(op.dtype) in _FLOAT_NAMES]
    return max(floats, key=DTYPE_BITS.__getitem__) if floats else None


def _kind(value: Any) -> str:
    """What a program returned, in the student's words (a JAX array is an array, whatever its class)."""
    import jax

    return "array" if isinstance(value, jax.Array) else type(value).__name__


def _numpy_number(dtype: Any) -> bool:
    """Whether numpy holds results of this dtype as numbers (bfloat16, float8 and PRNG keys it does not)."""
    try:
        return np.dtype(dtype).kind in "biufc"
    except TypeError:
        return False


def added_collectives(stated: dict[str, int], compiled: dict[str, int], a2a: bool = False) -> dict[str, int]:
    """Collectives the compiler added to a program that states its own (``stated``, from its StableHLO): those of
    the compiled program beyond what the stated ones explain, such as the all-gathers that reshard an operand
    into a shard_map's in_specs, or that a sharding constraint asks for. Both count a loop's collectives once per
    step (``compiled_hlo.compiled_runs``), but the compiler may merge all-reduces or move one out of a loop, so it
    never shows more of a stated kind than was stated, and on CPU a reduce-scatter compiles to an all-reduce; so an
    addition of a kind already stated can go unseen where the compiler merged or moved the stated ones.
    ``a2a``: the program states an all_to_all, which the census reads as an all-gather where it sends one block
    to every device, and which compiles to an all-to-all all the same."""
    allowed = {**stated, "all-reduce": stated.get("all-reduce", 0) + stated.get("reduce-scatter", 0)}
    if a2a:
        allowed["all-to-all"] = stated.get("all-to-all", 0) + stated.get("all-gather", 0)
    return {k: n - allowed.get(k, 0) for k, n in compiled.items() if n > allowed.get(k, 0)}


def _memory(compiled: Any) -> dict[str, int] | None:
    """Per-device bytes from XLA's memory analysis of the compiled program (None where the backend has none)."""
    stats = compiled.memory_analysis()
    if stats is None:
        return None
    return {"arguments": int(stats.argument_size_in_bytes), "outputs": int(stats.output_size_in_bytes),
            "temporaries": int(stats.temp_size_in_bytes)}


# The most bytes a program's results may take: 16 times the largest result any question asks for (a layer
# stack's gradient, 1 MiB). They travel to the judging process as text and are judged in its bounded memory.
RESULT_BYTES = 2**24

ERROR_CHARS = 4000  # JAX's errors end with their advice ("... consider using ..."): keep it


def error_text(e: object) -> str:
    """An exception's message (or a recorded one) as the student should read it: JAX's own advice included (it
    comes last in a long message, so a short cut loses it), bounded so a pathological message cannot flood a
    record or a verdict."""
    text = str(e)
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS // 2] + " [...] " + text[-ERROR_CHARS // 2:]


def foreign_calls(mlir_text: str) -> list[str]:
    """Custom-call targets other than sharding markers (host callbacks would run code)."""
    targets = (m.group(1) or m.group(2) for m in _CUSTOM.finditer(mlir_text))
    return [t for t in targets if t not in ALLOWED_CUSTOM_CALLS]


def reference_program(q: Any, spec: ProgramSpec, *, make_mesh: MeshFactory) -> str:
    """Question ``q``'s reference (``q.solution``) exported for ``spec``, as the kernel exports a student's function
    (at the shape ``spec`` names, where the student chooses one), on the devices of ``make_mesh``: what the release
    measures the model's traffic on and what the grader reads where a student's program could not be read."""
    model = functools.partial(q.solution, **dict(spec.mesh)) if q.spec.mesh_choices else q.solution
    return export(spec, model, make_mesh=make_mesh)


def run_exported(q: ProgramSpec, blob: str, seed: int, *, make_mesh: MeshFactory) -> Report:
    """Deserialize a recorded program, refuse foreign code in it, check its signature, run it."""
    import jax

    try:
        exported = jax.export.deserialize(bytearray(base64.b64decode(blob, validate=True)))
    except Exception as e:
        return Report(error=phrase_program("error:unreadable", kind=type(e).__name__), error_code="bad_program")
    mlir = exported.mlir_module()
    foreign = foreign_calls(mlir)
    if foreign:
        return Report(error=phrase_program("error:foreign_call", target=foreign[0]), error_code="bad_program")
    want = [(tuple(op.shape), np.dtype(op.dtype)) for op in q.operands]
    got = [(tuple(a.shape), np.dtype(a.dtype)) for a in exported.in_avals]
    if got == want and not exported.out_avals:  # None, or a function that only prints: judged as nothing
        return Report()
    # A program that reads none of its operands is exported for one device: a constant, judged as the
    # result it is (it cannot read an input, so running it runs nothing of the student's on them).
    ignores_inputs = not exported.module_kept_var_idx and exported.nr_devices == 1
    if got != want or (exported.nr_devices != _device_count(q) and not ignores_inputs):
        code = "error:signature" if got != want else "error:devices"
        return Report(error=phrase_program(code, got=got, devices=exported.nr_devices, want=_device_count(q)),
                      error_code="bad_program")
    elsewhere = _other_mesh(q, mlir) or _other_inputs(q, exported, make_mesh)
    if elsewhere:
        return Report(error=elsewhere, error_code="bad_program")
    return run(q, exported.call, seed, make_mesh=make_mesh)


def shape_text(mesh: Sequence[tuple[str, int]]) -> str:
    """A mesh's shape as the book writes it: 2 x 4."""
    return " x ".join(str(n) for _, n in mesh)


def declared_meshes(mlir_text: str) -> list[tuple[tuple[str, int], ...]]:
    """The meshes a program names, each as its (axis, size) pairs in order."""
    return [tuple((a, int(n)) for a, n in _MESH_AXIS.findall(m.group(1))) for m in _MESH.finditer(mlir_text)]


def _other_mesh(q: ProgramSpec, mlir_text: str) -> str:
    """Why a program is not one for the mesh it is judged at: it builds a mesh of another shape (a body that
    ignores the shape its function chose, a record that names another shape than its program's) or over other
    axes (a mesh of another exercise reused). Empty when it builds none; a program judged at one shape and run at
    another is no answer. A mesh of no axes (one device's) is no mesh of the student's."""
    for declared in declared_meshes(mlir_text):
        if declared and declared != q.mesh:
            return phrase_program("error:mesh", got=shape_text(declared), axes=" x ".join(a for a, _ in declared),
                                  want=", ".join(f"{a}={n}" for a, n in q.mesh))
    return ""


def _other_inputs(q: ProgramSpec, exported: Any, make_mesh: MeshFactory) -> str:
    """Why an artefact's operands are not the question's: sharded otherwise, or for another mesh, than the
    question shards them at the mesh it is judged at (a forged record: ``export`` always uses the question's).
    Empty when every operand agrees."""
    axes = {"mesh": shape_text(q.mesh), "axes": " x ".join(a for a, _ in q.mesh)}
    try:
        got = exported.in_shardings_jax(make_mesh(**dict(q.mesh)))
    except Exception:  # exported for a mesh of other axes or sizes, or shardings JAX cannot read
        return phrase_program("error:in_mesh", **axes)
    for i, (op, g, want) in enumerate(zip(q.operands, got, _shardings(q, make_mesh), strict=True)):
        if g is not None and not g.is_equivalent_to(want, len(op.shape)):  # None: an operand the program never reads
            spec = getattr(g, "spec", None)
            return phrase_program("error:in_shardings", i=i, shape=list(op.shape), want=_spec_text(op.spec),
                                  got="another layout" if spec is None else _spec_text(tuple(spec)), **axes)
    return ""


def _array_to_text(a: np.ndarray) -> str:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode()


def report_to_json(r: Report) -> dict[str, Any]:
    return {"outputs": [_array_to_text(o) for o in r.outputs],
            "out_specs": [None if s is None else list(s) for s in r.out_specs], "census": r.census,
            "collectives": [asdict(c) for c in r.collectives], "error": r.error, "error_code": r.error_code,
            "memory": r.memory, "placed": [asdict(c) for c in r.placed], "jumps": r.jumps,
            "compiled": [asdict(c) for c in r.compiled], "permutes": [asdict(c) for c in r.permutes],
            "differ": None if r.differ is None else [r.differ[0], list(r.differ[1])], "by_compiler": r.by_compiler,
            "over_left_axes": r.over_left_axes, "flops": r.flops, "flops_exact": r.flops_exact}


def report_from_json(d: dict[str, Any]) -> Report:
    """Read a runner's report; it came from a process that ran foreign code, so check its types."""
    outs = tuple(np.load(io.BytesIO(base64.b64decode(o)), allow_pickle=False) for o in d.get("outputs") or [])
    specs = tuple(None if s is None else tuple(tuple(e) if isinstance(e, list) else e for e in s)
                  for s in d.get("out_specs") or [])
    def collectives(key: str) -> tuple[Collective, ...]:
        return tuple(Collective(c["kind"], tuple(c["axes"]), c["dtype"], tuple(c["operand_shape"]),
                                int(c["group_size"]), c["count"],
                                tuple(float(h) for h in c.get("hops", (1.0, 0.0)))[:2], c.get("same_step") is True)
                     for c in d.get(key) or [])
    def by_kind(key: str) -> dict[str, int] | None:
        counts = d.get(key)
        return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else None
    memory, differ, flops = d.get("memory"), d.get("differ"), d.get("flops")
    return Report(outs, specs, {str(k): int(v) for k, v in (d.get("census") or {}).items()},
                  collectives("collectives"), str(d.get("error") or ""), str(d.get("error_code") or "raised"),
                  {str(k): int(v) for k, v in memory.items()} if isinstance(memory, dict) else None,
                  collectives("placed"), int(d.get("jumps") or 0), collectives("compiled"), collectives("permutes"),
                  None if differ is None else (int(differ[0]), tuple(int(i) for i in differ[1])),
                  by_kind("by_compiler"), by_kind("over_left_axes"),
                  float(flops) if isinstance(flops, (int, float)) and not isinstance(flops, bool) else None,
                  d.get("flops_exact") is not False)


def _device_count(q: ProgramSpec) -> int:
    return int(np.prod([n for _, n in q.mesh]))


def _views(q: ProgramSpec, seed: int) -> list[np.ndarray]:
    return _as_views(q, inputs(q, seed))


def _as_views(q: ProgramSpec, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs as the float64 reference reads them (each in its operand's view)."""
    return [x.astype(np.float64).reshape(op.view or op.shape) for x, op in zip(arrays, q.operands, strict=True)]


def expected_outputs(q: ProgramSpec, seed: int) -> tuple[np.ndarray, ...]:
    """Every result the program must return, in order (one unless the spec names several outputs), in
    float64: from the public einsum (on each operand's view), or from the single-device reference the spec
    names (``autograder/program_references/``; at the self-check's seed, its results kept as data)."""
    if q.reference:  # at the self-check's seed, as the release kept them: the student's package has no references
        kept = reference_results.kept_outputs(q) if seed == SELFCHECK_SEED else None
        return kept if kept is not None else reference_outputs(q, seed)
    out = np.einsum(q.einsum, *_views(q, seed), optimize=True)
    return (out.reshape(q.out_shape) if q.out_shape else out,)


def reference_outputs(q: ProgramSpec, seed: int) -> tuple[np.ndarray, ...]:
    """The results of the reference the spec names, computed (the grader's, and the release's)."""
    result = _references()[q.reference](*_views(q, seed))
    outs = tuple(result) if q.outputs else (result,)
    return tuple(np.asarray(o, dtype=np.float64) for o in outs)


def reference_shares(q: ProgramSpec, seed: int) -> list[np.ndarray | None]:
    """Each device's share of a reference program's result, in ``_coordinates`` order: the reference computed on
    the blocks of the operands that device holds (None where they do not compose: a split the reference cannot
    take in parts). Only where a psum could be left out (``unsummed_axes``); else none."""
    if not unsummed_axes(q):
        return []
    reference, views, sizes = _references()[q.reference], _views(q, seed), dict(q.mesh)
    shares: list[np.ndarray | None] = []
    for at in _coordinates(q.mesh):
        blocks = [v[np.ix_(*_held(op.shape, op.spec, at, sizes))] if op.view is None else v
                  for v, op in zip(views, q.operands, strict=True)]
        try:
            shares.append(np.asarray(reference(*blocks), dtype=np.float64))
        except (ValueError, IndexError):
            shares.append(None)
    return shares


def unsummed_axes(q: ProgramSpec) -> tuple[str, ...]:
    """The mesh axes that split the operands but not the result: a psum over them is the program's to do."""
    split = {a for op in q.operands for e in op.spec for a in _entry_axes(e)}
    kept = {a for e in q.out_spec for a in _entry_axes(e)}
    return tuple(a for a, _ in q.mesh if a in split and a not in kept)


def _references() -> dict[str, Callable[..., Any]]:
    try:
        from .program_references import REFERENCES
    except ImportError:  # the student's package, asked of a spec the release kept no results for
        raise LookupError("No self-check data for this program question: run 'scaling-course release' "
                          "(instructors).") from None
    return REFERENCES


def counts_match(found: dict[str, int], wanted: dict[str, Any]) -> bool:
    """Exact counts, or (low, high) ranges; kinds that are not wanted must not occur."""
    for kind in set(found) | set(wanted):
        n, w = found.get(kind, 0), wanted.get(kind, 0)
        low, high = (w, w) if isinstance(w, int) else w
        if n < low or (high is not None and n > high):
            return False
    return True


def _spec_text(spec: tuple | None) -> str:
    if spec is None:
        return "unknown"
    return "P(" + ", ".join("None" if s is None else repr(s) for s in spec) + ")"


def _normal_spec(spec: tuple | None) -> tuple:
    spec = tuple(spec or ())
    while spec and spec[-1] is None:
        spec = spec[:-1]
    return spec


def describe_counts(counts: dict[str, Any]) -> str:
    def amount(n: Any) -> str:
        if isinstance(n, int):
            return str(n)
        low, high = n
        return f"at least {low}" if high is None else f"{low} to {high}"
    parts = [f"{amount(n)} {kind}" for kind, n in sorted(counts.items()) if n]
    return ", ".join(parts) if parts else "no collectives"


# --- diagnoses: what a wrong result most likely means ---------------------------------------------
# One code per finding. The self-check and the grader both call ``judge_report``, so both say the
# same; the sentences are in ``messages.py`` (``phrase_program``).


@dataclass(frozen=True)
class Finding:
    """One diagnosis of a wrong result: its code, its sentence, and the facts the sentence cites."""

    code: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Tolerance:
    """How two arrays are compared: ``exact`` for integer results (counts are right or wrong)."""

    rtol: float
    atol: float
    exact: bool = False

    def close(self, got: np.ndarray, want: np.ndarray, factor: Fraction = Fraction(1)) -> np.ndarray:
        """Elementwise: got == factor * want. Absolute errors grow with the factor, so atol does too."""
        if self.exact:
            return got * factor.denominator == want * factor.numerator
        k = float(factor)
        return np.isclose(got, k * want, rtol=self.rtol, atol=self.atol * max(1.0, abs(k)))

    def same(self, got: np.ndarray, want: np.ndarray, factor: Fraction = Fraction(1)) -> bool:
        return got.shape == want.shape and bool(self.close(got, want, factor).all())


def result_tolerance(rtol: float, atol: float, want: np.ndarray, exact: bool = False) -> _Tolerance:
    """The comparison of a result with ``want``. A float32 sum of many terms errs relative to the terms' size,
    not the sum's: an entry whose large terms cancel to near zero keeps their error, so ``atol`` is at least
    ``rtol`` of the result's root-mean-square entry (a right chain of two matmuls whose entries reach 400
    erred by 1.07e-4 at an entry of 0.109, past a tolerance of 1e-4 for that entry alone)."""
    if exact or not want.size:
        return _Tolerance(rtol, atol, exact)
    scale = float(np.sqrt(np.mean(np.square(want, dtype=np.float64))))
    return _Tolerance(rtol, max(atol, rtol * scale) if math.isfinite(scale) else atol, exact)


def _axes_text(axes: Sequence[str]) -> str:
    return " and ".join(axes) if len(axes) <= 2 else ", ".join(axes[:-1]) + " and " + axes[-1]


def _axis_groups(mesh: Sequence[tuple[str, int]]) -> dict[int, list[tuple[str, ...]]]:
    """Device counts of every nonempty group of mesh axes, e.g. {2: [("X",)], 4: [("Y",)], 8: [("X", "Y")]}."""
    groups: dict[int, list[tuple[str, ...]]] = {}
    for r in range(1, len(mesh) + 1):
        for combo in itertools.combinations(mesh, r):
            groups.setdefault(math.prod(n for _, n in combo), []).append(tuple(a for a, _ in combo))
    return groups


def _factor_text(k: Fraction) -> str:
    return str(k.numerator) if k.denominator == 1 else f"{k.numerator}/{k.denominator}"


def _number(v: Any, exact: bool) -> str:
    return str(int(v)) if exact else f"{float(v):.6g}"


def _scale_factor(got: np.ndarray, want: np.ndarray, tol: _Tolerance) -> Fraction | None:
    """k when ``got`` is k times ``want`` everywhere (k a simple fraction other than 0 and 1): the
    least-squares ratio, rounded to a fraction with a small denominator, then confirmed on every entry,
    so that one wrong entry (or noise in a near miss) never reads as a factor."""
    ww = float(np.vdot(want, want))
    if not ww > 0:
        return None
    k = float(np.vdot(got, want)) / ww
    if not np.isfinite(k) or not 1 / 4096 <= abs(k) <= 4096:
        return None
    f = Fraction(k).limit_denominator(64)
    if f in (0, 1) or abs(f.numerator) > 4096:
        return None
    return f if tol.same(got, want, f) else None


def _root_factor(got: np.ndarray, want: np.ndarray, tol: _Tolerance) -> Fraction | None:
    """q when ``got`` is sqrt(q) times ``want`` everywhere (q a whole number n or 1/n, n no square): attention
    scaled by 1/sqrt(H) where a question asks for no scale, or the scale left out, is off by such a factor, which
    no fraction of ``_scale_factor`` names."""
    ww = float(np.vdot(want, want))
    if tol.exact or not ww > 0 or got.shape != want.shape:
        return None
    k = float(np.vdot(got, want)) / ww
    if not np.isfinite(k) or not 1 / 64 <= k <= 64:
        return None
    q = Fraction(k * k).limit_denominator(4096)
    n = q.numerator * q.denominator
    if 1 not in (q.numerator, q.denominator) or n in (0, 1) or n > 4096 or math.isqrt(n) ** 2 == n:
        return None
    r = math.sqrt(q)
    return q if bool(np.isclose(got, r * want, rtol=tol.rtol, atol=tol.atol * max(1.0, r)).all()) else None


def _scaled(k: Fraction, mesh: Sequence[tuple[str, int]]) -> Finding:
    """Name the factor, and the mesh axes whose device count it is (a psum too many, or one missing)."""
    groups, text = _axis_groups(mesh), _factor_text(k)
    if k > 1 and k.denominator == 1 and k.numerator in groups:
        message = phrase_program("scaled:mesh", k=text, axes=_axes_names(groups[k.numerator]))
    elif 0 < k < 1 and k.numerator == 1 and k.denominator in groups:
        message = phrase_program("scaled:1/mesh", n=k.denominator, axes=_axes_names(groups[k.denominator]))
    else:
        message = phrase_program("scaled", k=text, size=_factor_text(-k))
    return Finding(f"scaled:{text}", message, {"factor": text})


def _axes_names(options: list[tuple[str, ...]]) -> str:
    """The axis groups of one device count: 'X', 'X and Y', or 'X or Y' when two have that count."""
    return " or ".join(_axes_text(axes) for axes in options)


def _transposition(got: np.ndarray, want: np.ndarray, tol: _Tolerance) -> tuple[int, ...] | None:
    """The order of axes (other than the identity) that turns ``want`` into ``got``, if any."""
    if not 2 <= want.ndim <= 4:
        return None
    for perm in itertools.permutations(range(want.ndim)):
        if perm != tuple(range(want.ndim)) and tol.same(got, want.transpose(perm)):
            return perm
    return None


def _transposed(perm: tuple[int, ...]) -> Finding:
    return Finding("transposed", phrase_program("transposed", perm=perm), {"axes": list(perm)})


def diagnose_array(got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
                   mesh: Sequence[tuple[str, int]] = (), what: str = "the expected result") -> Finding | None:
    """What is wrong with an array result, from the two arrays alone (no knowledge of a program):
    None when they agree. Integer results are compared exactly. Shared by program questions and any
    checker of array answers, so a factor of 8 reads the same wherever it is found."""
    if got.dtype.kind not in "biuf":  # complex, text, records: not a real-valued result
        return Finding("wrong_type", phrase_program("wrong_type", dtype=got.dtype))
    exact = got.dtype.kind in "biu"
    tol = result_tolerance(rtol, atol, want, exact)
    g = got.astype(np.float64)
    if got.shape != want.shape:
        perm = _transposition(g, want, tol)
        if perm is not None:
            return _transposed(perm)
        return Finding("wrong_shape", phrase_program("wrong_shape", got=got.shape, want=want.shape))
    bad = ~tol.close(g, want)
    if not bad.any():
        return None
    specific = _array_finding(g, want, tol, mesh)
    tolerance = f"rtol {rtol:g}" + (f", atol {atol:g}" if atol > rtol else "")
    return specific or _wrong_values(got, want, bad, what, exact, tolerance)


def _array_finding(g: np.ndarray, want: np.ndarray, tol: _Tolerance,
                   mesh: Sequence[tuple[str, int]]) -> Finding | None:
    """The diagnoses that need no program: not finite, all zeros, a constant factor, a transposition."""
    finite = np.isfinite(g)
    if not finite.all():
        index = tuple(int(i) for i in np.argwhere(~finite)[0])
        return Finding("not_finite", phrase_program("not_finite", bad=int((~finite).sum()), size=g.size, index=index),
                       {"index": list(index)})
    if not g.any():
        return Finding("zeros", phrase_program("zeros"))
    k, q = _scale_factor(g, want, tol), _root_factor(g, want, tol)
    if k is not None and (q is None or k.numerator + k.denominator <= q.numerator + q.denominator):
        return _scaled(k, mesh)
    if q is not None:  # the simpler reading: sqrt(32), not the 181/32 a tolerance of 1e-4 lets pass too
        text = f"1/sqrt({q.denominator})" if q.numerator == 1 else f"sqrt({_factor_text(q)})"
        return Finding(f"scaled:{text}", phrase_program("scaled:root", k=text), {"factor": text})
    perm = _transposition(g, want, tol)
    return _transposed(perm) if perm is not None else None


# A float result whose every entry lies within this fraction of the largest expected value, though beyond the
# check's tolerance, is more likely computed in lower precision (bfloat16 keeps 3 significant digits) than wrong.
NEAR_MISS = 0.01
# Or one whose difference from the expected result is this small a fraction of it, measured as a whole (the norm of
# the difference over the norm of the result): bfloat16's rounding grows through the matmuls of a training step,
# some entries to 17% of the largest (every model of the course run in bfloat16: at most 4.5% as a whole), while
# every wrong program of the records is 7.5% off or more.
NEAR_MISS_OVERALL = 0.05


def _wrong_values(got: np.ndarray, want: np.ndarray, bad: np.ndarray, what: str, exact: bool,
                  tolerance: str) -> Finding:
    """``tolerance``: the check's, as its sentences quote it ("rtol 0.0001", with the atol where it is larger)."""
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    key = "wrong_values:exact" if exact and np.all(want == np.round(want)) else "wrong_values"
    message = phrase_program(key, einsum=what, bad=int(bad.sum()), size=bad.size, index=index,
                             got=_number(got[index], exact), want=_number(want[index], key != "wrong_values"))
    if exact and key == "wrong_values":
        message += phrase_program("wrong_values+dtype", dtype=got.dtype)
    diff = got.astype(np.float64) - want
    scale = float(np.abs(want).max()) if want.size else 0.0
    off = float(np.abs(diff).max()) / scale if scale else np.inf
    size = float(np.linalg.norm(want)) if want.size else 0.0
    overall = float(np.linalg.norm(diff)) / size if size else np.inf
    if not exact and off <= NEAR_MISS:
        message += phrase_program("wrong_values+precision", pct=f"{100 * off:.2g}", tolerance=tolerance)
    elif not exact and overall <= NEAR_MISS_OVERALL:
        message += phrase_program("wrong_values+precision:overall", pct=f"{100 * overall:.2g}", tolerance=tolerance)
    return Finding("wrong_values", message, {"index": list(index), "bad": int(bad.sum())})


# Which devices hold which part of each einsum index. A device's share of an index is the set of its
# positions the device holds in every operand that splits it; an index no operand splits has none.

def _terms(q: ProgramSpec) -> tuple[list[str], str] | None:
    """The einsum's input terms and output term; None for forms this analysis does not read (a reference
    program, which is no einsum)."""
    if q.reference:
        return None
    text = q.einsum.replace(" ", "")
    if "->" not in text or "." in text:
        return None
    ins, out = text.split("->")
    terms = ins.split(",")
    return (terms, out) if len(terms) == len(q.operands) else None


def _entry_axes(entry: Any) -> tuple[str, ...]:
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def _coordinates(mesh: Sequence[tuple[str, int]]) -> list[dict[str, int]]:
    names = [a for a, _ in mesh]
    return [dict(zip(names, c, strict=True)) for c in np.ndindex(*(n for _, n in mesh))]


def _held(shape: Sequence[int], spec: Sequence[Any], at: dict[str, int], sizes: dict[str, int]) -> list[np.ndarray]:
    """Per dimension, which positions the device at ``at`` holds (a dimension split over axes
    (A, B) is cut into |A|*|B| blocks, A the major one)."""
    held = []
    for j, n in enumerate(shape):
        axes = _entry_axes(spec[j]) if j < len(spec) else ()
        s = math.prod(sizes.get(a, 1) for a in axes)
        mask = np.ones(n, bool)
        if s > 1 and n % s == 0:
            b = 0
            for a in axes:
                b = b * sizes.get(a, 1) + at.get(a, 0)
            mask[:] = False
            mask[b * n // s:(b + 1) * n // s] = True
        held.append(mask)
    return held


def _shares(q: ProgramSpec) -> dict[str, list[np.ndarray]]:
    """For each einsum index some operand splits: per device (in mesh order), the positions it holds."""
    parsed = _terms(q)
    if parsed is None:
        return {}
    sizes, devices = dict(q.mesh), _coordinates(q.mesh)
    shares: dict[str, list[np.ndarray]] = {}
    for term, op in zip(parsed[0], q.operands, strict=True):
        view = tuple(op.view or op.shape)
        if len(term) != len(view) or math.prod(view) != math.prod(op.shape):
            continue
        for d, at in enumerate(devices):
            dims = _held(op.shape, op.spec, at, sizes)
            mask = functools.reduce(np.multiply.outer, dims).reshape(view) if dims else np.ones((), bool)
            if mask.all():
                continue
            projections = [mask.any(axis=tuple(k for k in range(len(view)) if k != j)) for j in range(len(view))]
            if not np.array_equal(mask, functools.reduce(np.multiply.outer, projections)):
                continue  # not a block in the einsum's view: no share to name
            for letter, p in zip(term, projections, strict=True):
                if not p.all():
                    mine = shares.setdefault(letter, [np.ones(p.size, bool) for _ in devices])
                    mine[d] = mine[d] & p
    return shares


def _varying_axes(q: ProgramSpec, share: list[np.ndarray]) -> tuple[str, ...]:
    """The mesh axes along which a device's share changes."""
    devices = _coordinates(q.mesh)
    where = {tuple(at.values()): d for d, at in enumerate(devices)}
    names, sizes = [a for a, _ in q.mesh], dict(q.mesh)
    varying = []
    for k, a in enumerate(names):
        for d, at in enumerate(devices):
            other = list(at.values())
            other[k] = (other[k] + 1) % sizes[a]
            if not np.array_equal(share[d], share[where[tuple(other)]]):
                varying.append(a)
                break
    return tuple(varying)


def _partial_sum(q: ProgramSpec, g: np.ndarray, seed: int, tol: _Tolerance,
                 shares: dict[str, list[np.ndarray]]) -> Finding | None:
    """Whether every entry is a partial sum: the einsum with a contracted index cut down to the share
    of one position along some mesh axes (a psum over those axes left out). Tried for each contracted
    index that an operand splits, and for all of them at once (nothing summed at all). Each block of the
    result (as its out_spec splits it over the devices) must be one share throughout: entries that each
    equal some share but not the same one are a reduction with the wrong operation (an elementwise max
    or min of the shares is always one of them), which the program does run, so no psum is missing."""
    parsed = _terms(q)
    if parsed is None:
        return None
    terms, out = parsed
    contracted = [c for c in dict.fromkeys("".join(terms)) if c not in out and c in shares]
    if not contracted:
        return None
    views = _views(q, seed)
    devices = _coordinates(q.mesh)
    groups = [(c,) for c in contracted] + ([tuple(contracted)] if len(contracted) > 1 else [])
    for letters in groups:
        varying = {a for c in letters for a in _varying_axes(q, shares[c])}
        axes_all = tuple(a for a, _ in q.mesh if a in varying)
        for r in range(len(axes_all), 0, -1):
            for missing in itertools.combinations(axes_all, r):
                parts = []
                positions = sorted({tuple(at[a] for a in missing) for at in devices})
                for pos in positions:
                    cut = {c: functools.reduce(np.logical_or, [shares[c][d] for d, at in enumerate(devices)
                                                               if tuple(at[a] for a in missing) == pos])
                           for c in letters}
                    part = _einsum_cut(q, terms, out, views, cut)
                    if part.shape != g.shape:
                        return None
                    parts.append(part)
                hits = [tol.close(g, part) for part in parts]
                if not np.logical_or.reduce(hits).all():
                    continue
                ctx = {"letters": " and ".join(repr(c) for c in letters), "einsum": q.einsum,
                       "axes": _axes_text(missing), "n": len(positions)}
                data = {"indices": list(letters), "axes": list(missing)}
                if _one_share_per_block(q, hits):
                    return Finding(f"partial_sum:{','.join(missing)}", phrase_program("partial_sum", **ctx), data)
                op = _reduced_by(g, parts, tol)
                if op is not None:
                    return Finding(f"reduced_by_{op}:{','.join(missing)}",
                                   phrase_program("reduced_by", op=op, **ctx), data)
    return None


def _one_share_per_block(q: ProgramSpec, hits: list[np.ndarray]) -> bool:
    """Whether each device's block of the result (as the expected out_spec splits it) is one share throughout:
    ``hits[k]`` marks the entries that equal share k."""
    sizes = dict(q.mesh)
    for at in _coordinates(q.mesh):
        block = np.ix_(*_held(hits[0].shape, q.out_spec, at, sizes))
        if not any(h[block].all() for h in hits):
            return False
    return True


def _reduced_by(g: np.ndarray, parts: list[np.ndarray], tol: _Tolerance) -> str | None:
    """"max" or "min" where every entry is that of the shares (a pmax or pmin in place of a psum), else None."""
    for op, f in (("max", np.maximum), ("min", np.minimum)):
        if tol.same(g, functools.reduce(f, parts)):
            return op
    return None


def _local_share(q: ProgramSpec, g: np.ndarray, seed: int, tol: _Tolerance) -> Finding | None:
    """For a reference program: whether each device's block of the result is that device's share, the
    reference computed on the blocks of the operands it holds, summed over none of the mesh axes that
    split the operands but not the result (a psum over them left out)."""
    missing = unsummed_axes(q)
    if not missing:
        return None
    sizes, devices = dict(q.mesh), _coordinates(q.mesh)
    kept = reference_results.kept_shares(q) if seed == SELFCHECK_SEED else None
    shares = kept if kept is not None else reference_shares(q, seed)
    for pos in itertools.product(*(range(sizes[a]) for a in missing)):
        if all(_holds_its_share(q, g, part, at, sizes, tol)
               for at, part in zip(devices, shares, strict=True) if tuple(at[a] for a in missing) == pos):
            n = math.prod(sizes[a] for a in missing)
            return Finding(f"partial_sum:{','.join(missing)}", phrase_program("partial_sum:local", einsum=q.einsum,
                                                                              axes=_axes_text(missing), n=n),
                           {"axes": list(missing)})
    return None


def _holds_its_share(q: ProgramSpec, g: np.ndarray, part: np.ndarray | None, at: dict[str, int],
                     sizes: dict[str, int], tol: _Tolerance) -> bool:
    """Whether the block of ``g`` that the device at ``at`` holds is ``part``, its share."""
    if part is None:
        return False
    mine = g[np.ix_(*_held(g.shape, q.out_spec, at, sizes))]
    return part.shape == mine.shape and tol.same(mine, part)


def _einsum_cut(q: ProgramSpec, terms: list[str], out: str, views: list[np.ndarray],
                cut: dict[str, np.ndarray]) -> np.ndarray:
    """The einsum with each index in ``cut`` restricted to the positions it marks."""
    cut_views = []
    for term, v in zip(terms, views, strict=True):
        for k, letter in enumerate(term):
            if letter in cut:
                v = np.compress(cut[letter], v, axis=k)
        cut_views.append(v)
    result = np.einsum(f"{','.join(terms)}->{out}", *cut_views, optimize=True)
    return result.reshape(q.out_shape) if q.out_shape else result


def _partitions(q: ProgramSpec, shape: tuple[int, ...],
                shares: dict[str, list[np.ndarray]]) -> list[tuple[int, tuple[str, ...], list[np.ndarray]]]:
    """Ways the result's dimensions are cut into devices' blocks: by the expected out_spec, and (where
    the result is the einsum's own output) by the operands that split an output index."""
    sizes = dict(q.mesh)
    found: list[tuple[int, tuple[str, ...], list[np.ndarray]]] = []
    for j, n in enumerate(shape):
        axes = _entry_axes(q.out_spec[j]) if j < len(q.out_spec) else ()
        s = math.prod(sizes.get(a, 1) for a in axes)
        if s > 1 and n % s == 0:
            found.append((j, axes, [np.arange(n) // (n // s) == b for b in range(s)]))
    parsed = _terms(q)
    if parsed is not None and not q.out_shape and len(parsed[1]) == len(shape):
        for j, letter in enumerate(parsed[1]):
            if letter not in shares:
                continue
            blocks = list({m.tobytes(): m for m in shares[letter]}.values())
            disjoint = np.array_equal(np.sum(blocks, axis=0), np.ones(shape[j]))
            if len(blocks) > 1 and disjoint and not any(j == f[0] and len(f[2]) == len(blocks) for f in found):
                found.append((j, _varying_axes(q, shares[letter]), blocks))
    return found


def _blocks(g: np.ndarray, want: np.ndarray, tol: _Tolerance,
            partitions: list[tuple[int, tuple[str, ...], list[np.ndarray]]]) -> tuple[Finding | None, str]:
    """Right blocks in wrong places, or one block everywhere; else a note naming the right blocks."""
    note = ""
    for dim, axes, blocks in partitions:
        mine = [np.compress(m, g, axis=dim) for m in blocks]
        theirs = [np.compress(m, want, axis=dim) for m in blocks]
        source = [next((j for j, w in enumerate(theirs) if tol.same(t, w)), None) for t in mine]
        ctx = {"dim": dim, "n": len(blocks), "axes": _axes_text(axes)}
        if all(j is not None for j in source):
            if len(set(source)) == 1:
                return Finding(f"same_block:{','.join(axes)}", phrase_program("same_block", j=source[0], **ctx),
                               {"dim": dim, "block": source[0]}), ""
            i = next(i for i, j in enumerate(source) if j != i)
            return Finding(f"misplaced_blocks:{','.join(axes)}",
                           phrase_program("misplaced_blocks", i=i, j=source[i], **ctx),
                           {"dim": dim, "sources": source}), ""
        right = [i for i, j in enumerate(source) if j == i]
        if right and not note:
            note = phrase_program("wrong_values+blocks", right=right, **ctx)
    return None, note


def _block_of_wrong_shape(q: ProgramSpec, got: np.ndarray, want: np.ndarray, tol: _Tolerance,
                          shares: dict[str, list[np.ndarray]]) -> str:
    """When a wrongly shaped result is one device's block of the right one, say so."""
    for dim, axes, blocks in _partitions(q, want.shape, shares):
        for b, m in enumerate(blocks):
            if tol.same(got, np.compress(m, want, axis=dim)):
                return phrase_program("wrong_shape+block", block=b, dim=dim, n=len(blocks), axes=_axes_text(axes))
    return ""


_EINSUM = re.compile(r"[a-z]+(,[a-z]+)*->[a-z]*")


def expected_words(einsum: str) -> str:
    """The expected result as a sentence names it: a question's own words, or its einsum, said to be one. An einsum
    of one operand is no formula a student wrote ("ab->ab" for a gathered array): the result is named as the input,
    whole or summed."""
    if not _EINSUM.fullmatch(einsum):
        return einsum
    if "," in einsum:
        return f"the expected result (the einsum {einsum})"
    given, _, out = einsum.partition("->")
    if given == out:
        return "the expected result (the whole input array)"
    summed = [repr(c) for c in given if c not in out]
    if set(out) <= set(given) and len(set(given)) == len(given):
        return f"the expected result (the input summed over its {', '.join(summed)} dimension" \
               f"{'s' if len(summed) > 1 else ''})"
    return f"the expected result ({einsum} of the input)"


def diagnose(q: ProgramSpec, got: np.ndarray, want: np.ndarray, seed: int) -> Finding | None:
    """What is wrong with a program's result (None when it is right): first what the arrays alone
    show (NaN, zeros, a constant factor, a transposition), then what the problem's shardings explain
    (partial sums, blocks in the wrong place), else where the first wrong entry is."""
    first = diagnose_array(got, want, q.rtol, q.atol, q.mesh, expected_words(q.einsum))
    if first is None or first.code not in ("wrong_shape", "wrong_values"):
        return first
    tol = result_tolerance(q.rtol, q.atol, want, got.dtype.kind in "biu")
    shares = _shares(q)
    g = got.astype(np.float64)
    if first.code == "wrong_shape":
        extra = _block_of_wrong_shape(q, g, want, tol, shares)
        return Finding(first.code, first.message + extra, first.data)
    partial = _partial_sum(q, g, seed, tol, shares) if not q.reference else _local_share(q, g, seed, tol)
    if partial is not None:
        return partial
    found, note = _blocks(g, want, tol, _partitions(q, want.shape, shares))
    return found or _rows(g, want, tol) or Finding(first.code, first.message + note, first.data)


# Entries compared when every row of a result is matched against every expected row (a quadratic search,
# in the judging process's bounded memory): larger results are not searched for moved rows.
ROWS_COMPARED = 2**24


def _rows(g: np.ndarray, want: np.ndarray, tol: _Tolerance) -> Finding | None:
    """Rows (entries of the first dimension: tokens, sequences) that are right but missing or out of place:
    rows left all zeros while the others are right (never written: tokens dropped by a buffer too small),
    or every row a right one in another order (a sort or a gather left undone)."""
    if g.ndim < 2 or g.shape[0] < 2:
        return None
    rows = g.reshape(g.shape[0], -1)
    wanted = want.reshape(want.shape[0], -1)
    right = np.array([tol.same(r, w) for r, w in zip(rows, wanted, strict=True)])
    zero = ~rows.any(axis=1) & wanted.any(axis=1)
    if zero.any() and (right | zero).all():
        message = phrase_program("zero_rows", n=int(zero.sum()), rows=len(rows), first=int(np.argmax(zero)))
        return Finding("zero_rows", message, {"rows": np.flatnonzero(zero)[:64].tolist()})
    if right.all() or len(rows) * rows.size > ROWS_COMPARED:
        return None
    close = np.isclose(rows[:, None, :], wanted[None, :, :], rtol=tol.rtol, atol=tol.atol).all(axis=2)
    if close.any(axis=1).all():
        i = int(np.argmin(right))
        j = int(np.argmax(close[i]))
        return Finding("permuted_rows", phrase_program("permuted_rows", moved=int((~right).sum()), rows=len(rows),
                                                       i=i, j=j), {"row": i, "belongs": j})
    return None


def wrong_numbers(code: str) -> bool:
    """Whether a diagnosis code says the numbers are wrong (the answer scores 0), as opposed to right
    numbers with the wrong sharding or collectives."""
    head = code.partition("@")[0].partition(":")[0]
    return head in {"wrong_shape", "wrong_type", "wrong_values", "not_finite", "zeros", "scaled", "transposed",
                    "partial_sum", "reduced_by_max", "reduced_by_min", "misplaced_blocks", "same_block", "zero_rows",
                    "permuted_rows", "output_order"}


SHOWN_COLLECTIVES = 12  # a verdict describes this many of a program's collectives (each shape its own)


def judge_report(q: ProgramSpec, report: Report, seed: int, traffic: Mapping[str, float] | None = None) -> Verdict:
    """Numerics first (a wrong result is wrong however it communicates), then the output sharding,
    then the collectives (their kinds and counts, then the bytes they move against ``traffic``, the model's,
    from ``model_traffic``), then the FLOPs of its matrix products against the model's (``traffic``'s
    ``MATMUL_FLOPS``), then the memory it holds: a right but wasteful program earns partial credit."""
    traffic = dict(traffic) if traffic is not None else None
    model_flops = traffic.pop(MATMUL_FLOPS, None) if traffic is not None else None
    if report.error_code == GRADER_ERROR:
        return Verdict(Status.INVALID, 0.0, GRADER_ERROR, phrase(GRADER_ERROR, error=report.error))
    if report.error_code == UNREADABLE:  # the grader's judge first reads the reference the same way (judge_all)
        return Verdict(Status.INCORRECT, 0.0, "bad_program",
                       phrase("not_checked", error=phrase_program("error:cannot_read", kind=report.error)))
    if report.error:
        return Verdict(Status.INCORRECT, 0.0, report.error_code, phrase("not_checked", error=report.error))
    wanted = expected_outputs(q, seed)  # once: a reference program (a decode loop, attention) is not free
    if len(report.outputs) != len(wanted):
        return Verdict(Status.INCORRECT, 0.0, "wrong_shape",
                       phrase_program("wrong_shape:nothing", want=wanted[0].shape))
    # a result of one element where a scalar is asked (a loss as loss[None], or summed with keepdims) is that scalar,
    # as a number answer's is: its value is judged, not a shape that says nothing of it
    report = replace(report, outputs=tuple(o.reshape(()) if w.shape == () and o.size == 1 else o
                                           for o, w in zip(report.outputs, wanted, strict=True)))
    finding = _diagnose_outputs(q, report.outputs, wanted, seed)
    if finding is not None:
        return Verdict(Status.INCORRECT, 0.0, finding.code, finding.message, finding.data)
    if report.differ is not None:  # right where it is read, wrong on another device: wrong values
        device, index = report.differ
        return Verdict(Status.INCORRECT, 0.0, "wrong_values",
                       phrase_program("copies_differ", device=device, index=index))
    report = _repeats_merged(report)
    counts = {k: v for k, v in (report.census or {}).items() if v}
    for name, got, want in zip(q.outputs or ("",), report.out_specs, q.out_specs, strict=True):
        if _normal_spec(got) != _normal_spec(want):
            if not counts and _moves_only(q) and _normal_spec(got) == _normal_spec(q.operands[0].spec):
                return Verdict(Status.INCORRECT, 0.0, "unchanged", phrase_program(
                    "unchanged", got=_spec_text(got), want=_spec_text(want)))
            return Verdict(Status.PARTIAL, 0.5, "wrong_sharding", _named(name, phrase(
                "wrong_sharding", got=_spec_text(got), want=_spec_text(want))))
    expected_counts = {k: v for k, v in q.collectives.items() if v}
    shown = report.collectives
    if len(shown) > SHOWN_COLLECTIVES:  # thousands of distinct ones would flood the feedback: the costliest
        shown = sorted(shown, key=lambda c: -c.bytes_per_device * (c.count or 1))[:SHOWN_COLLECTIVES]
    details = [c.describe() for c in shown]
    if len(report.collectives) > len(shown):
        details.append(phrase_program("collectives+more", n=len(report.collectives) - len(shown)))
    over = _over_memory(q, report.memory)
    held = {"memory": report.memory, "max_bytes": q.max_bytes} if over else {}
    # On a ring question the permutes the compiler placed are weighed as well as counted: one that sends past a
    # neighbour is no ring step, and the bytes of the others count with the program's own.
    ring = bool(expected_counts.get("collective-permute"))
    if ring and report.jumps:
        n = counts.get("collective-permute", 0)
        far = max((sum(c.hops) for c in report.placed), default=2)
        return Verdict(Status.PARTIAL, 0.5, "collectives:not_ring",
                       phrase_program("not_ring", n=report.jumps, count=max(n, report.jumps), far=f"{far:.3g}"),
                       {"collectives": details or counts})
    # a program's compiled collectives, and the model's traffic as they are weighed against each other; for a program
    # that states its own, those are weighed against the model as it stands, and the compiled ones after them
    compiled, compiled_model = _standing_in(report.compiled, expected_counts, traffic)
    model = traffic if report.collectives else compiled_model
    weighed = weighed_collectives(q, replace(report, compiled=compiled))
    moved = collective_traffic(weighed)
    as_compiled = collective_traffic(compiled + report.permutes) if report.collectives else {}
    read_as = (counts, _as_reduce_scatters(counts, expected_counts)) if not report.collectives else (counts,)
    # the compiler's sums of a loss (over each mesh axis, or first one dimension then the rest): the one sum of it
    sums = _bookkeeping(report, traffic)
    _, without = _without_loss_sums(report, counts, sums)
    as_one = without.get("all-reduce", 0) + (1 if sums else 0)
    read_as += (_split_all_reduces_as_one({**counts, "all-reduce": as_one}, report.collectives or report.compiled),)
    if not any(counts_match(c, expected_counts) or _fused(q, c, expected_counts, weighed, moved, model)
               for c in read_as):
        # what a block left to the compiler, or a program that writes none of the collectives asked for (jit), not a
        # count
        if (report.over_left_axes or not report.collectives and expected_counts) and not q.compiler_places \
                and (placed := _compiler_added(report, counts)):
            return _placed(report, placed, details or counts)
        found = "; ".join(details) if details else describe_counts(counts)
        added = _compiler_added(report, counts) if details else {}
        where = "collectives+compiler:left" if report.over_left_axes else "collectives+compiler"
        found += phrase_program(where, found=describe_counts(added)) if added else ""
        expected = describe_counts(expected_counts)
        if model and any(isinstance(n, int) and n > 1 for k, n in expected_counts.items() if k != "collective-permute"):
            expected += phrase_program("collectives+fused")  # ``_fused``: a ring's permutes are its steps
        message = phrase("collectives", found=found, expected=expected)
        message += phrase_program("collectives+halves") if _all_reduces_in_halves(without, expected_counts) else ""
        message += " " + q.collectives_note if q.collectives_note else ""
        message += " " + phrase_program("memory+", **over) if over else ""  # a gather that costs memory says so
        return Verdict(Status.PARTIAL, 0.5, "collectives:" + (",".join(sorted(counts)) or "none"), message,
                       {"collectives": details, **held})
    uncounted = [c.describe() for c in (*(report.collectives or report.compiled), *report.placed)
                 if c.count is None]
    if uncounted:  # counted once, the counts match; but how often the loop runs, nobody can say
        return Verdict(Status.PARTIAL, 0.5, "collectives:unknown_count",
                       phrase_program("unknown_count", found="; ".join(uncounted)), {"collectives": details})
    wasted = _wasted(moved, model, q) if weighed else None
    if wasted is None and as_compiled:  # what the compiler left of the stated ones, and what it placed itself
        wasted = _wasted(as_compiled, compiled_model, q)
        if wasted is not None and wasted["kind"] != BUSIER:
            return Verdict(Status.PARTIAL, 0.5, f"traffic:{wasted['kind']}",
                           phrase_program("traffic:compiled", **wasted),
                           {"collectives": details, "traffic": moved, "compiled_traffic": as_compiled})
    if wasted is not None:
        one_way = wasted["kind"] == BUSIER
        kind = "collective-permute" if one_way else wasted["kind"]
        sentence = "traffic:one_way" if one_way else "traffic:permute" if kind == "collective-permute" else \
            "traffic:in_parts" if kind == "all-reduce" and _sums_in_parts(weighed) else "traffic"
        return Verdict(Status.PARTIAL, 0.5, f"traffic:{kind}{':one_way' if one_way else ''}",
                       phrase_program(sentence, **wasted), {"collectives": details, "traffic": moved})
    if (extra := _extra_compute(report.flops, model_flops)) is not None:
        return Verdict(Status.PARTIAL, 0.5, "compute", phrase_program("compute", **extra),
                       {"collectives": details or counts, "flops": report.flops, "model_flops": model_flops})
    if placed := _placed_for_the_student(q, report, counts, sums):
        return _placed(report, placed, details or counts)
    if over:
        return Verdict(Status.PARTIAL, 0.5, "memory", phrase_program("memory", **over).strip(), held)
    return Verdict(Status.CORRECT, 1.0, "correct", phrase("correct"),
                   {"collectives": details or counts, **({"traffic": moved} if weighed else {}),
                    **({"flops": report.flops} if report.flops is not None and report.flops_exact else {})})


# Fusing moves the same bytes: a fused kind's bytes over each axis set may fall short of the model's by float
# rounding only (ring bytes are products of fractions such as 7/8, summed in another order).
FUSED_RTOL = 1e-6


def _placed(report: Report, placed: dict[str, int], shown: list[str] | dict[str, int]) -> Verdict:
    """Half marks for a program whose collectives the compiler placed (``_placed_for_the_student``), saying which."""
    stated = census(report.collectives)
    return Verdict(Status.PARTIAL, 0.5, "collectives:placed", phrase_program(
        "placed", placed=describe_counts(placed),
        stated=phrase_program("placed+some", stated=describe_counts(stated)) if stated
        else phrase_program("placed+none")), {"collectives": shown})


def _placed_for_the_student(q: ProgramSpec, report: Report, counts: dict[str, int], sums: int) -> dict[str, int]:
    """The collectives the compiler placed beyond those the program writes, on a question whose counts are the
    student's to write (``ProgramSpec.compiler_places``): a program whose counts match only with them let XLA do
    the communication the exercise is about, as does one whose compiled collectives are named after another
    operation (``compiled_hlo.compiler_placed``). Permutes excepted: a ring of neighbour rolls writes every step
    itself (the compiler only turns each roll into its permute), and a roll past a neighbour is refused anyway
    (``not_ring``). Weighed after the traffic, so that a wasteful program hears what it wastes first."""
    if q.compiler_places:
        return {}
    wanted = {k: v for k, v in q.collectives.items() if v}
    if not census(report.collectives):  # as the count read it: on CPU a reduce-scatter compiles to an all-reduce
        counts = _as_reduce_scatters(counts, wanted)
    report, counts = _without_loss_sums(report, counts, sums)  # a loss's sums are not the lesson's communication
    placed = _compiler_added(report, counts, lambda c: _as_reduce_scatters(c, wanted))
    return {k: n for k, n in placed.items() if k != "collective-permute"}


def _compiler_added(report: Report, counts: dict[str, int],
                    read: Callable[[dict[str, int]], dict[str, int]] = dict) -> dict[str, int]:
    """The collectives of ``counts`` the program does not state (the compiler added them: ``added_collectives``),
    with those named after another operation than a collective (``Report.by_compiler``, read by ``read``): a
    stated one the compiler removed does not stand in for one it placed."""
    stated = census(report.collectives)
    added = Counter({k: n - stated.get(k, 0) for k, n in counts.items() if n > stated.get(k, 0)})
    return {k: n for k, n in (added | Counter(read(report.by_compiler or {}))).items() if n}


def _fused(q: ProgramSpec, counts: dict[str, int], wanted: dict[str, Any], weighed: tuple[Collective, ...],
           moved: dict[str, float], model: Mapping[str, float] | None) -> bool:
    """Whether a program that runs fewer collectives of some kinds than the question expects runs the model's plan
    with fewer launches: two weights gathered in one all_gather, two gradients reduce-scattered together (XLA's
    combiners do the same). So it is where, for each kind it runs fewer of, it runs at least one, every one of them
    weighed and counted, each over axes the model runs that kind over and among all the devices of those axes (a
    subgroup of X is not X), and moving the model's bytes of the kind over each axis set (``_fused_bytes``); no kind
    runs more than expected. A ring's permutes are its steps: never fused. Without the model's traffic nothing says
    what the plan moves, and the count decides."""
    if not model:
        return False
    short = []
    for kind in set(counts) | set(wanted):
        n, w = counts.get(kind, 0), wanted.get(kind, 0)
        low, high = (w, w) if isinstance(w, int) else w
        if high is not None and n > high:
            return False
        if n < low:
            short.append(kind)
    sizes = dict(q.mesh)
    for kind in short:
        mine = [c for c in weighed if c.kind == kind]
        if (kind == "collective-permute" or not mine or any(c.count is None for c in mine)
                or sum(c.count or 0 for c in mine) != counts[kind]  # one the compiler added is not weighed
                or any(traffic_over(kind, c.axes) not in model for c in mine)
                or any(c.group_size != math.prod(sizes.get(a, 0) for a in c.axes) for c in mine)
                or not _fused_bytes(kind, moved, model, q)):
            return False
    return bool(short)


def _fused_bytes(kind: str, moved: Mapping[str, float], model: Mapping[str, float], q: ProgramSpec) -> bool:
    """Whether a fused kind moves the model's bytes of that kind over each axis set the model runs it over
    (``collectives.over``): none fewer, beyond float rounding (fewer gathers that move fewer bytes are another plan,
    most often gathered weights kept alive, which the count and the memory bound judge as before), and no more than
    the traffic check allows (``_wasted``), for the kind and for each axis set (bytes may not move from one to
    another)."""
    entries = [k for k in model if k.startswith(traffic_over(kind, ()).removesuffix("no axis"))]
    floor = sum(v for k, v in by_kind(model).items() if k != BUSIER) / 8
    for k in entries:
        got, want = moved.get(k, 0.0), model[k]
        if got < want * (1 - FUSED_RTOL) or (got > q.traffic_slack * want and got - want > floor):
            return False
    return bool(entries) and _wasted({kind: moved.get(kind, 0.0)}, model, q) is None


def _moves_only(q: ProgramSpec) -> bool:
    """Whether the question's whole computation is moving one operand (``ab->ab``): its answer is a sharding."""
    parsed = _terms(q) if not q.reference and not q.out_shape else None
    return parsed is not None and len(parsed[0]) == 1 and parsed[0][0] == parsed[1]


def _least(wanted: dict[str, Any], kind: str) -> int:
    """The fewest collectives of ``kind`` a question asks for: its count, or its range's low end."""
    w = wanted.get(kind, 0)
    return w if isinstance(w, int) else w[0]


def _as_reduce_scatters(found: dict[str, int], wanted: dict[str, Any]) -> dict[str, int]:
    """A compiler-placed census (a ``jit`` program states no collective) read with the all-reduces it shows in place
    of the reduce-scatters asked for: XLA on CPU compiles a reduce-scatter to an all-reduce and a slice, which a
    program written with sharding constraints cannot change."""
    missing = _least(wanted, "reduce-scatter") - found.get("reduce-scatter", 0)
    moved = min(max(missing, 0), found.get("all-reduce", 0))
    out = {**found, "reduce-scatter": found.get("reduce-scatter", 0) + moved,
           "all-reduce": found.get("all-reduce", 0) - moved}
    return {k: v for k, v in out.items() if v}


def _all_reduces_in_halves(found: dict[str, int], wanted: dict[str, Any]) -> bool:
    """Whether the counts are those asked for but for some all-reduces, each written as its two halves: a
    reduce-scatter and an all-gather (sequence parallelism's way), which the question does not ask for."""
    halves = min(found.get("reduce-scatter", 0) - _least(wanted, "reduce-scatter"),
                 found.get("all-gather", 0) - _least(wanted, "all-gather"))
    if halves < 1 or not _least(wanted, "all-reduce"):
        return False
    as_whole = {**found, "reduce-scatter": found.get("reduce-scatter", 0) - halves,
                "all-gather": found.get("all-gather", 0) - halves, "all-reduce": found.get("all-reduce", 0) + halves}
    return counts_match({k: v for k, v in as_whole.items() if v}, wanted)


# The all-reduces the compiler adds to a program that are bookkeeping, not the lesson's communication: a loss summed
# outside the shard_map (``jax.value_and_grad`` of a function of its result, JAX's idiom, which XLA splits into a sum
# over each mesh axis), at most this share of the bytes the model moves.
BOOKKEEPING_SHARE = 1 / 64


def _bookkeeping(report: Report, model: Mapping[str, float] | None) -> int:
    """How many all-reduces the compiler added that are bookkeeping (``BOOKKEEPING_SHARE``); 0 unless every
    all-reduce it added is, and without the model's traffic, unless each sums a single element."""
    stated = Counter()
    for c in report.collectives:
        if c.kind == "all-reduce":
            stated[c.axes, c.dtype, math.prod(c.operand_shape)] += c.count or 1  # a scalar is f32[] or f32[1]
    added: list[Collective] = []
    for c in report.compiled:
        if c.kind != "all-reduce":
            continue
        if c.count is None:
            return 0
        key = (c.axes, c.dtype, math.prod(c.operand_shape))
        kept = min(stated[key], c.count)
        stated[key] -= kept
        if c.count > kept:
            added.append(replace(c, count=c.count - kept))
    if not added:
        return 0
    if model:
        total = sum(v for k, v in by_kind(model).items() if k != BUSIER)
        small = sum(c.bytes_per_device * (c.count or 0) for c in added) <= BOOKKEEPING_SHARE * total
    else:
        small = all(math.prod(c.operand_shape) <= 1 for c in added)
    return sum(c.count or 0 for c in added) if small else 0


def _without_loss_sums(report: Report, counts: dict[str, int], sums: int) -> tuple[Report, dict[str, int]]:
    """The report and the census without the compiler's ``sums`` of a loss (``_bookkeeping``): first those it names
    after another operation (``Report.by_compiler``), the rest from the census, which holds them as all-reduces."""
    named = (report.by_compiler or {}).get("all-reduce", 0)
    by_compiler = {**(report.by_compiler or {}), "all-reduce": max(named - sums, 0)}
    counts = {**counts, "all-reduce": counts.get("all-reduce", 0) - max(sums - named, 0)}
    return (replace(report, by_compiler={k: n for k, n in by_compiler.items() if n} if report.by_compiler is not None
                    else None), {k: n for k, n in counts.items() if n > 0})


# The kinds whose stated repeats the compiler may merge (``_repeats_merged``): a ring's permutes are its steps, and
# the compiled program shows them per array (``collectives.RingSteps``), so they are never read so.
_MERGEABLE = ("all-gather", "reduce-scatter", "all-reduce")


def _repeats_merged(report: Report) -> Report:
    """The program as it runs where the compiler merged its repeats: a stated collective of the same kind, axes,
    element type and operand as others (a forward pass recomputed in the backward one, ``jax.checkpoint``, gathers
    each weight again) counts as often as the compiled program runs it, where that is fewer times but once at least.
    What runs is what is weighed: a repeat XLA:CPU merged moves nothing (on a TPU, it moves the recomputation's
    bytes, the memory it saves paid for). A collective of a loop of unknown length is left as it is."""
    if not report.collectives or not report.compiled:
        return report
    ran: dict[tuple[Any, ...], int | None] = {}
    for c in report.compiled:
        key = (c.kind, c.axes, c.dtype, c.operand_shape)
        have = ran.get(key, 0)
        ran[key] = None if c.count is None or have is None else have + c.count
    left = {k: n for k, n in ran.items() if k[0] in _MERGEABLE and n}  # runs of each stated key still to give out
    merged, fewer = [], Counter()
    for c in report.collectives:
        key = (c.kind, c.axes, c.dtype, c.operand_shape)
        if key not in left or c.count is None:
            merged.append(c)
            continue
        keep = min(c.count, left[key])
        left[key] -= keep
        fewer[c.kind] += c.count - keep
        if keep:
            merged.append(replace(c, count=keep))
    stated = census(report.collectives)
    if not fewer or any(stated.get(k, 0) - n < 1 for k, n in fewer.items()):
        return report
    census_left = {k: v - fewer.get(k, 0) for k, v in (report.census or {}).items()}
    return replace(report, collectives=tuple(merged), census=census_left)


def _split_all_reduces_as_one(found: dict[str, int], collectives: Sequence[Collective]) -> dict[str, int]:
    """The census with each set of all-reduces of one operand over disjoint axes counted as one all-reduce over their
    union, which it is, done in parts: a sum over Y then over X is the sum over both. XLA splits the all-reduce of a
    scalar loss summed outside a shard_map over a 4 x 2 mesh into one over each axis, and a student may write
    psum(psum(loss, 'Y'), 'X'); either is the one all-reduce a training step asks for (their bytes are still weighed
    against the model's)."""
    merged = sum((len(members) - 1) * members[0].count for members in _sums_in_parts(collectives))
    left = found.get("all-reduce", 0) - merged
    return {k: v for k, v in {**found, "all-reduce": left}.items() if v > 0}


def _sums_in_parts(collectives: Sequence[Collective]) -> list[list[Collective]]:
    """The sets of all-reduces of one operand (element type, size, count) over disjoint axes: one sum done an axis
    at a time."""
    groups: dict[tuple, list[Collective]] = {}
    for c in collectives:
        if c.kind == "all-reduce" and c.count is not None:
            groups.setdefault((c.dtype, math.prod(c.operand_shape), c.count), []).append(c)
    return [members for members in groups.values()
            if len(members) > 1 and len(axes := [a for c in members for a in c.axes]) == len(set(axes))]


def weighed_collectives(q: ProgramSpec, report: Report) -> tuple[Collective, ...]:
    """The collectives whose bytes are weighed: those the program states, the permutes the compiler placed on a ring
    question, and, for a program that states none, those the compiler placed. The model's traffic
    (``release.measure_traffic``) is measured over the same, so a ``jit`` model has a yardstick too."""
    ring = bool(q.collectives.get("collective-permute"))
    return (report.collectives or report.compiled) + (report.placed if ring else ())


def _standing_in(compiled: tuple[Collective, ...], wanted: dict[str, Any], model: Mapping[str, float] | None
                 ) -> tuple[tuple[Collective, ...], Mapping[str, float] | None]:
    """The compiler's collectives and the model's traffic as they are weighed against each other. XLA on CPU compiles
    a reduce-scatter to an all-reduce of the same operand and a slice: where the question asks for reduce-scatters
    the compiled program lacks, its all-reduces are weighed as reduce-scatters of their operands (never as
    all-reduce bytes beside a reduce-scatter), and the model's all-reduce and reduce-scatter bytes as one; a real
    all-reduce among them then counts half its bytes, which spares every honest program."""
    want = _least(wanted, "reduce-scatter")
    have = sum(c.kind == "reduce-scatter" for c in compiled)
    if not compiled or want <= have or not any(c.kind == "all-reduce" for c in compiled):
        return compiled, model
    moved = tuple(replace(c, kind="reduce-scatter") if c.kind == "all-reduce" else c for c in compiled)
    if not model:
        return moved, model
    both: dict[str, float] = {}
    for k, v in model.items():  # by kind, and by the axes each kind runs over (``collectives.over``)
        k = "reduce-scatter" + k.removeprefix("all-reduce") if k.startswith("all-reduce") else k
        both[k] = both.get(k, 0.0) + v
    return moved, both


def _wasted(moved: dict[str, float], model: Mapping[str, float] | None, q: ProgramSpec) -> dict[str, Any] | None:
    """The kind of collective a program moves the most bytes of beyond the model's (more than the question's
    ``traffic_slack`` times as many, and more than an eighth of all the model moves: a loss psummed with its
    count is not waste), with what its sentence quotes; the busier direction of its permutes too where the
    question asks for both directions. None when it moves no more than it needs, or nothing measured the model."""
    if not model:
        return None
    moved, model = by_kind(moved), by_kind(model)  # the bytes of each kind, whatever axes they run over
    floor = sum(v for k, v in model.items() if k != BUSIER) / 8
    over = [(got / want, kind, got, want) for kind, got in moved.items()
            if (kind != BUSIER or q.both_ways) and (want := model.get(kind, 0.0)) > 0
            and got > q.traffic_slack * want and got - want > floor]
    if not over:
        return None
    k, kind, got, want = max(over)
    return {"kind": kind, "k": f"{k:.1f}", "got": got, "want": want}


# A program may do this many times the model's matrix-product FLOPs before it is held to be wasting them: a training
# step that recomputes its forward pass (``jax.checkpoint``: 4/3 of the model's), or takes a gradient it then drops,
# stays under it; a product formed before it is needed (``W_in @ W_out``) or a whole product on every device where
# each keeps an eighth is far over it.
COMPUTE_SLACK = 2.0


def _extra_compute(flops: float | None, model: float | None) -> dict[str, str] | None:
    """What the compute sentence quotes, where a program's matrix products do more than ``COMPUTE_SLACK`` times the
    model's FLOPs (the program's counted as ``matmul_flops`` counts them: a loop of unknown length once, as few as
    it may run); None where they do not, or either count is missing, or the model does no matrix product (a
    question about moving data: a one-hot product that places a block is no waste of the course's kind)."""
    if flops is None or not model or flops <= COMPUTE_SLACK * model:
        return None
    return {"k": f"{flops / model:.1f}", "got": f"{flops:.3g}", "want": f"{model:.3g}"}


def _named(name: str, message: str) -> str:
    """A sentence about one of several results, saying which."""
    return phrase_program("output", name=name, message=message) if name else message


def _diagnose_outputs(q: ProgramSpec, outs: tuple[np.ndarray, ...], wanted: tuple[np.ndarray, ...],
                      seed: int) -> Finding | None:
    """The first wrong result, diagnosed; a program of one result gets the full analysis of its shardings."""
    if not q.outputs:
        return diagnose(q, outs[0], wanted[0], seed)
    reordered = _reordered(q, outs, wanted)
    if reordered is not None:
        return reordered
    results = zip(q.outputs, outs, wanted, strict=True)
    # Arrays before scalars: a gradient's factor is measured on many entries, a loss's on one.
    for name, got, want in sorted(results, key=lambda r: -r[2].size):
        finding = diagnose_array(got, want, q.rtol, q.atol, q.mesh, f"the expected {name}")
        if finding is not None:
            return Finding(f"{finding.code}@{name}", _named(name, finding.message), {**finding.data, "output": name})
    return None


def _reordered(q: ProgramSpec, outs: tuple[np.ndarray, ...], wanted: tuple[np.ndarray, ...]) -> Finding | None:
    """Right results returned in another order than the question names them (each order of a few results is
    tried), which would otherwise read as a wrong shape or wrong values of the first one out of place."""
    if len(outs) > 4 or not all(o.dtype.kind in "biuf" for o in outs):
        return None
    # order[i]: where the i-th named result was returned; the first order tried is the named one, so results
    # that are right as they stand (two equal ones included) are never called reordered
    for order in itertools.permutations(range(len(outs))):
        if all(result_tolerance(q.rtol, q.atol, want, outs[j].dtype.kind in "biu")
               .same(outs[j].astype(np.float64), want) for j, want in zip(order, wanted, strict=True)):
            if order == tuple(range(len(outs))):
                return None
            returned = [q.outputs[order.index(j)] for j in range(len(outs))]
            return Finding("output_order", phrase_program("output_order", got=", ".join(returned),
                                                          want=", ".join(q.outputs)), {"order": returned})
    return None


def _over_memory(q: ProgramSpec, memory: dict[str, int] | None) -> dict[str, Any]:
    """What the memory sentences cite when the program holds more per device than the exercise allows
    (results and temporaries); empty when it does not, or when nothing bounds or measured it."""
    if not q.max_bytes or memory is None:
        return {}
    held = memory["outputs"] + memory["temporaries"]
    if held <= q.max_bytes:
        return {}
    return {"held": held, "limit": q.max_bytes, "k": f"{held / q.max_bytes:.1f}", "why": q.over_memory}


def not_a_program(blob: Any, axes: Sequence[str] = (), note: str = "") -> Verdict | None:
    """The verdict on a record that holds no program (the kernel could not lower the function, or
    recorded something else), or None for an artefact to run. ``axes``: the mesh's, which a sentence about
    a collective names; ``note``: ``lowering_verdict``'s."""
    if isinstance(blob, dict) and "error" in blob:
        return lowering_verdict(error_text(blob["error"]), blob.get("at"), axes, note)
    if not isinstance(blob, str):
        return Verdict(Status.INVALID, 0.0, "wrong_type", phrase("no_program"))
    return None


# Why a function could not be exported, where JAX's own words mislead or say nothing (``lowering_verdict``).
_ERROR = re.compile(r"([A-Za-z_][\w.]*): ?(.*)", re.S)  # "Kind: text", as the kernel records it
_HOST_CALLBACK = re.compile(r"host_callback")  # jax.debug.print, jax.debug.callback, io_callback, pure_callback
_INSIDE_JIT = re.compile(r"`?(\w+)`? can only be used outside of `?jax\.jit")  # jax.set_mesh in the function
_NO_CONTEXT_MESH = re.compile(r"context mesh cannot be empty")
# A value of the traced program asked for as a concrete one: np.asarray, float(), .item(), an if on an array, or a
# method only a concrete array has (.block_until_ready()): right when run eagerly, refused when traced.
_CONCRETE = re.compile(r"Tracer(Array|Bool|Integer)ConversionError|ConcretizationTypeError|"
                       r"'\w*Tracer' object has no attribute|method is not available on traced array")
# JAX's refusal of in_specs where the inputs, split as the question says on the course's mesh, read as unsplit: the
# shard_map's mesh is another one (jax.make_mesh's axes are Explicit in this JAX), not the spec, as JAX's words say.
_OTHER_MESH = re.compile(r"in_specs passed to shard_map: .* does not match the specs of the input: "
                         r"P\((?:None, )*None\)")
_TIMED_OUT = re.compile(record.TIMED_OUT.format(r"(\S+)"))  # the self-check stopped the trace (record.bounded_trace)
_UNBOUND_AXIS = re.compile(r"unbound axis name: ([\w-]+)")
# A shard_map result claimed the same along axes the function leaves it different on (JAX's "vma" check).
_REPLICATION = re.compile(r"out_specs (?:at \S+ )?is (P\(.*?\)) which implies that the corresponding output value "
                          r"is replicated across mesh ax[ie]s (.+?), but could not infer", re.S)
# A call of a collective that names mesh axes, and a quoted name, on a line of the student's code.
_COLLECTIVE_CALL = re.compile(r"\b(psum_scatter|psum|pmean|pmax|pmin|ppermute|pshuffle|all_gather|all_to_all|"
                              r"axis_index)\s*\(")
_QUOTED_NAME = re.compile(r"""(['"])([A-Za-z_]\w{0,39})\1""")
AT_CHARS = 160  # of the line of the student's code that a recorded error points at


def _library_dirs() -> tuple[str, ...]:
    """Folders whose code is no student's: Python's own, installed packages, JAX and numpy, this package and
    the course's."""
    paths = sysconfig.get_paths()
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")} | {
        here, os.path.join(os.path.dirname(here), "course")}
    dirs |= {os.path.dirname(getattr(sys.modules.get(m), "__file__", None) or "") for m in ("jax", "jaxlib", "numpy")}
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs if d)


def failing_line(e: BaseException) -> str:
    """The line of the student's code an exception came from (the last frame of its traceback outside the
    libraries), or "" where there is none, as for an error JAX raises after tracing. Never raises."""
    try:
        libraries = _library_dirs()
        own = [f for f in traceback.extract_tb(e.__traceback__)
               if not os.path.abspath(f.filename).startswith(libraries)]
        return (own[-1].line or "").strip()[:AT_CHARS] if own else ""
    except Exception:
        return ""


def lowering_error(e: BaseException) -> dict[str, str]:
    """What the kernel records when a function cannot be exported: JAX's error, and the line it came from."""
    line = failing_line(e)
    return {"error": f"{type(e).__name__}: {error_text(e)}", **({"at": line} if line else {})}


def lowering_verdict(error: str, at: Any, axes: Sequence[str], note: str = "") -> Verdict:
    """The verdict on a function that could not be exported, from its record (``lowering_error``; ``at`` may be
    missing). JAX's words, except where they mislead or say nothing: a host callback and a mesh set inside the
    function are programs the check cannot export (invalid: nothing was judged); a collective over an axis the
    mesh lacks raises an AssertionError without a message; any error without one gets its type and a hint.
    ``note``: a sentence the caller adds after the verdict's (the self-check's "devices:program_mesh", on a kernel
    with more devices than the question's mesh)."""
    stopped = _TIMED_OUT.fullmatch(error)
    if stopped:  # the self-check stopped its trace: an endless loop, most likely, with no error of its own
        return Verdict(Status.INCORRECT, 0.0, "timeout:trace", phrase("timeout:trace", seconds=stopped.group(1)))
    at = at.strip()[:AT_CHARS] if isinstance(at, str) else ""
    m = _ERROR.fullmatch(error)
    kind, detail = (m.group(1), m.group(2).strip()) if m else ("", error)
    ctx = {"kind": kind, "axes": ", ".join(axes) or "none", "at": f" (at `{at}`)" if at else ""}
    invalid = False
    if _HOST_CALLBACK.search(detail):
        sentence, invalid = phrase_program("lowering:callback"), True
    elif inside := _INSIDE_JIT.search(detail):
        sentence, invalid = phrase_program("lowering:inside_jit", name=inside.group(1), **ctx), True
    elif m and not detail:
        sentence = _without_message(kind, at, axes, ctx)
    elif replication := _REPLICATION.search(detail):  # JAX's advice (check_vma=False) would hide the slip
        names = [name for _, name in _QUOTED_NAME.findall(replication.group(2))] or [replication.group(2)]
        sentence = phrase_program("lowering:replication", spec=replication.group(1), axes=" and ".join(names),
                                  axes_arg=repr(names[0]) if len(names) == 1 else repr(tuple(names)))
    else:  # JAX's words, and where they send the student astray, a sentence of the course's after them
        unbound = _UNBOUND_AXIS.search(detail)
        more = (phrase_program("lowering+no_mesh") if _NO_CONTEXT_MESH.search(detail)
                else phrase_program("lowering+concrete") if _CONCRETE.search(error)
                else phrase_program("lowering+other_mesh") if _OTHER_MESH.search(detail)
                else phrase_program("lowering+axes", **ctx) if unbound and axes and unbound.group(1) not in axes
                else "")
        said = error.rstrip().rstrip(".") + ctx["at"] + "." if at else error  # the student's line that raised
        sentence = said.rstrip().rstrip(".") + "." + more if more else said
    message = phrase("raised:lowering", error=sentence)
    message = message.rstrip().rstrip(".") + "." + note if note else message
    return Verdict(Status.INVALID if invalid else Status.INCORRECT, 0.0, "raised", message)


def _without_message(kind: str, at: str, axes: Sequence[str], ctx: dict[str, str]) -> str:
    """An exception without a message. JAX raises a bare AssertionError for a psum, pmean or ppermute over an axis
    the mesh lacks (when shard_map checks what varies over which axis): named where the failing line shows it."""
    if kind != "AssertionError":
        return phrase_program("lowering:empty", **ctx)
    bad = next(((op, name) for op, name in _collective_axes(at) if axes and name not in axes), None)
    if bad:
        return phrase_program("lowering:axis", op=bad[0], name=f"'{bad[1]}'", **ctx)
    return phrase_program("lowering:assertion", **ctx)


def _collective_axes(line: str) -> list[tuple[str, str]]:
    """(collective, axis) for each axis that a call of a collective on ``line`` names by a quoted name (its axis
    argument: the first of axis_index, the second of the others, or axis_name=; a name or a tuple of them)."""
    found = []
    for m in _COLLECTIVE_CALL.finditer(line):
        args = _arguments(line, m.end())
        keyword = [a.split("=", 1)[1] for a in args if re.match(r"\s*axis_name\s*=", a)]
        index = 0 if m.group(1) == "axis_index" else 1
        axis = keyword[0] if keyword else args[index] if len(args) > index else ""
        found += [(m.group(1), name) for _, name in _QUOTED_NAME.findall(axis)]
    return found


def _arguments(line: str, start: int) -> list[str]:
    """The top-level arguments, as text, of the call whose "(" ends just before ``start`` (to the end of the line
    where the call goes on past it)."""
    args, current, depth = [], "", 0
    for ch in line[start:]:
        if ch in ")]}" and depth == 0:
            break
        if ch == "," and depth == 0:
            args, current = [*args, current], ""
            continue
        depth += (ch in "([{") - (ch in ")]}")
        current += ch
    return [*args, current]


def run_items(items: list[dict[str, Any]], *, make_mesh: MeshFactory) -> dict[str, dict[str, Any]]:
    """qid -> report (as JSON) for runner items {"qid", "spec", "blob", "seed"}: what the jailed runner
    (grading/run_programs.py) answers, computed in this process."""
    return {i["qid"]: report_to_json(run_exported(ProgramSpec.from_json(i["spec"]), i["blob"], int(i["seed"]),
                                                  make_mesh=make_mesh))
            for i in items}
