"""Chapter 10, Programming TPUs in JAX: every graded question of the chapter, as records with references.

Book: Part 10 "Programming TPUs in JAX", https://jax-ml.github.io/scaling-book/jax-stuff/
Numbers are computed from ``course.hardware`` and from the book's own example sizes and timings
(never typed-in results); where the book prints a rounded value, the tolerance admits it and
``BOOK`` records it for the tests.

Program questions run on 8 simulated CPU devices. Meshes come from ``course.mesh`` (Auto axes, the
behaviour the book's ``jit`` examples assume; the notebook shows Explicit axes separately); the ring
programs (CX2, Q3, Q4) take theirs from their input (``jax.typeof(a).sharding.mesh``), since a student
may be dealt another X x Y mesh than the book's 2 x 4. Every
``shard_map`` program is graded on the collectives it states, read from its lowered StableHLO with
loop trip counts multiplied; the one ``jit`` program (Q1.1) is graded on the compiled program, where
the only expected count is zero, which no CPU quirk can change.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import sympy as sp

import course
import course.symbols as sym
from course.symbols import B, C, D, F, W_link, X, Y
from solutions._kit import *  # noqa: F403 (the authoring vocabulary: solutions/_kit.py)
from solutions._kit import NamedSharding, P, make_mesh

V5E = hw.TPU_V5E
SECTION = "jax-stuff/"
HOW = SECTION + "#how-does-parallelism-work-in-jax"
PROBLEMS = SECTION + "#worked-problems"
BF16 = hw.BYTES_PER_ELEMENT["bf16"]

# --- E1: the book's jit example: In[B_X, D_Y] @ W[D_Y, F] -> Out[B_X, F] on a 4 x 2 mesh ----------
# The values a student may be dealt (autograder/variants.py), the book's first: the mesh (X, Y), B and D.
E1_MESHES, E1_BATCHES, E1_WIDTHS = ((4, 2), (2, 4)), (8, 24, 40), (2048, 1024, 3072)

# --- E3: slice_and_average on arange(512) over a 2 x 4 mesh (a student is dealt the size and the slice) ---
E3_SIZES, E3_KEEPS, E3_DEVICES = (512, 1024, 256), (4, 2, 8), 8
E3_SIZE, E3_KEEP = E3_SIZES[0], E3_KEEPS[0]


def slice_and_average(size: int = E3_SIZE, devices: int = E3_DEVICES, keep: int = E3_KEEP) -> np.ndarray:
    """Each device keeps the first ``keep`` entries of its block; pmean over all devices."""
    return np.arange(size, dtype=np.float64).reshape(devices, size // devices)[:, :keep].mean(axis=0)


# --- E4: the collective matmul A[B_X, D_Y] @ W[D, F_Y] -> Out[B_X, F_Y] (book sizes, 2 x 4 mesh) ----
CM_B, CM_D, CM_F, CM_X, CM_Y = 1024, 2048, 8192, 2, 4
# The book's measured times on TPU, in seconds: jit (a blocking all-gather), the collective matmul,
# and the same matmul without a sharded contraction. Inputs here, not answers.
T_JIT_S, T_COLLECTIVE_S, T_UNSHARDED_S = 311e-6, 244e-6, 224e-6

# Per step of the ring (bf16, peak C): a permute uses one ICI link in one direction, W_link bytes/s
# (half of W_ici, the bidirectional figure of the book's tables).
CHUNK_COMPUTE = 2 * (B / X) * (D / Y) * (F / Y) / C  # A chunk [B/X, D/Y] times W rows [D/Y, F/Y]
CHUNK_COMM = BF16 * (B / X) * (D / Y) / W_link  # one A chunk to the next device
MIN_F = sp.solve(sp.Eq(CHUNK_COMPUTE, CHUNK_COMM), F)[0]  # compute hides the permute for F above this
MIN_F_BIDI = sp.solve(sp.Eq(CHUNK_COMPUTE, CHUNK_COMM / 2), F)[0]  # half of each chunk goes each way
CM_VALUES = {B: CM_B, D: CM_D, F: CM_F, X: CM_X, Y: CM_Y, C: V5E.bf16_flops_per_s,
             W_link: V5E.ici_bytes_per_s_per_link}
# A student prices the permutes on one of these chips' links, for one of these batches (the book's first);
# each pair of a link bandwidth and a batch gives its own time.
E4_CHIPS, E4_BATCHES = (V5E, hw.TPU_V5P, hw.TPU_V3), (CM_B, 1536, 1280)


def permute_time(chip: hw.TPU, B: int) -> float:
    """Seconds of all Y-1 permutes of the collective matmul at the book's D and mesh, one direction of
    ``chip``'s links, for a batch of B."""
    return float(((CM_Y - 1) * CHUNK_COMM).subs({**CM_VALUES, sym.B: B, W_link: chip.ici_bytes_per_s_per_link}))


# --- program questions ---------------------------------------------------------------------------
# Small shapes keep each check to about a second on 2 CPU cores; the algorithms do not care.
S, DM, FM = 64, 128, 256  # tokens, model width, hidden width of the matmul programs
MESH_1D = (("X", 8),)
MESH_2D = (("X", 2), ("Y", 4))
MOE_S, MOE_E, MOE_D, MOE_F = 64, 8, 32, 48  # tokens, experts, widths (Q2)
A2A_G, A2A_C = 16, 4  # token groups and capacity per expert (CX5)
RAG_S, RAG_E = 128, 16  # tokens and experts of the ragged dispatch (Q2.3b): 16 tokens and 2 experts per device

RING_SPEC = reshard_spec((), {"collective-permute": 7})
SUMS_SPEC = ProgramSpec(mesh=MESH_2D, einsum="iajb->ij",
                        operands=(Operand((64, 32), ("X", "Y"), view=(2, 32, 4, 8)),),
                        out_spec=("X", "Y"), collectives={})
# The ring programs (CX2, Q4, Q3) run on any X x Y mesh; for CX2 and Q3 a student is dealt some sizes on the 2 x 4
# mesh. Not 4 x 2: on a ring of two devices, left and right are one permutation, so a program passing its blocks
# the wrong way is right there (tests/test_variants.py); and both axes longer than 1, since an axis of one device
# drops out of the result's sharding.
CX2_MESHES, CX2_BATCHES, CX2_WIDTHS = ((2, 4),), (S, 32, 128), (FM, 512)
Q3_MESHES, Q3_BATCHES, Q3_WIDTHS = ((2, 4),), (S, 32, 128), (FM, 512)


def _mesh_axes(mesh: tuple[int, int]) -> tuple[tuple[str, int], ...]:
    return (("X", mesh[0]), ("Y", mesh[1]))


def ag_matmul_spec(mesh: tuple[int, int], B: int, F: int, directions: int = 1) -> ProgramSpec:
    """A[B_X, D_Y] @ W[D, F_Y] -> Out[B_X, F_Y] as a ring of Y - 1 steps, each sending ``directions``
    messages (CX2: one; Q4: one each way)."""
    return ProgramSpec(mesh=_mesh_axes(mesh), einsum="bd,df->bf",
                       operands=(Operand((B, DM), ("X", "Y")), Operand((DM, F), (None, "Y"))),
                       out_spec=("X", "Y"), collectives={"collective-permute": directions * (mesh[1] - 1)},
                       both_ways=directions == 2)


def rs_matmul_spec(mesh: tuple[int, int], B: int, F: int, directions: int = 1) -> ProgramSpec:
    """Tmp[B_X, F_Y] @ W2[F_Y, D] -> Out[B_X, D_Y], the partial sums passed Y - 1 times in each of
    ``directions`` directions (Q3.2: one; Q4: both, half of the rows each way)."""
    return ProgramSpec(mesh=_mesh_axes(mesh), einsum="bf,fd->bd",
                       operands=(Operand((B, F), ("X", "Y")), Operand((F, DM), ("Y", None))),
                       out_spec=("X", "Y"), collectives={"collective-permute": directions * (mesh[1] - 1)},
                       both_ways=directions == 2)


def block_spec(mesh: tuple[int, int], B: int, F: int) -> ProgramSpec:
    """Both collective matmuls of an MLP block: 2 (Y - 1) permutes."""
    return ProgramSpec(mesh=_mesh_axes(mesh), einsum="bd,df,fe->be",
                       operands=(Operand((B, DM), ("X", "Y")), Operand((DM, F), (None, "Y")),
                                 Operand((F, DM), ("Y", None))),
                       # two f32 matmuls of random normals: entries reach a few hundred, so an absolute
                       # tolerance of 1e-2 is float32 rounding (summed in another order), not a wrong value
                       out_spec=("X", "Y"), collectives={"collective-permute": 2 * (mesh[1] - 1)}, atol=1e-2)


