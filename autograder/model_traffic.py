"""The bytes a program question's model solution moves, by kind of collective (``collectives.traffic``), at
each spec it is judged at: the yardstick for a student's program that computes the right numbers with the
right collectives but sends more than it needs (the whole buffer round a ring at every step, a permute that
jumps over devices, a "bidirectional" ring that sends everything one way).

The numbers are measured, never typed: ``scaling-course release`` exports each model at each of its specs
(every variant's values, every mesh choice) and keeps what it moves in ``solutions/program_traffic.json``,
keyed by question and by a digest of the spec and of the program the model exports there (``table_key``): a model
changed under an unchanged spec is measured again. The grader reads them from there by the spec alone
(``expected``); the release writes each question's into its self-check data, so the self-check compares with the
same numbers. ``tests/chapters/test_every_chapter.py`` checks that every model still moves what the file says, and
``tests/grading/test_program_traffic.py`` that no entry is stale.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .questions import Chapter, Program, ProgramSpec

FILE_NAME = "program_traffic.json"
# The entry of a spec's figures that is no collective: the FLOPs per device of the model's matrix products
# (``compiled_hlo.matmul_flops``), which a student's are weighed against (``programs.judge_report``).
MATMUL_FLOPS = "matmul FLOPs"


# What ``collectives.traffic`` measures, in which version: a change of the measure is a new key for every spec, so
# the release measures every model again.
MEASURE = 6  # 3: a program that states no collective is weighed by those the compiler placed; 4: each kind's
# bytes by the axes it runs over too (``collectives.over``), which a program of fewer collectives is held to; 5: the
# FLOPs of its matrix products (``MATMUL_FLOPS``); 6: those of floating-point reductions only


def spec_key(spec: ProgramSpec) -> str:
    """A digest of everything the question states (another shape, mesh or expected collective is another key),
    and of the measure's version."""
    text = json.dumps([MEASURE, spec.to_json()], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def program_digest(blob: str) -> str:
    """A digest of an exported program (``programs.export``'s base64 text) as its StableHLO reads without source
    locations: what decides the traffic, and nothing of where the model's file lies or on which line."""
    import base64

    import jax

    text = jax.export.deserialize(bytearray(base64.b64decode(blob))).mlir_module()
    return hashlib.sha256(_without_locations(text).encode()).hexdigest()[:16]


def _without_locations(text: str) -> str:
    """MLIR text without its ``#locN = ...`` lines and ``loc(...)`` attributes (nested, quoted file names)."""
    text = "\n".join(line for line in text.splitlines() if not line.startswith("#loc"))
    out, i = [], 0
    while (j := text.find(" loc(", i)) >= 0:
        out.append(text[i:j])
        k, depth = j + len(" loc("), 1
        while depth:
            if text[k] == '"':
                k = text.index('"', k + 1)
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            k += 1
        i = k
    return "".join(out) + text[i:]


def table_key(spec: ProgramSpec, blob: str) -> str:
    """The table's key of a model's figures: the spec's digest, then the exported program's (``program_digest``)."""
    return f"{spec_key(spec)}-{program_digest(blob)}"


def judged_specs(q: Program) -> list[ProgramSpec]:
    """The specs a program question is judged at: its own, or one per mesh shape the student may choose."""
    return [q.spec.at(c.mesh) for c in q.spec.mesh_choices] if q.spec.mesh_choices else [q.spec]


def programs_of(chapter: Chapter) -> Iterator[Program]:
    """Every program record a student of the chapter may be dealt: the book's, and each setting's at every
    valid choice of its values."""
    seen: set[tuple[str, str]] = set()
    built = [q for q in chapter.questions if isinstance(q, Program)]
    for item in chapter.items:
        if hasattr(item, "combos") and any(isinstance(q, Program) for q in item.records(item.book)):
            built += [q for values in item.combos() for q in item.records(values) if isinstance(q, Program)]
    for q in built:
        key = (q.qid, spec_key(q.spec))
        if key not in seen:
            seen.add(key)
            yield q


def table_path() -> Path | None:
    """Where the grader's table lies: beside the records (none in the student's package, which has no records)."""
    found = importlib.util.find_spec("solutions")
    locations = list(found.submodule_search_locations or []) if found else []
    return Path(locations[0]) / FILE_NAME if locations else None


@functools.cache
def table() -> dict[str, dict[str, dict[str, float]]]:
    """qid -> table key (``table_key``) -> kind -> bytes per device; read once per process (``table.cache_clear``
    rereads)."""
    path = table_path()
    return json.loads(path.read_text()) if path is not None and path.exists() else {}


def expected(q: Program) -> dict[str, dict[str, float]]:
    """The model's traffic at each spec the question is judged at, by spec key (what the self-check data holds):
    the table's entry of that spec, whatever program it was measured on (a stale one fails the table's test)."""
    by_spec = {key.split("-", 1)[0]: kinds for key, kinds in sorted(table().get(q.qid, {}).items())}
    return {k: by_spec[k] for k in (spec_key(s) for s in judged_specs(q)) if k in by_spec}


def at(traffic: Mapping[str, Mapping[str, float]] | None, spec: ProgramSpec) -> dict[str, float] | None:
    """The model's traffic at the one spec a record is judged at (None where none was measured)."""
    found = (traffic or {}).get(spec_key(spec))
    return dict(found) if found is not None else None


def text(entries: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """The table as its file holds it: one question a line, sorted, so a change reads as a small diff."""
    lines = [f"{json.dumps(qid)}: {json.dumps(entries[qid], sort_keys=True)}" for qid in sorted(entries)]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def as_json(traffic: Mapping[str, float]) -> dict[str, Any]:
    return {k: round(float(v), 3) for k, v in sorted(traffic.items())}
