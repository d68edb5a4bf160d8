"""Program answers: export a student's JAX function, run it on fresh random inputs, inspect it.

The student's kernel only *lowers* the function (``jax.export``) and records the serialized
program. The grader deserializes it in a separate process, runs it on inputs it draws itself and
counts the collectives in the program it compiled itself, so the artefact that is checked for
numerics is the same one checked for communication, and no student Python runs at grading time.
A forged artefact is only another program, judged like any other.

The same ``run`` serves the offline self-check, on the live function.
"""

from __future__ import annotations

import base64
import io
import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .collectives import Collective, census, compiled_census, inspect_text
from .questions import ProgramSpec
from .verdict import Status, Verdict

# Custom calls that sharding annotations lower to; anything else (host callbacks above all) would
# run code outside the program, and is refused.
ALLOWED_CUSTOM_CALLS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                  "xla.sdy.FuncResultSharding", "xla.sdy.GlobalToLocalShape",
                                  "xla.sdy.LocalToGlobalShape", "annotate_device_placement"})
_CUSTOM = re.compile(r"custom_call\s*@([\w.$-]+)|call_target_name\s*=\s*\"([^\"]+)\"")


@dataclass(frozen=True)
class Report:
    """What running one program showed; ``error`` set when it could not run at all."""

    output: np.ndarray | None = None
    out_spec: tuple | None = None
    census: dict[str, int] | None = None  # executions per collective kind
    collectives: tuple[Collective, ...] = ()  # empty when counted in the compiled program
    error: str = ""
    error_code: str = "raised"


def _mesh(q: ProgramSpec):
    from course.devices import mesh

    return mesh(**dict(q.mesh))


def _sharding(q: ProgramSpec, spec: tuple):
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(_mesh(q), PartitionSpec(*spec))