# The book's mesh and the course's small shapes: each setting's first choice.
AG_MATMUL_SPEC = ag_matmul_spec(CX2_MESHES[0], CX2_BATCHES[0], CX2_WIDTHS[0])
BIDI_SPEC = ag_matmul_spec(CX2_MESHES[0], CX2_BATCHES[0], CX2_WIDTHS[0], directions=2)
RS_MATMUL_SPEC = rs_matmul_spec(Q3_MESHES[0], Q3_BATCHES[0], Q3_WIDTHS[0])
RS_BIDI_SPEC = rs_matmul_spec(Q3_MESHES[0], Q3_BATCHES[0], Q3_WIDTHS[0], directions=2)
BLOCK_SPEC = block_spec(Q3_MESHES[0], Q3_BATCHES[0], Q3_WIDTHS[0])
# The model gathers the tokens and their gates in two all-gathers; one of both, concatenated, moves the same bytes
# over the same axis and is judged right too (``programs.judge_report``).
MOE_GATHER_SPEC = ProgramSpec(mesh=MESH_1D, einsum="sd,se,edf->sf",
                              operands=(Operand((MOE_S, MOE_D), ("X", None)), Operand((MOE_S, MOE_E), ("X", None)),
                                        Operand((MOE_E, MOE_D, MOE_F), ("X", None, None))),
                              out_spec=("X", None), collectives={"all-gather": 2, "reduce-scatter": 1})
MOE_A2A_SPEC = ProgramSpec(mesh=MESH_1D, einsum="gecd,edf->gecf",
                           operands=(Operand((A2A_G, MOE_E, A2A_C, MOE_D), ("X", None, None, None)),
                                     Operand((MOE_E, MOE_D, MOE_F), ("X", None, None))),
                           out_spec=("X", None, None, None), collectives={"all-to-all": 2})
# Q2.3b: top-1 routing from router logits, so every input drawn at grading time gives every expert its own
# number of tokens. Tokens go out and come back with one all_to_all each; the group sizes may travel in a
# small one of their own, or the expert ids beside the tokens.
MOE_RAGGED_SPEC = ProgramSpec(
    mesh=MESH_1D, reference="moe_top1",
    einsum="out[s] = x[s] @ W[argmax_e logits[s, e]], the experts W[E_X, D, F] split over X",
    operands=(Operand((RAG_S, MOE_D), ("X", None)), Operand((RAG_S, RAG_E), ("X", None)),
              Operand((RAG_E, MOE_D, MOE_F), ("X", None, None))),
    out_spec=("X", None), collectives={"all-to-all": (2, 4)},
    collectives_note="Each token should travel only to the device of its expert and back, with all_to_all; "
                     "an all-gather or a reduction moves every token to every device.",
    traffic_slack=2.5)  # how much room each expert's buffer keeps for any routing is the student's choice


# Q3.1: A[B_X, D_Y] @ W[D_Y, F] -> Out[B_X, F], the sum over Y built from permutes: a reduce-scatter ring of
# partial sums overlapped with the chunk products, then an all-gather ring, Y - 1 permutes each.
def ar_matmul_spec(directions: int = 1) -> ProgramSpec:
    """A[B_X, D_Y] @ W[D_Y, F] -> Out[B_X, F] on the 2 x 4 mesh: two rings of Y - 1 steps, each step sending
    ``directions`` messages (Q3.1: one; Q4: one each way, half of the rows each)."""
    note = ("Both rings should use both directions of the links: every step of the reduce-scatter and of the "
            "all-gather sends one half of the rows left and the other half right, 4 (Y - 1) permutes in all; "
            "one direction alone sends half as many.") if directions == 2 else ""
    return ProgramSpec(mesh=MESH_2D, einsum="bd,df->bf",
                       operands=(Operand((S, DM), ("X", "Y")), Operand((DM, FM), ("Y", None))),
                       out_spec=("X", None), collectives={"collective-permute": directions * 2 * (MESH_2D[1][1] - 1)},
                       collectives_note=note, both_ways=directions == 2)


AR_MATMUL_SPEC = ar_matmul_spec()
AR_BIDI_SPEC = ar_matmul_spec(directions=2)
# Q2.1: the local MoE layer with the experts split over X and every token (and its gate row) on every
# device; each device applies its own experts and one all-reduce adds the experts' shares.
MOE_LOCAL_SPEC = ProgramSpec(mesh=MESH_1D, einsum="sd,se,edf->sf",
                             operands=(Operand((MOE_S, MOE_D), (None, None)), Operand((MOE_S, MOE_E), (None, None)),
                                       Operand((MOE_E, MOE_D, MOE_F), ("X", None, None))),
                             out_spec=(), collectives={"all-reduce": 1})

def _mesh(spec: ProgramSpec):
    return make_mesh(spec.mesh)


def on_input_mesh(block: Callable, in_specs: Sequence[tuple], out_specs: tuple, *, check_vma: bool = True) -> Callable:
    """``jax.shard_map(block)`` on the mesh its first argument is laid out on, as the chapter's ring
    programs find theirs: the wrong answers below run on whichever mesh a student was dealt."""
    def run(*args):
        return jax.shard_map(block, mesh=jax.typeof(args[0]).sharding.mesh, in_specs=tuple(P(*s) for s in in_specs),
                             out_specs=P(*out_specs), check_vma=check_vma)(*args)
    return run


# CX1: an all-gather from ppermute alone.
def ring_all_gather(x):
    """x[S_X, D] -> x[S, D] on every device: 7 steps, each passing one block to the right
    neighbour. The type system cannot see that every device ends with the same array, so the
    replication check is off (check_vma=False) and correctness is on us."""
    mesh = course.mesh(X=8)

    def block(x_block):  # x_block: f32[S/8, D]
        n, idx = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        rows = x_block.shape[0]
        right = [(j, (j + 1) % n) for j in range(n)]
        out = jnp.zeros((n * rows, x_block.shape[1]), x_block.dtype)  # f32[S, D]
        out = jax.lax.dynamic_update_slice_in_dim(out, x_block, idx * rows, 0)

        def step(i, carry):
            out, travelling = carry
            travelling = jax.lax.ppermute(travelling, "X", right)  # now block idx - i - 1
            out = jax.lax.dynamic_update_slice_in_dim(out, travelling, (idx - i - 1) % n * rows, 0)
            return out, travelling

        return jax.lax.fori_loop(0, n - 1, step, (out, x_block))[0]

    return jax.shard_map(block, mesh=mesh, in_specs=P("X", None), out_specs=P(), check_vma=False)(x)


def cx1_wrong_slot(x):
    """Writes the received block where the *sender* was last step: every block one slot off."""
    def block(x_block):
        n, idx = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        rows = x_block.shape[0]
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((n * rows, x_block.shape[1])), x_block, idx * rows, 0)

        def step(i, carry):
            out, travelling = carry
            travelling = jax.lax.ppermute(travelling, "X", ring(n))
            return jax.lax.dynamic_update_slice_in_dim(out, travelling, (idx - i) % n * rows, 0), travelling

        return jax.lax.fori_loop(0, n - 1, step, (out, x_block))[0]

    return smap(block, RING_SPEC.mesh, [("X", None)], (), check_vma=False)(x)


def cx1_builtin(x):
    return smap(lambda b: jax.lax.all_gather(b, "X", tiled=True, to="invarying"), RING_SPEC.mesh, [("X", None)], ())(x)


