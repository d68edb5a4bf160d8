"""Number questions that every student answers alike, each named with why it cannot vary.

The book prints every answer, so a number asked at the book's values grades copying. A question here is fixed by
what its exercise is about (a chip's own count, the one model a story follows); one that is not here must vary
with a setting (``tests/test_variants.py::test_every_number_question_varies_or_is_named``)."""

UNVARIED: dict[str, str] = {
    "ch01-e7-vpu-intensity": "the v5p's vector-unit rate as the book gives it: no other chip's VPU FLOP/s is pinned",
    "ch02-e1-flops-per-cycle": "an MXU pass, [8,128] x [128,128] each 8 cycles: the fixed MXU shape is what is asked",
    "ch02-pq1-vpu-flops": "a v5p core's VPU (8x128 lanes, 4 ALUs, 1.75 GHz): Appendix A's one pinned vector unit",
    "ch02-pq1-ratio": "MXU over VPU FLOP/s of a v5p core: both scale with the clock, so only the units' shapes set it",
    "ch02-cx3-ring-hops": "the hops of the CX3 program's own 2x4 mesh, the one ring every student's program runs on",
    "ch03-q10-ratio-uni": "AllToAll over AllGather per link is 1/2 for every matrix and ring size: the point of Q10",
    "ch03-q10-ratio-bidi": "with both link directions the ratio is 1/4 for every matrix and ring size, by construction",
    "ch04-e4-remat-flops-ratio": "block remat redoes the forward pass: 8/6 of the FLOPs for every model and batch",
    "ch04-q7-training-flops": "DeepSeek-V3's reported run (37B active, 14.8T tokens): the one real run audited",
    "ch04-q7-utilisation": "DeepSeek-V3's reported H800 hours against its FLOPs: a real run's figure",
    "ch05-cx1-psum-factor": "the device count of the CX1 program's fixed 8-device mesh, which every student uses",
    "ch05-q1-params": "Q1-Q3 follow LLaMA-2 13B, the one MHA model the chapter's training problems plan for",
    "ch05-q2-state-bytes": "LLaMA-2 13B's weights and Adam state, which Q3's plan reuses: the story's one model",
    "ch06-a2-flops-per-token": "6 FLOPs times LLaMA 3-70B's nominal 70e9 parameters: the model the chapter follows",
    "ch06-a3-total-flops": "LLaMA 3-70B's training FLOPs over LLaMA 3's own 15e12 tokens: the run the chapter follows",
    "ch06-w2-params": "LLaMA 3.1-405B's parameter count from its public config: the model W2 is about",
    "ch06-w2-flops-per-token": "6 FLOPs times LLaMA 3.1-405B's parameter count: a fact of the model W2 is about",
    "ch06-w2-tp-limit": "a 3D-torus chip's own figure: besides the book's v5p only the v4p is dealt (on a TPU7x pod "
                        "the weights are under 0.5% of the bytes per chip, where leaving them out cannot be refused)",
    "ch06-w2-mix-bound": "a 3D-torus chip's own figure: besides the book's v5p only the v4p is dealt (see "
                         "ch06-w2-tp-limit)",
    "ch06-w2-total-flops": "LLaMA 3.1-405B's nominal size times LLaMA 3's 15e12 tokens: the run W2 plans",
    "ch07-e4-decode-limit": "MHA attention in decode tends to 1 FLOP/byte at every context: the point is that it stays",
    "ch07-q1-params": "the Part 7 worked-problem model, whose count Q2 and Q5 reuse: the one model the problems follow",
    "ch08-iq1-kv-per-token": "LLaMA 3-70B's int8 cache bytes per token: a fact of the model the chapter serves",
    "ch08-iq3-tp-limit": "LLaMA 3-70B's F over the v5e's FLOP/s per link byte: the story's model and chip",
    "ch08-iq4-int8-weights": "the v5e's FLOP/s over its HBM bandwidth with int8 weights: a fact of the story's chip",
    "ch08-iq6-step-full": "a full v5e's HBM read at its bandwidth: a fact of the story's chip alone",
    "ch08-iq6-int4-weights": "LLaMA 3-70B's int4 weights read on a 2x2 v5e: the story's model, chip and slice",
    "ch08-w1-flops-per-token": "2 FLOPs times the 405e9 parameters of the model W1 and W3 follow: a fact of that model",
    "ch08-w2-kv-per-token": "LLaMA 3-8B's int8 cache bytes per token: a fact of the model W2 is about",
    "ch08-w3-min-step": "405B's int8 weights read on the one v5e slice every allowed latency limit leads to",
    "ch09-q2-allreduce-count": "the mock layer makes two partial-sum reductions, whatever its sizes",
    "ch10-e4-speedup": "the ratio of the book's own two measured timings: there are no other measurements to deal",
    "ch10-e4-overhead": "the ratio of the book's own two measured timings: there are no other measurements to deal",
    "ch11-c1-params": "Course-31B's parameter count: the capstone's one new model, which every plan follows",
    "ch11-c1-kv-bytes": "Course-31B's int8 cache bytes per token: the capstone's one new model",
    "ch11-c4-t-fsdp": "the FSDP weight gather does not depend on the batch: the point of the exercise",
    "ch12-q12-vector-flops-boost":
        "the H100's own boost clock times its CUDA cores: the one GPU whose clocks the book gives",
    "ch12-q12-tensor-ratio": "the H100's tensor-core rate over its boosted vector rate: a fixed fact of that one chip",
    "ch12-q16-b200-clock": "the clock behind the B200's own datasheet fp32 rate: the one chip NVIDIA quotes it for",
    "ch12-q17-intensity": "an fp32 add moves 12 bytes per FLOP whatever its size or chip: the point of the question",
    "ch12-q17-chip-intensity":
        "the H100's boosted vector FLOP/s over its HBM: the one GPU whose vector clock the book gives",
    "ch12-q32-two-level-max":
        "the reach of two levels of 64-port switches: the limit that makes the next part's core layer",
    "ch12-q52-pp-threshold":
        "H100 FLOP/s over 8 H100 nodes' egress: the fixed 8-way pipeline plan the config choice names",
    "ch12-e6-shard-bytes":
        "LLaMA-70B's 8-way MLP shard: the one message whose measured bandwidth the next question reads",
    "ch12-e7-sharp-bandwidth": "two measurements the book quotes (370 GB/s, +30% with SHARP): no value to deal",
    # Not yet varied among the choices a class is dealt (the book's choice, and those showing a printed answer, are
    # not dealt; the choices left agree on these questions).
    "ch02-q2-v5e-hosts": "not yet varied: v5e and v6e pods are both 256 single-core chips on 32 hosts, so only the "
                         "v3 pod is dealt; another 2D-torus chip in course/hardware.py would vary it",
    "ch02-q2-v5e-cores": "not yet varied: the v3 pod (1024 chips of 2 cores) is the one 2D-torus pod dealt, as the "
                         "v6e's 256 single-core chips repeat the v5e's counts",
    "ch02-q2-v5e-flops": "not yet varied: the v3 pod is the one 2D-torus pod dealt (v6e repeats the v5e's hosts and "
                         "cores, so it shows printed answers)",
    "ch02-q2-v5e-hbm": "not yet varied: the v3 pod is the one 2D-torus pod dealt (v6e repeats the v5e's hosts and "
                       "cores, so it shows printed answers)",
    "ch02-cx4-bisection-pod": "not yet varied: the pod's bisection depends on the chip alone, and v3 is the one chip "
                              "dealt besides the book's v5e",
    "ch05-q3-mix-bound": "not yet varied: the FSDP + TP bound depends on the chip alone, and v4p is the one 3D-torus "
                         "chip besides the book's v5p that the setting lists",
    "ch11-c1-train-y": "not yet varied: Course-31B's FSDP + TP plan on a v5p slice of 1k-8k chips has Y = 4 (the "
                       "book's) or 8, so every dealt plan has Y = 8",
    "ch11-c1-memory-chips": "not yet varied: the two dealt batch and context pairs that keep memory and latency apart "
                            "both fit a 16-chip v5e slice (legal slices go 16, 32, 64)",
    "ch11-c1-serve-chips": "not yet varied: both dealt serving pairs meet the latency budget on the 32-chip slice, "
                           "the next legal v5e slice above the 16 that holds them",
    "ch11-c3-data-ways": "not yet varied: the program runs on the course's 8 CPU devices, whose only meshes with two "
                         "axes of 2 or more are 4x2 (the book's) and 2x4",
    "ch11-c3-model-ways": "not yet varied: the program runs on the course's 8 CPU devices, whose only meshes with two "
                          "axes of 2 or more are 4x2 (the book's) and 2x4",
    "ch12-q11-v5p-alus": "not yet varied: the TPU slot deals v5e against the book's v5p, so every dealt choice is the "
                         "v5e's ALU count",
    "ch12-e3-gpu-egress": "not yet varied: the library gives NVSwitch counts for the H100 node, the B200 node and the "
                          "NVL72 alone, and the last two share the B200's NVLink 5",
    "ch12-q51-flops-ratio": "not yet varied: the pairs dealt are an H100 or an H800 node against an A100 node, and the "
                            "H800 keeps the H100's FLOP/s",
    "ch12-q51-dp-threshold": "not yet varied: every node in the library newer than the A100 but the B200 (H100, H200, "
                             "H800) has the H100's FLOP/s and 8 x 400 Gb/s egress: 2475, E8's printed scale-out",
    "ch12-cx2-node-fraction": "not yet varied: the fraction of a ring's steps inside a node depends on the mesh alone, "
                              "and 4x2 is the one mesh dealt besides the book's 2x4",
}