def inputs(q: ProgramSpec, seed: int) -> list[np.ndarray]:
    """Random normal inputs (never arange or zeros: regular data hides indexing bugs)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(op.shape).astype(op.dtype) for op in q.operands]


def export(q: ProgramSpec, fn: Any) -> str:
    """Lower ``fn`` for the question's operand shapes and shardings; base64 of the serialized
    program. Raises what jax raises when the function cannot be traced."""
    import jax

    args = [jax.ShapeDtypeStruct(op.shape, op.dtype, sharding=_sharding(q, op.spec)) for op in q.operands]
    exported = jax.export.export(jax.jit(fn))(*args)
    return base64.b64encode(exported.serialize()).decode()


def run(q: ProgramSpec, fn: Any, seed: int) -> Report:
    """Run a callable (a live function, or a deserialized program's ``call``) and inspect it."""
    import jax

    try:
        args = [jax.device_put(x, _sharding(q, op.spec)) for x, op in zip(inputs(q, seed), q.operands, strict=True)]
        jitted = jax.jit(fn)
        out = jitted(*args)
        lowered = jitted.lower(*args)
        found = tuple(inspect_text(lowered.as_text(), q.mesh))
        counts = census(found) if found else compiled_census(lowered.compile().as_text())
    except Exception as e:  # the student's program failed to trace, compile or run
        return Report(error=f"{type(e).__name__}: {str(e)[:400]}")
    if not isinstance(out, jax.Array):
        return Report(error=f"the function returned {type(out).__name__}, not an array", error_code="wrong_type")
    spec = getattr(out.sharding, "spec", None)
    return Report(np.asarray(out), tuple(spec) if spec is not None else None, counts, found)


def foreign_calls(mlir_text: str) -> list[str]:
    """Custom-call targets other than sharding markers (host callbacks would run code)."""
    targets = (m.group(1) or m.group(2) for m in _CUSTOM.finditer(mlir_text))
    return [t for t in targets if t not in ALLOWED_CUSTOM_CALLS]


def run_exported(q: ProgramSpec, blob: str, seed: int) -> Report:
    """Deserialize a recorded program, refuse foreign code in it, check its signature, run it."""
    import jax

    try:
        exported = jax.export.deserialize(bytearray(base64.b64decode(blob, validate=True)))
    except Exception as e:
        return Report(error=f"the recorded program cannot be read ({type(e).__name__})", error_code="bad_program")
    foreign = foreign_calls(exported.mlir_module())
    if foreign:
        return Report(error=f"the program calls {foreign[0]!r}, which is not allowed here", error_code="bad_program")
    want = [(tuple(op.shape), np.dtype(op.dtype)) for op in q.operands]
    got = [(tuple(a.shape), np.dtype(a.dtype)) for a in exported.in_avals]
    if got != want or exported.nr_devices != _device_count(q):
        return Report(error=f"the program takes {got} on {exported.nr_devices} devices", error_code="bad_program")
    return run(q, exported.call, seed)


def report_to_json(r: Report) -> dict[str, Any]:
    out = None
    if r.output is not None:
        buf = io.BytesIO()
        np.save(buf, r.output, allow_pickle=False)
        out = base64.b64encode(buf.getvalue()).decode()
    return {"output": out, "out_spec": None if r.out_spec is None else list(r.out_spec), "census": r.census,
            "collectives": [asdict(c) for c in r.collectives], "error": r.error, "error_code": r.error_code}


def report_from_json(d: dict[str, Any]) -> Report:
    """Read a runner's report; it came from a process that ran foreign code, so check its types."""
    out = None
    if d.get("output"):
        out = np.load(io.BytesIO(base64.b64decode(d["output"])), allow_pickle=False)
    collectives = tuple(Collective(c["kind"], tuple(c["axes"]), c["dtype"], tuple(c["operand_shape"]),
                                   int(c["group_size"]), c["count"]) for c in d.get("collectives") or [])
    spec = d.get("out_spec")
    return Report(out, None if spec is None else tuple(spec), {str(k): int(v) for k, v in (d.get("census") or
                                                                                            {}).items()},
                  collectives, str(d.get("error") or ""), str(d.get("error_code") or "raised"))


def _device_count(q: ProgramSpec) -> int:
    return int(np.prod([n for _, n in q.mesh]))


def expected(q: ProgramSpec, seed: int) -> np.ndarray:
    """The mathematical result in float64, from the public einsum (on each operand's view)."""
    views = [x.astype(np.float64).reshape(op.view or op.shape) for x, op in zip(inputs(q, seed), q.operands,
                                                                                strict=True)]
    out = np.einsum(q.einsum, *views, optimize=True)
    return out.reshape(q.out_shape) if q.out_shape else out


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


def judge_report(q: ProgramSpec, report: Report, seed: int) -> Verdict:
    """Numerics first (a wrong result is wrong however it communicates), then the output sharding,
    then the collectives: a right but wasteful program earns partial credit."""
    if report.error:
        return Verdict(Status.INCORRECT, 0.0, report.error_code, f"Your program could not be checked: {report.error}")
    want = expected(q, seed)
    out = report.output
    if out is None or out.shape != want.shape:
        got = "nothing" if out is None else f"shape {out.shape}"
        return Verdict(Status.INCORRECT, 0.0, "wrong_shape", f"The result has {got}; expected shape {want.shape}.")
    bad = ~np.isclose(out.astype(np.float64), want, rtol=q.rtol, atol=q.atol)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        return Verdict(Status.INCORRECT, 0.0, "wrong_values",
                       f"The result differs from {q.einsum} on random inputs in {int(bad.sum())} of {bad.size} "
                       f"entries; the first is at index {index}: got {out[index]:.6g}, expected {want[index]:.6g}.")
    if _normal_spec(report.out_spec) != _normal_spec(q.out_spec):
        return Verdict(Status.PARTIAL, 0.5, "wrong_sharding",
                       f"Right numbers, but the result is sharded as {_spec_text(report.out_spec)}; "
                       f"expected {_spec_text(q.out_spec)}.")
    counts = {k: v for k, v in (report.census or {}).items() if v}
    expected_counts = {k: v for k, v in q.collectives.items() if v}
    details = [c.describe() for c in report.collectives]
    if not counts_match(counts, expected_counts):
        found = "; ".join(details) if details else describe_counts(counts)
        return Verdict(Status.PARTIAL, 0.5, "collectives:" + ",".join(sorted(counts)),
                       f"Right numbers, but your program runs {found}; expected {describe_counts(expected_counts)}.",
                       {"collectives": details})
    return Verdict(Status.CORRECT, 1.0, "correct", "Correct.", {"collectives": details or counts})


def judge_program(q: ProgramSpec, blob: Any, seed: int = 0) -> Verdict:
    """Grader side: ``blob`` is what the student's kernel recorded."""
    if isinstance(blob, dict) and "error" in blob:
        return Verdict(Status.INCORRECT, 0.0, "raised", f"Your function could not be lowered: {blob['error']}")
    if not isinstance(blob, str):
        return Verdict(Status.INVALID, 0.0, "wrong_type", "Expected a function (the recorded program is missing).")
    return judge_report(q, run_exported(q, blob, seed), seed)