# Q1.1: per-shard sums with jit, no communication.
def shard_sums(x):
    """x[S_X, D_Y] -> sums[X, Y]: entry (i, j) sums shard (i, j). Splitting each axis into
    (mesh axis, within-shard) keeps every shard on its device, so no collective is needed."""
    mesh = course.mesh(X=2, Y=4)
    nx, ny = mesh.shape["X"], mesh.shape["Y"]
    s, d = x.shape
    blocks = x.reshape(nx, s // nx, ny, d // ny)  # f32[X, S/X, Y, D/Y]: shard (i, j) is blocks[i, :, j, :]
    blocks = jax.lax.with_sharding_constraint(blocks, NamedSharding(mesh, P("X", None, "Y", None)))
    return jax.lax.with_sharding_constraint(blocks.sum(axis=(1, 3)), NamedSharding(mesh, P("X", "Y")))


def q1_wrong_reshape(x):
    """Splits the array as (X, Y, S/X, D/Y): the right shape, the wrong elements."""
    nx, ny = 2, 4
    return x.reshape(nx, ny, x.shape[0] // nx, x.shape[1] // ny).sum(axis=(2, 3))


def q1_gathers_first(x):
    """Replicates the whole array before reducing: right numbers, needless communication."""
    mesh = _mesh(SUMS_SPEC)
    full = jax.lax.with_sharding_constraint(x, jax.sharding.NamedSharding(mesh, P()))
    sums = full.reshape(2, x.shape[0] // 2, 4, x.shape[1] // 4).sum(axis=(1, 3))
    return jax.lax.with_sharding_constraint(sums, jax.sharding.NamedSharding(mesh, P("X", "Y")))


# Q1.2: roll within each X shard (a function on public probes: a permutation is no einsum).
Q1_MESH = {"X": 2, "Y": 4}


def roll_in_shard_reference(x: list, shift: int) -> list[list[float]]:
    a = np.asarray(x, dtype=np.float64)
    blocks = a.reshape(Q1_MESH["X"], -1, a.shape[1])
    return (np.roll(blocks, shift, axis=1) - blocks).reshape(a.shape).tolist()


def roll_in_shard(x, shift):
    """Each device rolls its own rows (its block of X): no row crosses into another shard, so no
    communication."""
    mesh = course.mesh(X=2, Y=4)
    x = jax.device_put(jnp.asarray(x, jnp.float32), NamedSharding(mesh, P("X", "Y")))

    def body(block):  # block: f32[S/X, D/Y]
        return jnp.roll(block, shift, axis=0) - block

    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y")))(x)


def q1_global_roll(x, shift):
    """Rolls the whole array: rows cross from one shard into the next."""
    a = np.asarray(x, dtype=np.float32)
    return np.roll(a, shift, axis=0) - a


def _q1_probe(seed: int, rows: int, cols: int, shift: int) -> dict:
    """Random multiples of 1/64 in [-4, 4): random floats whose differences are exact in float32."""
    values = np.random.default_rng(seed).integers(-256, 256, size=(rows, cols)) / 64
    return {"x": values.tolist(), "shift": shift}


def draw_roll(rng: random.Random, probe: dict) -> dict:
    """Q1's grading-time cases: fresh values, R = 4 to 16 rows per X shard, 4 to 12 columns (a multiple
    of Y = 4), a shift from 1 to R - 1."""
    rows = rng.randint(4, 16)
    return _q1_probe(rng.randrange(2**32), Q1_MESH["X"] * rows, Q1_MESH["Y"] * rng.randint(1, 3),
                     rng.randint(1, rows - 1))


# CX2 / E4: the all-gather collective matmul.
def collective_matmul(a, w):
    """A[B_X, D_Y] @ W[D, F_Y] -> Out[B_X, F_Y] without an all-gather: Y-1 steps, each multiplying
    the A chunk this device holds by the matching rows of W while passing the chunk to the left
    neighbour. After i steps device k holds chunk (k + i) mod Y. The mesh is the one ``a`` is laid
    out on (``jax.typeof`` carries it), so the same code runs on any X x Y mesh."""
    mesh = jax.typeof(a).sharding.mesh

    def block(a_block, w_block):  # a_block: [B/X, D/Y], w_block: [D, F/Y]
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk = a_block.shape[1]
        left = [(j, (j - 1) % ny) for j in range(ny)]

        def rows(i):  # rows of W meeting the chunk held after i steps: [D/Y, F/Y]
            return jax.lax.dynamic_slice_in_dim(w_block, (idx + i) % ny * chunk, chunk, 0)

        def step(i, carry):
            acc, a_chunk = carry
            acc = acc + a_chunk @ rows(i)                      # [B/X, F/Y]
            return acc, jax.lax.ppermute(a_chunk, "Y", left)  # overlaps with the next product

        acc = jnp.zeros((a_block.shape[0], w_block.shape[1]), a_block.dtype)
        acc = jax.lax.pcast(acc, ("X", "Y"), to="varying")
        acc, a_chunk = jax.lax.fori_loop(0, ny - 1, step, (acc, a_block))
        return acc + a_chunk @ rows(ny - 1)

    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(a, w)


def cx2_first_public_text(a, w):
    """The W slice at i * chunk regardless of the device: right only on the device of index 0.
    The book's arange test cannot see this; random floats can."""
    def block(a_block, w_block):
        ny = jax.lax.axis_size("Y")
        chunk = a_block.shape[1]

        def step(i, carry):
            acc, a_chunk = carry
            acc = acc + a_chunk @ jax.lax.dynamic_slice_in_dim(w_block, i * chunk, chunk, 0)
            return acc, jax.lax.ppermute(a_chunk, "Y", ring(ny, -1))

        acc = jax.lax.pcast(jnp.zeros((a_block.shape[0], w_block.shape[1])), ("X", "Y"), to="varying")
        acc, a_chunk = jax.lax.fori_loop(0, ny - 1, step, (acc, a_block))
        return acc + a_chunk @ jax.lax.dynamic_slice_in_dim(w_block, (ny - 1) * chunk, chunk, 0)

    return on_input_mesh(block, [("X", "Y"), (None, "Y")], ("X", "Y"))(a, w)


def cx2_all_gather(a, w):
    """Gather A over Y, then one local matmul: the blocking version the chapter starts from."""
    def block(a_block, w_block):
        return jax.lax.all_gather(a_block, "Y", axis=1, tiled=True) @ w_block

    return on_input_mesh(block, [("X", "Y"), (None, "Y")], ("X", "Y"))(a, w)


# Q4: the same matmul, bidirectional.
def bidirectional_matmul(a, w):
    """Half of A's rows travel left, the other half right: each step sends two half-size messages,
    one on each direction of the ring's links, so each step's communication takes half as long."""
    mesh = jax.typeof(a).sharding.mesh  # the mesh a is laid out on: any X x Y

    def block(a_block, w_block):  # a_block: [B/X, D/Y], w_block: [D, F/Y]
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk, half = a_block.shape[1], a_block.shape[0] // 2
        left = [(j, (j - 1) % ny) for j in range(ny)]
        right = [(j, (j + 1) % ny) for j in range(ny)]

        def rows(j):
            return jax.lax.dynamic_slice_in_dim(w_block, j % ny * chunk, chunk, 0)

        def step(i, carry):
            top_acc, bot_acc, top, bot = carry  # top holds chunk idx + i, bot holds chunk idx - i
            top_acc = top_acc + top @ rows(idx + i)
            bot_acc = bot_acc + bot @ rows(idx - i)
            return top_acc, bot_acc, jax.lax.ppermute(top, "Y", left), jax.lax.ppermute(bot, "Y", right)

        zeros = jax.lax.pcast(jnp.zeros((half, w_block.shape[1]), a_block.dtype), ("X", "Y"), to="varying")
        carry = (zeros, zeros, a_block[:half], a_block[half:])
        top_acc, bot_acc, top, bot = jax.lax.fori_loop(0, ny - 1, step, carry)
        return jnp.concatenate([top_acc + top @ rows(idx + ny - 1), bot_acc + bot @ rows(idx - ny + 1)], axis=0)

    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(a, w)


def q4_same_direction(a, w):
    """Both halves travel left, but the bottom half's chunk index assumes they go right."""
    def block(a_block, w_block):
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk, half = a_block.shape[1], a_block.shape[0] // 2
        left = ring(ny, -1)

        def rows(j):
            return jax.lax.dynamic_slice_in_dim(w_block, j % ny * chunk, chunk, 0)

        def step(i, carry):
            top_acc, bot_acc, top, bot = carry
            return (top_acc + top @ rows(idx + i), bot_acc + bot @ rows(idx - i),
                    jax.lax.ppermute(top, "Y", left), jax.lax.ppermute(bot, "Y", left))

        zeros = jax.lax.pcast(jnp.zeros((half, w_block.shape[1])), ("X", "Y"), to="varying")
        top_acc, bot_acc, top, bot = jax.lax.fori_loop(0, ny - 1, step, (zeros, zeros, a_block[:half],
                                                                         a_block[half:]))
        return jnp.concatenate([top_acc + top @ rows(idx + ny - 1), bot_acc + bot @ rows(idx - ny + 1)], axis=0)

    return on_input_mesh(block, [("X", "Y"), (None, "Y")], ("X", "Y"))(a, w)


def q4_unidirectional(a, w):
    return collective_matmul(a, w)


# Q3.1: the all-reduce collective matmul.
def allreduce_matmul(a, w):
    """A[B_X, D_Y] @ W[D_Y, F] -> Out[B_X, F]: each device's product is a partial sum over its slice of D.
    Instead of one all-reduce, the partial sums of one F chunk at a time travel left around the Y ring,
    each device adding its share of the chunk it receives (a reduce-scatter overlapped with the chunk
    products); then the finished chunks travel right until every device holds all of them."""
    mesh = course.mesh(X=2, Y=4)

    def block(a_block, w_block):  # a_block: [B/X, D/Y], w_block: [D/Y, F]
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk = w_block.shape[1] // ny
        left = [(j, (j - 1) % ny) for j in range(ny)]
        right = [(j, (j + 1) % ny) for j in range(ny)]

        def partial(j):  # this device's share of output chunk j: [B/X, F/Y]
            return a_block @ jax.lax.dynamic_slice_in_dim(w_block, j % ny * chunk, chunk, 1)

        def reduce_step(i, acc):  # receive the running sum of chunk idx + i, add our share
            return jax.lax.ppermute(acc, "Y", left) + partial(idx + i + 1)

        done = jax.lax.fori_loop(1, ny, reduce_step, partial(idx + 1))  # the finished chunk idx
        out = jnp.zeros((a_block.shape[0], w_block.shape[1]), a_block.dtype)
        out = jax.lax.dynamic_update_slice_in_dim(out, done, idx * chunk, 1)

        def gather_step(i, carry):  # after i passes to the right we hold chunk idx - i
            out, travelling = carry
            travelling = jax.lax.ppermute(travelling, "Y", right)
            return jax.lax.dynamic_update_slice_in_dim(out, travelling, (idx - i) % ny * chunk, 1), travelling

        return jax.lax.fori_loop(1, ny, gather_step, (out, done))[0]

    # every device along Y ends with the same [B/X, F], which the type system cannot see
    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", None),
                         check_vma=False)(a, w)


def q31_psum(a, w):
    """The whole partial product, then one all-reduce: right, but nothing overlaps."""
    return smap(lambda a_block, w_block: jax.lax.psum(a_block @ w_block, "Y"), AR_MATMUL_SPEC.mesh,
                [("X", "Y"), ("Y", None)], ("X", None))(a, w)


def _rs_ring(a_block, w_block, first=1, stop=None):
    """The slips' reduce-scatter ring over Y, written as the models write it: the running sum of output
    chunk idx + ``first`` passes left, each device adding its share, for steps 1 .. ``stop`` - 1 (Y - 1 of
    them unless a slip stops early). Returns the chunk this device finishes."""
    ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
    chunk = w_block.shape[1] // ny

    def partial(j):
        return a_block @ jax.lax.dynamic_slice_in_dim(w_block, j % ny * chunk, chunk, 1)

    def step(i, acc):
        return jax.lax.ppermute(acc, "Y", ring(ny, -1)) + partial(idx + i + first)

    return jax.lax.fori_loop(1, ny if stop is None else stop, step, partial(idx + first))


def q31_short_ring(a, w):
    """The reduce-scatter ring stops one pass early: each chunk misses one device's share."""
    def block(a_block, w_block):
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk = w_block.shape[1] // ny
        done = _rs_ring(a_block, w_block, stop=ny - 1)  # one pass short
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((a_block.shape[0], w_block.shape[1])), done,
                                                  idx * chunk, 1)

        def gather_step(i, carry):
            out, travelling = carry
            travelling = jax.lax.ppermute(travelling, "Y", ring(ny, 1))
            return jax.lax.dynamic_update_slice_in_dim(out, travelling, (idx - i) % ny * chunk, 1), travelling

        return jax.lax.fori_loop(1, ny, gather_step, (out, done))[0]

    return smap(block, AR_MATMUL_SPEC.mesh, [("X", "Y"), ("Y", None)], ("X", None), check_vma=False)(a, w)


# Q3.2: the reduce-scatter collective matmul.
def reduce_scatter_matmul(t, w2):
    """Tmp[B_X, F_Y] @ W2[F_Y, D] -> Out[B_X, D_Y]: the partial sums travel instead of the
    inputs. Device k starts with its partial product for output chunk k + 1; Y-1 times it passes
    the running sum to the left and adds its own partial product for the chunk it received."""
    mesh = jax.typeof(t).sharding.mesh  # the mesh t is laid out on: any X x Y

    def block(t_block, w2_block):  # t_block: [B/X, F/Y], w2_block: [F/Y, D]
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk = w2_block.shape[1] // ny
        left = [(j, (j - 1) % ny) for j in range(ny)]

        def partial(j):  # this device's share of output chunk j: [B/X, D/Y]
            return t_block @ jax.lax.dynamic_slice_in_dim(w2_block, j % ny * chunk, chunk, 1)

        def step(i, acc):  # receive the running sum for chunk idx + i, add our share
            return jax.lax.ppermute(acc, "Y", left) + partial(idx + i + 1)

        return jax.lax.fori_loop(1, ny, step, partial(idx + 1))

    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", "Y"))(t, w2)


def q3_starts_at_own_chunk(t, w2):
    """Starts with chunk k instead of k + 1: after Y-1 passes every sum lands one device off."""
    return on_input_mesh(lambda t_block, w2_block: _rs_ring(t_block, w2_block, first=0),
                         [("X", "Y"), ("Y", None)], ("X", "Y"))(t, w2)


def q3_psum_scatter(t, w2):
    """The whole partial product, then one reduce-scatter: right, but nothing overlaps."""
    def block(t_block, w2_block):
        return jax.lax.psum_scatter(t_block @ w2_block, "Y", scatter_dimension=1, tiled=True)

    return on_input_mesh(block, [("X", "Y"), ("Y", None)], ("X", "Y"))(t, w2)


# Q4, the other half: the reduce-scatter collective matmul, bidirectional.
def bidirectional_rs_matmul(t, w2):
    """Tmp[B_X, F_Y] @ W2[F_Y, D] -> Out[B_X, D_Y] with half of the rows' partial sums travelling left and
    the other half right: each step sends two half-size messages, one on each direction of the links.
    Leftwards, device k starts with output chunk k + 1 (as in Q3.2); rightwards, with chunk k - 1, so after
    Y - 1 passes both halves hold chunk k."""
    mesh = jax.typeof(t).sharding.mesh  # the mesh t is laid out on: any X x Y

    def block(t_block, w2_block):  # t_block: [B/X, F/Y], w2_block: [F/Y, D]
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk, half = w2_block.shape[1] // ny, t_block.shape[0] // 2
        left = [(j, (j - 1) % ny) for j in range(ny)]
        right = [(j, (j + 1) % ny) for j in range(ny)]

        def partial(rows, j):  # these rows' share of output chunk j: [B/(2X), D/Y]
            return rows @ jax.lax.dynamic_slice_in_dim(w2_block, j % ny * chunk, chunk, 1)

        top, bot = t_block[:half], t_block[half:]

        def step(i, carry):  # top receives the sum for chunk idx + i, bottom the one for chunk idx - i
            top_acc, bot_acc = carry
            return (jax.lax.ppermute(top_acc, "Y", left) + partial(top, idx + i + 1),
                    jax.lax.ppermute(bot_acc, "Y", right) + partial(bot, idx - i - 1))

        top_acc, bot_acc = jax.lax.fori_loop(1, ny, step, (partial(top, idx + 1), partial(bot, idx - 1)))
        return jnp.concatenate([top_acc, bot_acc], axis=0)  # [B/X, D/Y]

    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", "Y"))(t, w2)


def q4_rs_mirror_not_flipped(t, w2):
    """Sends the bottom half right but starts it at chunk k + 1 like the top half: every bottom sum is
    assembled from the wrong devices' shares."""
    def block(t_block, w2_block):
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk, half = w2_block.shape[1] // ny, t_block.shape[0] // 2

        def partial(rows, j):
            return rows @ jax.lax.dynamic_slice_in_dim(w2_block, j % ny * chunk, chunk, 1)

        top, bot = t_block[:half], t_block[half:]

        def step(i, carry):
            top_acc, bot_acc = carry
            return (jax.lax.ppermute(top_acc, "Y", ring(ny, -1)) + partial(top, idx + i + 1),
                    jax.lax.ppermute(bot_acc, "Y", ring(ny, 1)) + partial(bot, idx + i + 1))

        top_acc, bot_acc = jax.lax.fori_loop(1, ny, step, (partial(top, idx + 1), partial(bot, idx + 1)))
        return jnp.concatenate([top_acc, bot_acc], axis=0)

    return on_input_mesh(block, [("X", "Y"), ("Y", None)], ("X", "Y"))(t, w2)


def q4_rs_unidirectional(t, w2):
    return reduce_scatter_matmul(t, w2)


# Q4 for Q3.1: the all-reduce collective matmul, bidirectional.
def bidirectional_allreduce_matmul(a, w):
    """A[B_X, D_Y] @ W[D_Y, F] -> Out[B_X, F] with both rings of Q3.1 using both directions of the links. Its
    first half is the bidirectional reduce-scatter matmul (Q4 above, the same layouts with F in place of D):
    device k ends with the finished chunk k of F, top rows from the left ring, bottom rows from the right.
    Then the finished chunks go round again, the top half rightwards and the bottom half leftwards, until
    every device of the row holds all Y chunks: after i passes the top half holds chunk k - i, the bottom
    half chunk k + i."""
    mesh = jax.typeof(a).sharding.mesh  # the mesh a is laid out on
    done = bidirectional_rs_matmul(a, w)  # [B_X, F_Y]: chunk k of the sum on device k

    def block(done_block):  # done_block: [B/X, F/Y]
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk, half = done_block.shape[1], done_block.shape[0] // 2
        left = [(j, (j - 1) % ny) for j in range(ny)]
        right = [(j, (j + 1) % ny) for j in range(ny)]
        top_out = jnp.zeros((half, ny * chunk), done_block.dtype)  # [B/(2X), F]
        bot_out = jnp.zeros((done_block.shape[0] - half, ny * chunk), done_block.dtype)
        top_out = jax.lax.dynamic_update_slice_in_dim(top_out, done_block[:half], idx * chunk, 1)
        bot_out = jax.lax.dynamic_update_slice_in_dim(bot_out, done_block[half:], idx * chunk, 1)

        def step(i, carry):  # top receives chunk idx - i from the left, bottom chunk idx + i from the right
            top_out, bot_out, top, bot = carry
            top, bot = jax.lax.ppermute(top, "Y", right), jax.lax.ppermute(bot, "Y", left)
            top_out = jax.lax.dynamic_update_slice_in_dim(top_out, top, (idx - i) % ny * chunk, 1)
            bot_out = jax.lax.dynamic_update_slice_in_dim(bot_out, bot, (idx + i) % ny * chunk, 1)
            return top_out, bot_out, top, bot

        carry = (top_out, bot_out, done_block[:half], done_block[half:])
        top_out, bot_out, _, _ = jax.lax.fori_loop(1, ny, step, carry)
        return jnp.concatenate([top_out, bot_out], axis=0)  # [B/X, F]

    # every device along Y ends with the same [B/X, F], which the type system cannot see
    return jax.shard_map(block, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", None), check_vma=False)(done)


def q4_ar_gather_not_flipped(a, w):
    """Sends the bottom half's finished chunks left but files them as if they came from the left (chunk
    k - i, the top half's index): the bottom rows of every chunk but a device's own land in the wrong place."""
    def block(done_block):
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk, half = done_block.shape[1], done_block.shape[0] // 2
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((done_block.shape[0], ny * chunk)), done_block,
                                                  idx * chunk, 1)

        def step(i, carry):
            out, top, bot = carry
            top, bot = jax.lax.ppermute(top, "Y", ring(ny, 1)), jax.lax.ppermute(bot, "Y", ring(ny, -1))
            out = jax.lax.dynamic_update_slice(out, top, (0, (idx - i) % ny * chunk))
            return jax.lax.dynamic_update_slice(out, bot, (half, (idx - i) % ny * chunk)), top, bot

        return jax.lax.fori_loop(1, ny, step, (out, done_block[:half], done_block[half:]))[0]

    done = bidirectional_rs_matmul(a, w)
    return on_input_mesh(block, [("X", "Y")], ("X", None), check_vma=False)(done)


def q4_ar_unidirectional(a, w):
    return allreduce_matmul(a, w)


# Q3.3: both collective matmuls in one block.
def mlp_block(x, w_in, w_out):
    """In[B_X, D_Y] @ W_in[D, F_Y] @ W_out[F_Y, D] -> Out[B_X, D_Y], only collective-permutes."""
    return reduce_scatter_matmul(collective_matmul(x, w_in), w_out)


def q3_block_jit(x, w_in, w_out):
    """Left to the compiler, the block gathers and reduces with its own collectives."""
    return (x @ w_in) @ w_out


def q3_block_off_by_one(x, w_in, w_out):
    return q3_starts_at_own_chunk(collective_matmul(x, w_in), w_out)


# Q2.1: the local MoE layer, experts split over X, tokens everywhere.
def moe_local(x, gates, w):
    """Out[s] = sum_e gates[s, e] * x[s] @ W[e] with W[E_X, D, F] and every token on every device. Each
    device multiplies all tokens by each of its own experts in turn ([S, D] @ [D, F], never an [S, D, F]
    array), weights the rows by that expert's gate column, and one psum adds the experts' shares."""
    mesh = course.mesh(X=8)

    def block(x_all, g_all, w_block):  # [S, D], [S, E], [E/X, D, F]
        n_local = w_block.shape[0]
        first = jax.lax.axis_index("X") * n_local  # index of this device's first expert
        out = jnp.zeros((x_all.shape[0], w_block.shape[2]), x_all.dtype)
        for e in range(n_local):
            gate = jax.lax.dynamic_slice_in_dim(g_all, first + e, 1, 1)  # [S, 1]
            out = out + gate * (x_all @ w_block[e])                       # [S, F]
        return jax.lax.psum(out, "X")

    specs = (P(None, None), P(None, None), P("X", None, None))
    return jax.shard_map(block, mesh=mesh, in_specs=specs, out_specs=P())(x, gates, w)


def q21_first_gate_column(x, gates, w):
    """Weights this device's expert by gate column 0 on every device: the wrong expert's gate."""
    def block(x_all, g_all, w_block):
        return jax.lax.psum(jnp.einsum("se,sd,edf->sf", g_all[:, :w_block.shape[0]], x_all, w_block), "X")

    return smap(block, MOE_LOCAL_SPEC.mesh, [(None, None), (None, None), ("X", None, None)], ())(x, gates, w)


def q21_gathers_the_experts(x, gates, w):
    """Brings every expert to every device and builds [S, E, F]: right numbers, E*D*F floats moved."""
    def block(x_all, g_all, w_block):
        every = jnp.einsum("sd,edf->sef", x_all, jax.lax.all_gather(w_block, "X", tiled=True))  # [S, E, F]
        return jnp.einsum("se,sef->sf", g_all, every)

    return smap(block, MOE_LOCAL_SPEC.mesh, [(None, None), (None, None), ("X", None, None)], (),
                check_vma=False)(x, gates, w)


# Q2.3a: experts sharded over X, tokens gathered to the experts and the results scattered back.
def moe_all_gather(x, gates, w):
    """Out[s] = sum_e gates[s, e] * x[s] @ W[e]. Tokens and gates are gathered to every device, each
    device applies its own experts to all tokens, and a reduce-scatter returns each token's sum to
    the device that owns it. A one-hot gate row is the book's routing B[s]."""
    mesh = course.mesh(X=8)

    def block(x_block, g_block, w_block):  # [S/X, D], [S/X, E], [E/X, D, F]
        n_local = w_block.shape[0]
        xs = jax.lax.all_gather(x_block, "X", tiled=True)   # [S, D]
        gs = jax.lax.all_gather(g_block, "X", tiled=True)   # [S, E]
        mine = jax.lax.dynamic_slice_in_dim(gs, jax.lax.axis_index("X") * n_local, n_local, 1)  # [S, E/X]
        partial = jnp.einsum("se,sd,edf->sf", mine, xs, w_block)  # [S, F]: this device's experts only
        return jax.lax.psum_scatter(partial, "X", scatter_dimension=0, tiled=True)  # [S/X, F]

    specs = (P("X", None), P("X", None), P("X", None, None))
    return jax.shard_map(block, mesh=mesh, in_specs=specs, out_specs=P("X", None))(x, gates, w)


def q2_wrong_gate_columns(x, gates, w):
    """Every device uses the first expert's gate column for its own expert."""
    def block(x_block, g_block, w_block):
        xs = jax.lax.all_gather(x_block, "X", tiled=True)
        gs = jax.lax.all_gather(g_block, "X", tiled=True)[:, :w_block.shape[0]]
        return jax.lax.psum_scatter(jnp.einsum("se,sd,edf->sf", gs, xs, w_block), "X", scatter_dimension=0,
                                    tiled=True)

    return smap(block, MOE_GATHER_SPEC.mesh, [("X", None), ("X", None), ("X", None, None)], ("X", None))(x, gates, w)


def q2_gathers_the_experts(x, gates, w):
    """Brings every expert's weights to every device: E*D*F floats each, instead of the tokens."""
    def block(x_block, g_block, w_block):
        return jnp.einsum("se,sd,edf->sf", g_block, x_block, jax.lax.all_gather(w_block, "X", tiled=True))

    return smap(block, MOE_GATHER_SPEC.mesh, [("X", None), ("X", None), ("X", None, None)], ("X", None))(x, gates, w)


def q2_psum_then_slice(x, gates, w):
    """Sums every token's result on every device, then keeps its own rows: an all-reduce where a
    reduce-scatter would do."""
    def block(x_block, g_block, w_block):
        n_local, rows = w_block.shape[0], x_block.shape[0]
        idx = jax.lax.axis_index("X")
        xs = jax.lax.all_gather(x_block, "X", tiled=True)
        gs = jax.lax.dynamic_slice_in_dim(jax.lax.all_gather(g_block, "X", tiled=True), idx * n_local, n_local, 1)
        total = jax.lax.psum(jnp.einsum("se,sd,edf->sf", gs, xs, w_block), "X")
        return jax.lax.dynamic_slice_in_dim(total, idx * rows, rows, 0)

    return smap(block, MOE_GATHER_SPEC.mesh, [("X", None), ("X", None), ("X", None, None)], ("X", None),
                check_vma=False)(x, gates, w)


# CX5: expert dispatch with all_to_all.
def moe_all_to_all(x, w):
    """x[G_X, E, C, D]: each group's tokens already sit in per-expert slots of capacity C. One
    all_to_all sends slot e to the device of expert e, the expert multiplies, a second all_to_all
    sends the results home. No device ever holds more than its share of tokens."""
    mesh = course.mesh(X=8)

    def block(x_block, w_block):  # x_block: [G/X, E, C, D], w_block: [E/X, D, F]
        here = jax.lax.all_to_all(x_block, "X", split_axis=1, concat_axis=0, tiled=True)  # [G, E/X, C, D]
        y = jnp.einsum("gecd,edf->gecf", here, w_block)                                  # [G, E/X, C, F]
        return jax.lax.all_to_all(y, "X", split_axis=0, concat_axis=1, tiled=True)       # [G/X, E, C, F]

    specs = (P("X", None, None, None), P("X", None, None))
    return jax.shard_map(block, mesh=mesh, in_specs=specs, out_specs=P("X", None, None, None))(x, w)


def cx5_reshape_home(x, w):
    """Replaces the return all_to_all with a reshape: the right shape, other devices' tokens."""
    def block(x_block, w_block):
        here = jax.lax.all_to_all(x_block, "X", split_axis=1, concat_axis=0, tiled=True)
        y = jnp.einsum("gecd,edf->gecf", here, w_block)
        return y.reshape(x_block.shape[:3] + (w_block.shape[2],))

    return smap(block, MOE_A2A_SPEC.mesh, [("X", None, None, None), ("X", None, None)], ("X", None, None, None))(x, w)


def cx5_gathers_the_experts(x, w):
    def block(x_block, w_block):
        return jnp.einsum("gecd,edf->gecf", x_block, jax.lax.all_gather(w_block, "X", tiled=True))

    return smap(block, MOE_A2A_SPEC.mesh, [("X", None, None, None), ("X", None, None)], ("X", None, None, None))(x, w)


# Q2.3b: ragged dispatch, each expert receiving however many tokens the router sends it.
def moe_ragged(x, logits, w):
    """out[s] = x[s] @ W[e(s)], e(s) = argmax logits[s], W[E_X, D, F]. Each device sorts its tokens by
    expert, counts them (the ragged group sizes), and packs them into one bucket per destination device.
    A bucket has room for all of the device's tokens, so none is dropped however unevenly the router
    chooses. all_to_all delivers the buckets; the group sizes travel in a small all_to_all of their own;
    the receiving device groups the rows by expert for one ragged_dot; a last all_to_all brings the
    results home, where the sort is undone."""
    mesh = course.mesh(X=8)

    def block(x_block, l_block, w_block):  # [S/X, D], [S/X, E], [E/X, D, F]
        n, local = jax.lax.axis_size("X"), w_block.shape[0]
        rows, width = x_block.shape
        expert = jnp.argmax(l_block, axis=1)                                  # [S/X]: each token's expert
        order = jnp.argsort(expert, stable=True)                              # tokens grouped by expert
        dest = expert[order] // local                                         # device of each sorted token
        sizes = jnp.bincount(expert, length=n * local).reshape(n, local)      # [X, E/X]: tokens per expert
        per_dest = sizes.sum(axis=1)                                          # [X]
        slot = jnp.arange(rows) - (jnp.cumsum(per_dest) - per_dest)[dest]    # row within its bucket
        send = jnp.zeros((n, rows, width), x_block.dtype).at[dest, slot].set(x_block[order])  # [X, S/X, D]
        recv = jax.lax.all_to_all(send, "X", 0, 0, tiled=True)                # [X, S/X, D]: my experts' tokens
        got = jax.lax.all_to_all(sizes, "X", 0, 0, tiled=True)                # [X, E/X]: from each source
        ends = jnp.cumsum(got, axis=1)                                        # bucket rows end per expert
        which = (jnp.arange(rows)[None, :, None] >= ends[:, None, :]).sum(-1).reshape(-1)  # [S]; E/X = padding
        regroup = jnp.argsort(which, stable=True)                             # rows grouped by local expert
        y = jax.lax.ragged_dot(recv.reshape(n * rows, width)[regroup], w_block, got.sum(axis=0))  # [S, F]
        y = jnp.zeros_like(y).at[regroup].set(y).reshape(n, rows, -1)        # [X, S/X, F], bucket order
        back = jax.lax.all_to_all(y, "X", 0, 0, tiled=True)                   # [X, S/X, F]: results home
        out_sorted = back[dest, slot]                                         # [S/X, F], sorted order
        return jnp.zeros_like(out_sorted).at[order].set(out_sorted)          # [S/X, F], token order

    specs = (P("X", None), P("X", None), P("X", None, None))
    return jax.shard_map(block, mesh=mesh, in_specs=specs, out_specs=P("X", None))(x, logits, w)


def _ragged(keep_order: bool = True, capacity: Callable[[int, int], int] = lambda rows, n: rows) -> Callable:
    """The ragged dispatch with one of two slips: buckets of ``capacity(rows, n)`` rows (tokens beyond it
    dropped, as a fixed-capacity router does), or results left in expert order (``keep_order=False``)."""
    def block(x_block, l_block, w_block):
        n, local = jax.lax.axis_size("X"), w_block.shape[0]
        rows, width = x_block.shape
        cap = capacity(rows, n)
        expert = jnp.argmax(l_block, axis=1)
        order = jnp.argsort(expert, stable=True)
        dest = expert[order] // local
        sizes = jnp.bincount(expert, length=n * local).reshape(n, local)
        per_dest = sizes.sum(axis=1)
        slot = jnp.arange(rows) - (jnp.cumsum(per_dest) - per_dest)[dest]
        kept = slot < cap
        send = jnp.zeros((n, cap, width)).at[dest, slot].set(x_block[order], mode="drop")
        recv = jax.lax.all_to_all(send, "X", 0, 0, tiled=True)
        got = jnp.minimum(jax.lax.all_to_all(sizes, "X", 0, 0, tiled=True), cap)  # what survived
        which = (jnp.arange(cap)[None, :, None] >= jnp.cumsum(got, axis=1)[:, None, :]).sum(-1).reshape(-1)
        regroup = jnp.argsort(which, stable=True)
        y = jax.lax.ragged_dot(recv.reshape(n * cap, width)[regroup], w_block, got.sum(axis=0))
        y = jnp.zeros_like(y).at[regroup].set(y).reshape(n, cap, -1)
        back = jax.lax.all_to_all(y, "X", 0, 0, tiled=True)
        out_sorted = jnp.where(kept[:, None], back[dest, jnp.minimum(slot, cap - 1)], 0.0)
        return jnp.zeros_like(out_sorted).at[order].set(out_sorted) if keep_order else out_sorted

    def run(x, logits, w):
        return smap(block, MOE_RAGGED_SPEC.mesh, [("X", None), ("X", None), ("X", None, None)], ("X", None))(
            x, logits, w)
    return run


q2b_average_capacity = _ragged(capacity=lambda rows, n: rows // n)  # room for the mean load only
q2b_forgets_the_sort = _ragged(keep_order=False)


def q2b_gathers_the_tokens(x, logits, w):
    """Q2.3a's way: every token to every device, each device's experts applied to their tokens, the
    results reduced and scattered home. Right numbers; the whole batch crosses every link."""
    def block(x_block, l_block, w_block):
        local = w_block.shape[0]
        xs = jax.lax.all_gather(x_block, "X", tiled=True)                      # [S, D]
        expert = jnp.argmax(jax.lax.all_gather(l_block, "X", tiled=True), 1)   # [S]
        mine = expert - jax.lax.axis_index("X") * local                        # local index, if mine
        y = sum(jnp.where((mine == e)[:, None], xs @ w_block[e], 0.0) for e in range(local))
        return jax.lax.psum_scatter(y, "X", scatter_dimension=0, tiled=True)

    return smap(block, MOE_RAGGED_SPEC.mesh, [("X", None), ("X", None), ("X", None, None)], ("X", None))(
        x, logits, w)


# --- the exercises whose values each student is dealt (autograder/variants.py); the book's values first ---------


def e1(mesh: tuple[int, int], B: int, D: int) -> tuple[Number, ...]:
    """E1: the block of In[B_X, D_Y] each device holds on an X x Y mesh."""
    nx, ny = mesh
    return (
        Number(qid="ch10-e1-local-rows", points=1, section=HOW,
               prompt=f"How many rows of In[{B}, {D}] each device holds in the jit example ({nx} x {ny} mesh, "
                      "In[B_X, D_Y]).",
               reference=B / nx, exact=True,
               slips=(Slip(B / ny, f"ratio:{Fraction(nx, ny)}", f"the mesh here is {nx} x {ny}: X has {nx} devices."),
                      Slip(B / (nx * ny), f"ratio:{Fraction(1, ny)}", "only the X axis splits the batch.",
                           maybe=True))),
        Number(qid="ch10-e1-local-cols", points=1, section=HOW,
               prompt=f"How many columns of In[{B}, {D}] each device holds (D split over Y, {nx} x {ny} mesh).",
               reference=D / ny, exact=True,
               slips=(Slip(D, f"ratio:{ny}", "D is sharded over Y."),)))


def e3(size: int, keep: int) -> tuple[Number, ...]:
    """E3: slice_and_average on arange(size) over the 2 x 4 mesh, each device keeping ``keep`` entries."""
    out = slice_and_average(size, E3_DEVICES, keep)
    first = float(out[0])
    own_mean = float(np.arange(keep).mean())
    return (
        Number(qid="ch10-e3-length", points=1, section=HOW,
               prompt=f"Length of slice_and_average's output, each device keeping {keep} entries (exact).",
               reference=float(out.size), exact=True,
               slips=(Slip(out.size * E3_DEVICES, "ratio:8", "pmean averages; it does not concatenate."),)),
        Number(qid="ch10-e3-first", points=1, section=HOW,
               prompt=f"First entry of slice_and_average's output on arange({size}), each device keeping {keep}.",
               reference=first, tolerance=THREE_FIGURES,
               slips=(Slip(first * E3_DEVICES, "ratio:8", "psum adds; pmean also divides by 8."),
                      Slip(own_mean, slip_code(own_mean, first, THREE_FIGURES),
                           f"inside shard_map, x[:{keep}] slices the device's own block, not the global array."))))


def e4(chip: hw.TPU, B: int) -> tuple[Number, ...]:
    """E4: the time of the collective matmul's permutes on ``chip``'s links, for a batch of B."""
    t = permute_time(chip, B)
    return (Number(qid="ch10-e4-permute-time", points=1, section=HOW, unit="s",
                   prompt=f"Seconds all permutes of the collective matmul take on {chip.name} links "
                          f"(bf16, B = {B}, D = {CM_D}, F = {CM_F}, {CM_X} x {CM_Y} mesh).",
                   reference=t, tolerance=TWO_PERCENT,
                   slips=(Slip(t / 2, "ratio:1/2", "a permute uses one direction of one link."),
                          Slip(t / (CM_Y - 1), f"ratio:{Fraction(1, CM_Y - 1)}", "there are Y - 1 steps."))),)


def cx2(mesh: tuple[int, int], B: int, F: int) -> tuple[Program, ...]:
    """CX2: the all-gather collective matmul on a student's mesh and sizes (Y - 1 permutes)."""
    nx, ny = mesh
    return (Program(qid="ch10-cx2-collective-matmul", points=4, section=HOW,
                    prompt=f"A[{B}, {DM}] @ W[{DM}, {F}] on a {nx} x {ny} mesh, A[B_X, D_Y] and W[D, F_Y] -> "
                           "Out[B_X, F_Y], with a ppermute ring, no all-gather.",
                    spec=ag_matmul_spec(mesh, B, F), model=collective_matmul,
                    slips=(Slip(cx2_first_public_text, "wrong_values",
                                "the slice of W a device multiplies depends on which device's chunk of A it holds at "
                                "that step."),
                           Slip(cx2_all_gather, "collectives:all-gather"))),)


def q3(mesh: tuple[int, int], B: int, F: int) -> tuple[Program, ...]:
    """Q3: the reduce-scatter collective matmul and the MLP block on a student's mesh and sizes."""
    nx, ny = mesh
    return (
        Program(qid="ch10-q3-reduce-scatter-matmul", points=3, section=PROBLEMS,
                prompt=f"Tmp[{B}, {F}] @ W2[{F}, {DM}] on a {nx} x {ny} mesh, Tmp[B_X, F_Y] and W2[F_Y, D] -> "
                       "Out[B_X, D_Y], passing partial sums around the ring.",
                spec=rs_matmul_spec(mesh, B, F), model=reduce_scatter_matmul,
                slips=(Slip(q3_starts_at_own_chunk, "misplaced_blocks:Y"),
                       Slip(q3_psum_scatter, "collectives:reduce-scatter"))),
        Program(qid="ch10-q3-mlp-block", points=2, section=PROBLEMS,
                prompt=f"In[{B}, {DM}] @ W_in[{DM}, {F}] @ W_out[{F}, {DM}] on a {nx} x {ny} mesh, In[B_X, D_Y] -> "
                       "Out[B_X, D_Y] with only collective-permutes.",
                spec=block_spec(mesh, B, F), model=mlp_block,
                slips=(Slip(q3_block_off_by_one, "misplaced_blocks:Y"),)))


# The book's printed answers, for the tests that compare them with ours (syllabus, pinned V2).
BOOK = {"ch10-e4-speedup": 1.27, "ch10-e4-overhead": 1.09, "ch10-e1-local-rows": 2, "ch10-e1-local-cols": 1024}


CHAPTER = Chapter("ch10_jax", "Programming TPUs in JAX", (
    # E1: the communication that out_shardings forces.
    vary("ch10-e1", e1, mesh=values(*E1_MESHES), B=values(*E1_BATCHES), D=values(*E1_WIDTHS)),
    Choice(qid="ch10-e1-collective", points=1, section=HOW,
           prompt="The collective XLA adds so that Out is P('X', None).",
           reference="all-reduce over Y",
           options=("none", "all-gather over X", "all-reduce over X", "all-reduce over Y", "reduce-scatter over Y"),
           slips=(Slip("reduce-scatter over Y", "wrong_option",
                       "a reduce-scatter leaves Out sharded over Y; P('X', None) wants it whole."),
                  Slip("all-reduce over X", "wrong_option", "the partial sums differ along the contraction's axis."))),
    Choice(qid="ch10-e1-explicit", points=1, section=HOW,
           prompt="On a mesh with Explicit axes, what does the same einsum do without out_sharding?",
           reference="raises", options=("raises", "all-reduce", "partial sums"),
           slips=(Slip("all-reduce", "wrong_option", "Explicit axes leave no choice to the compiler."),)),
    # E2: with_sharding_constraint.
    Choice(qid="ch10-e2-constraint", points=1, section=HOW,
           prompt="What does with_sharding_constraint on the hidden activation do?",
           reference="pins", options=("pins", "hint", "copies"),
           slips=(Slip("hint", "wrong_option", "the compiler must honour it, adding collectives if needed."),)),
    # E3: slice and average.
    vary("ch10-e3", e3, size=values(*E3_SIZES), keep=values(*E3_KEEPS)),
    # E4: the book's timings and the cost model of the collective matmul.
    Number(qid="ch10-e4-speedup", points=1, section=HOW,
           prompt="Speed-up of the collective matmul over the jit version (book timings).",
           reference=T_JIT_S / T_COLLECTIVE_S, tolerance=ONE_PERCENT,
           slips=(Slip(T_COLLECTIVE_S / T_JIT_S, "inverted", "a speed-up is old time over new time."),
                  Slip(T_JIT_S / T_COLLECTIVE_S - 1, "magnitude:-1",
                       "a speed-up is old time over new time, a ratio above 1: not how much faster, as a fraction."),
                  Slip(1 - T_COLLECTIVE_S / T_JIT_S, "magnitude:-1",
                       "a speed-up is old time over new time, a ratio above 1: not the share of the time saved."))),
    Number(qid="ch10-e4-overhead", points=1, section=HOW,
           prompt="Collective matmul time over the time without a sharded contraction.",
           reference=T_COLLECTIVE_S / T_UNSHARDED_S, tolerance=ONE_PERCENT,
           slips=(Slip(T_JIT_S / T_UNSHARDED_S, "not_equal", "compare the collective version, not the jit one."),)),
    Formula(qid="ch10-e4-chunk-compute", points=1, section=HOW,
            prompt="Seconds of one ring step's matmul: A chunk [B/X, D/Y] times W rows [D/Y, F/Y], peak C.",
            reference=CHUNK_COMPUTE, symbols="B D F X Y C W_link", counts="X Y",
            slips=(Slip(2 * (B / X) * D * (F / Y) / C, "ratio_symbols:Y", "one step multiplies one chunk of D."),
                   Slip(CHUNK_COMPUTE / 2, "ratio:1/2", "a multiply-add is 2 FLOPs."))),
    Formula(qid="ch10-e4-chunk-comm", points=1, section=HOW,
            prompt="Seconds to pass one bf16 A chunk [B/X, D/Y] over one link in one direction (W_link).",
            reference=CHUNK_COMM, symbols="B D F X Y C W_link", counts="X Y",
            slips=(Slip(CHUNK_COMM / 2, "ratio:1/2", "two slips halve this time: bf16 counted as 1 byte, or the "
                                                      "link counted in both directions (a permute uses one)."),
                   Slip(CHUNK_COMM * Y, "missing_symbol:Y", "one step sends one chunk, not all of A's row block."))),
    Formula(qid="ch10-e4-min-f", points=2, section=HOW,
            prompt="The F above which each step's matmul hides its permute.",
            reference=MIN_F, symbols="B D F X Y C W_link", counts="X Y",
            slips=(Slip(C / W_link, "missing_symbol:Y", "both sides depend on Y differently: F/Y meets C/W_link."),
                   Slip(2 * MIN_F, "ratio:2"))),
    vary("ch10-e4", e4, chip=chips(*E4_CHIPS), B=values(*E4_BATCHES)),
    Formula(qid="ch10-q4-min-f", points=1, section=PROBLEMS,
            prompt="The same threshold on F when each step sends half of the chunk each way.",
            reference=MIN_F_BIDI, symbols="B D F X Y C W_link", counts="X Y",
            slips=(Slip(MIN_F, "ratio:2", "two directions halve each step's communication time."),)),
    # Q1: per-shard sums (jit) and a roll within each shard.
    Program(qid="ch10-q1-shard-sums", points=2, section=PROBLEMS,
            prompt="sums[X, Y] of the shards of x[S_X, D_Y] with jit, without communication.",
            spec=SUMS_SPEC, model=shard_sums,
            slips=(Slip(q1_wrong_reshape, "wrong_values",
                        "a device's block is a contiguous tile of the array: check the order of the axes the reshape "
                        "splits."), Slip(q1_gathers_first, "collectives:all-gather"))),
    Function(qid="ch10-q1-roll-in-shard", points=2, section=PROBLEMS,
             prompt="roll(x, shift) - x within each X shard, with shard_map on a 2 x 4 mesh.",
             reference=roll_in_shard_reference, model=roll_in_shard, draw=draw_roll,
             probes=(_q1_probe(1, 16, 8, 5), _q1_probe(2, 32, 8, 3)),
             output=Output("number", tolerance=Tolerance(rtol=1e-6)),
             slips=(Slip(q1_global_roll, "wrong_elements"),)),
    # CX1: an all-gather built from ppermute.
    Program(qid="ch10-cx1-ring-all-gather", points=2, section=PROBLEMS,
            prompt="all-gather x[S_X, D] over 8 devices with ppermute only.",
            spec=RING_SPEC, model=ring_all_gather,
            slips=(Slip(cx1_wrong_slot, "wrong_values",
                        "a block received at step i came from the device i places away: file it in that device's "
                        "slot."), Slip(cx1_builtin, "collectives:all-gather"))),
    # CX2: the chapter's collective matmul.
    vary("ch10-cx2", cx2, mesh=values(*CX2_MESHES), B=values(*CX2_BATCHES), F=values(*CX2_WIDTHS)),
    Program(qid="ch10-q4-bidirectional-matmul", points=3, section=PROBLEMS,
            prompt="The collective matmul with half of A's rows sent each way around the ring.",
            spec=BIDI_SPEC, model=bidirectional_matmul,
            slips=(Slip(q4_same_direction, "wrong_values",
                        "the two halves travel opposite ways round the ring, so their chunk indices move opposite "
                        "ways too."), Slip(q4_unidirectional, "collectives:collective-permute"))),
    # Q3.1: the all-reduce collective matmul.
    Program(qid="ch10-cx6-allreduce-matmul", points=3, section=PROBLEMS,
            prompt=f"A[{S}, {DM}] @ W[{DM}, {FM}] on the 2 x 4 mesh, A[B_X, D_Y] and W[D_Y, F] -> Out[B_X, F], "
                   "the sum over Y done with ppermute rings only.",
            spec=AR_MATMUL_SPEC, model=allreduce_matmul,
            slips=(Slip(q31_short_ring, "wrong_values",
                        "a chunk's sum needs a share from every device: count the steps of the ring."),
                   Slip(q31_psum, "collectives:all-reduce"))),
    # Q3: the reduce-scatter collective matmul and the whole block.
    vary("ch10-q3", q3, mesh=values(*Q3_MESHES), B=values(*Q3_BATCHES), F=values(*Q3_WIDTHS)),
    # Q4's other half: the reduce-scatter collective matmul, bidirectional (the book asks both).
    Program(qid="ch10-q4-bidirectional-rs-matmul", points=3, section=PROBLEMS,
            prompt=f"Tmp[{S}, {FM}] @ W2[{FM}, {DM}] on the 2 x 4 mesh, Tmp[B_X, F_Y] and W2[F_Y, D] -> Out[B_X, D_Y], "
                   "half of the rows' partial sums passed each way around the ring.",
            spec=RS_BIDI_SPEC, model=bidirectional_rs_matmul,
            slips=(Slip(q4_rs_mirror_not_flipped, "wrong_values",
                        "the half that goes the other way round starts from the chunk on its own side: mirror its "
                        "index."),
                   Slip(q4_rs_unidirectional, "collectives:collective-permute"))),
    # Q4 for Q3.1: the all-reduce collective matmul, bidirectional.
    Program(qid="ch10-q4-bidirectional-ar-matmul", points=3, section=PROBLEMS,
            prompt=f"A[{S}, {DM}] @ W[{DM}, {FM}] on the 2 x 4 mesh, A[B_X, D_Y] and W[D_Y, F] -> Out[B_X, F], "
                   "both permute rings (reduce-scatter, then all-gather) sending half of the rows each way.",
            spec=AR_BIDI_SPEC, model=bidirectional_allreduce_matmul,
            slips=(Slip(q4_ar_gather_not_flipped, "wrong_values",
                        "the finished chunks that travel the other way come from the other side: mirror the index "
                        "they are filed at."),
                   Slip(q4_ar_unidirectional, "collectives:collective-permute"))),
    # Q2 and CX5: mixture of experts.
    Program(qid="ch10-cx7-moe-local", points=2, section=PROBLEMS,
            prompt="Out[S, F] = sum_e gates[s, e] x[s] @ W[e], W[E_X, D, F], tokens and gates on every device, "
                   "without an [S, D, F] array.",
            spec=MOE_LOCAL_SPEC, model=moe_local,
            slips=(Slip(q21_first_gate_column, "wrong_values",
                        "each device's expert is weighted by its own column of the gate, not the first one."),
                   Slip(q21_gathers_the_experts, "collectives:all-gather"))),
    Choice(qid="ch10-q2-jit-collectives", points=1, section=PROBLEMS,
           prompt="jit of that layer, W P('X', None, None), x and gates replicated, Out replicated: "
                  "which collective runs?",
           reference="all-reduce over X",
           options=("none", "all-gather of W over X", "all-reduce over X", "reduce-scatter over X", "all-to-all"),
           slips=(Slip("none", "wrong_option", "each device holds only its experts' share of every output row."),
                  Slip("all-gather of W over X", "wrong_option",
                       "the compiler picks the plan that moves fewer bytes: compare the weights, E*D*F floats, "
                       "with the [S, F] output each device holds a part of."))),
    Program(qid="ch10-q2-moe-all-gather", points=3, section=PROBLEMS,
            prompt="Out[S_X, F] = sum_e gates[s, e] x[s] @ W[e] with experts W[E_X, D, F]: gather, then scatter.",
            spec=MOE_GATHER_SPEC, model=moe_all_gather,
            slips=(Slip(q2_wrong_gate_columns, "wrong_values",
                        "each device's expert is weighted by its own column of the gate, not the first one."),
                   Slip(q2_gathers_the_experts, "collectives:all-gather"),
                   Slip(q2_psum_then_slice, "collectives:all-gather,all-reduce"))),
    Program(qid="ch10-cx5-moe-all-to-all", points=3, section=PROBLEMS,
            prompt="Expert slots x[G_X, E, C, D] to their experts W[E_X, D, F] and back with all_to_all.",
            spec=MOE_A2A_SPEC, model=moe_all_to_all,
            slips=(Slip(cx5_reshape_home, "wrong_values",
                        "a reshape keeps each device's tokens where they are: getting the experts' outputs back to "
                        "the tokens' devices takes a collective."),
                   Slip(cx5_gathers_the_experts, "collectives:all-gather"))),
    Program(qid="ch10-q2-moe-ragged", points=4, section=PROBLEMS,
            prompt=f"Top-1 MoE, x[{RAG_S}, {MOE_D}] and logits[{RAG_S}, {RAG_E}] split over X, experts "
                   f"W[{RAG_E}, {MOE_D}, {MOE_F}] split over X: each token to its expert's device and back with "
                   "all_to_all, however unevenly the router chooses.",
            spec=MOE_RAGGED_SPEC, model=moe_ragged,
            slips=(Slip(q2b_average_capacity, "zero_rows"), Slip(q2b_forgets_the_sort, "permuted_rows"),
                   Slip(q2b_gathers_the_tokens, "collectives:all-gather,reduce-scatter",
                        "send each token only to the device that holds its expert: one all_to_all with the group "
                        "sizes there, one back."))),
))
