"""The results of the single-device references at the self-check's inputs, kept as data.

Why: a program question whose computation is not one einsum is judged against a reference on one device
(``autograder/program_references/``), and those references are answers in their own right: attention and a
decode step on one device are function questions of Chapters 4 and 7. The self-check runs on the learner's
machine, always at one public seed (``programs.SELFCHECK_SEED``), so ``scaling-course release`` keeps what it
needs of them there, and the student's package, which leaves the references out, reads it back. The grader
computes them at every other seed.

Under ``course/fingerprints/programs/<chapter>/``, a spec's results are kept in ``results-<key>.npys`` (``key``: a hash
of what the results depend on: the reference, the operands' shapes, types and views, the outputs; one file serves
every mesh a student may choose), and where a psum could be left out, each device's share of the result (the
reference on the blocks of the operands it holds, ``programs.reference_shares``) in ``shares-<key>.npys`` (the
whole spec's hash). Each file is a run of ``.npy`` records, plain bytes that are the same at every release (a zip's
entries are dated): how many arrays, then each (an empty int8 record for a share whose blocks do not compose).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .questions import ProgramSpec

FOLDER = "programs"  # under course/fingerprints/
SUFFIX = ".npys"
# The results are kept as float32: a rounding of 6e-8 of each value, far inside any program's tolerance (rtol
# 1e-4, and an atol of rtol times the result's root-mean-square entry); 3.7 MB for the course, not 7.4.
KEPT_AS = np.float32
_NONE = np.zeros(0, np.int8)  # a share whose blocks do not compose

Arrays = list[np.ndarray | None]


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:24]


def results_name(spec: ProgramSpec) -> str:
    d = spec.to_json()
    return "results-" + _hash([d.get("reference"), d.get("outputs"), d["out_shape"],
                               [[o["shape"], o["dtype"], o["view"]] for o in d["operands"]]])


def shares_name(spec: ProgramSpec) -> str:
    return "shares-" + _hash(spec.to_json())


def slips_name(qid: str, spec: ProgramSpec) -> str:
    """The results (``sampled``), at the self-check's seed, of a program question's slips told apart by their values
    alone (``kinds.program.value_slips``), one run after another: what a wrong program's results are compared with."""
    return "slips-" + _hash([qid, spec.to_json()])


# A slip's result is kept as this many of its entries, evenly spaced (all of a smaller one): enough that no other
# wrong program's results match them by chance, and the course's slips take 0.4 MB, not 10.
SLIP_ENTRIES = 256


def sampled(a: np.ndarray) -> np.ndarray:
    """The entries of ``a`` a slip's result is kept and compared by (``SLIP_ENTRIES``), flattened."""
    flat = np.asarray(a).reshape(-1)
    n = min(flat.size, SLIP_ENTRIES)
    return flat[np.unique(np.linspace(0, flat.size - 1, n).round().astype(np.int64))] if n else flat


def encode(arrays: Arrays) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([len(arrays)], np.int64), allow_pickle=False)
    for a in arrays:
        np.save(buffer, _NONE if a is None else np.asarray(a, KEPT_AS), allow_pickle=False)
    return buffer.getvalue()


def decode(data: bytes) -> Arrays:
    buffer = io.BytesIO(data)
    (n,) = (int(k) for k in np.load(buffer, allow_pickle=False))
    arrays = [np.load(buffer, allow_pickle=False) for _ in range(n)]
    return [None if a.dtype == np.int8 else a.astype(np.float64) for a in arrays]


def computed(spec: ProgramSpec) -> dict[str, bytes]:
    """A reference program's files by name, from the references (the release's)."""
    from .programs import SELFCHECK_SEED, reference_outputs, reference_shares, unsummed_axes

    files = {results_name(spec): encode(list(reference_outputs(spec, SELFCHECK_SEED)))}
    if unsummed_axes(spec):
        files[shares_name(spec)] = encode(reference_shares(spec, SELFCHECK_SEED))
    return files


@functools.cache
def _files() -> dict[str, Any]:
    folder = resources.files("course") / "fingerprints" / FOLDER
    if not folder.is_dir():
        return {}
    return {f.name[:-len(SUFFIX)]: f for chapter in folder.iterdir() if chapter.is_dir()
            for f in chapter.iterdir() if f.name.endswith(SUFFIX)}


@functools.lru_cache(maxsize=8)
def _read(name: str) -> Arrays | None:
    f = _files().get(name)
    return None if f is None else decode(f.read_bytes())


def _kept(name: str) -> Arrays | None:
    found = _read(name)
    return None if found is None else [None if a is None else a.copy() for a in found]  # no caller changes another's


def kept_outputs(spec: ProgramSpec) -> tuple[np.ndarray, ...] | None:
    """The results kept for ``spec`` at the self-check's seed, or None (a spec no release wrote: a record being
    written, a test's own)."""
    found = _kept(results_name(spec))
    return None if found is None else tuple(a for a in found if a is not None)


def kept_slips(qid: str, spec: ProgramSpec) -> Arrays | None:
    """The results of ``qid``'s value-told slips at ``spec`` and the self-check's seed, or None."""
    return _kept(slips_name(qid, spec))


def kept_shares(spec: ProgramSpec) -> Arrays | None:
    """Each device's share of the result kept for ``spec`` at the self-check's seed, or None."""
    return _kept(shares_name(spec))


def write(folder: Path, chapter: str, specs: Iterable[ProgramSpec],
          slips: dict[str, bytes] | None = None) -> list[Path]:
    """Writes the files of ``chapter``'s reference programs under ``folder`` (course/fingerprints/), and those of its
    value-told slips (``slips``: by name, made by the release), and removes the chapter's files no spec names any
    more; a file whose bytes would not change is left as it is."""
    wanted: dict[str, bytes] = dict(slips or {})
    for spec in specs:
        wanted |= computed(spec)
    where = folder / FOLDER / chapter
    if not wanted and not where.exists():
        return []
    where.mkdir(parents=True, exist_ok=True)
    for old in where.glob(f"*{SUFFIX}"):
        if old.name[:-len(SUFFIX)] not in wanted:
            old.unlink()
    paths = []
    for name, data in wanted.items():
        path = where / f"{name}{SUFFIX}"
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        paths.append(path)
    if not paths:
        where.rmdir()
    _files.cache_clear()
    _read.cache_clear()
    return paths
