"""course.hardware: the pinned constants of the syllabus, each with a source; and the ratios the references
derive from them (``solutions._derived.hardware``)."""

import math
from dataclasses import fields

import pytest

from course import hardware as hw
from solutions._derived import hardware as dhw

# The syllabus README's pinned table: (HBM bytes, HBM B/s, bf16 FLOP/s, int8 OP/s, ICI one-way B/s, pod, host).
TPU_TABLE = {
    "TPU v3": (32e9, 9.0e11, 1.4e14, 1.4e14, 1e11, (32, 32), (4, 2)),
    "TPU v4p": (32e9, 1.2e12, 2.75e14, 2.75e14, 4.5e10, (16, 16, 16), (2, 2, 1)),
    "TPU v5p": (96e9, 2.8e12, 4.59e14, 9.18e14, 9e10, (16, 20, 28), (2, 2, 1)),
    "TPU v5e": (16e9, 8.2e11, 1.97e14, 3.94e14, 4.5e10, (16, 16), (4, 2)),
    "TPU v6e": (32e9, 1.6e12, 9.20e14, 1.84e15, 9e10, (16, 16), (4, 2)),
    "TPU7x": (192e9, 7.4e12, 2.30e15, 4.61e15, 9e10, (4, 4, 576), (2, 2, 1)),
}
# (HBM bytes, HBM B/s, bf16 FLOP/s, fp8 FLOP/s, SMs)
GPU_TABLE = {
    "A100": (80e9, 2.0e12, 3.1e14, 6.2e14, 108),
    "H100": (80e9, 3.4e12, 9.9e14, 2.0e15, 132),
    "H200": (141e9, 4.8e12, 9.9e14, 2.0e15, 132),
    "B200": (192e9, 8.0e12, 2.3e15, 4.5e15, 148),
}


@pytest.mark.parametrize("name", sorted(TPU_TABLE))
def test_tpu_rows_match_the_syllabus(name):
    c = hw.by_name(name)
    got = (c.hbm_bytes, c.hbm_bytes_per_s, c.bf16_flops_per_s, c.int8_ops_per_s, c.ici_bytes_per_s_per_link,
           c.full_pod, c.host)
    assert got == TPU_TABLE[name]


@pytest.mark.parametrize("name", sorted(GPU_TABLE))
def test_gpu_rows_match_the_syllabus(name):
    g = hw.by_name(name)
    assert (g.hbm_bytes, g.hbm_bytes_per_s, g.bf16_flops_per_s, g.fp8_flops_per_s, g.sms) == GPU_TABLE[name]


def test_other_pinned_constants():
    assert (hw.TPU_V5E.pcie_bytes_per_s, hw.TPU_V6E.pcie_bytes_per_s) == (1.6e10, 3.2e10)
    assert (hw.TPU_V5P.dcn_bytes_per_s, hw.TPU_V5E.dcn_bytes_per_s, hw.TPU_V6E.dcn_bytes_per_s,
            hw.TPU7X.dcn_bytes_per_s) == (6.25e9, 3.125e9, 1.25e10, 1.25e10)
    assert hw.TPU_V5E.vmem_bytes == 128 * 2**20 and hw.VMEM_OVER_HBM_BANDWIDTH == 22
    assert (hw.TPU_V6E.mxu_size, hw.TPU_V5E.mxu_size, hw.TPU_V5E.mxus_per_tensorcore) == (256, 128, 4)
    cores = (hw.TPU_V5E.tensorcores_per_chip, hw.TPU_V5P.tensorcores_per_chip, hw.TPU_V4P.tensorcores_per_chip)
    assert cores == (1, 2, 2)
    assert hw.ICI_HOP_LATENCY_S == 1e-6
    assert (hw.H100_BASE_CLOCK_HZ, hw.H100_BOOST_CLOCK_HZ) == (1.59e9, 1.98e9)
    assert (hw.H100.l2_bytes, hw.B200.l2_bytes, hw.H100.register_bytes_per_sm) == (50e6, 126e6, 256 * 1024)
    assert (hw.H100.nvlink_bytes_per_s, hw.B200.nvlink_bytes_per_s, hw.H800.nvlink_bytes_per_s) == (4.5e11, 9e11, 3e11)
    assert hw.B200.fp4_flops_per_s == 9.0e15 and hw.H800.fp8_flops_per_s == 1.513e15


def test_network_constants_are_consistent():
    assert hw.H100.nvlink_bytes_per_s == hw.H100_NVLINK_LINKS * hw.NVLINK4_LINK_BYTES_PER_S
    assert hw.B200.nvlink_bytes_per_s == hw.H100_NVLINK_LINKS * hw.NVLINK5_LINK_BYTES_PER_S
    assert hw.DGX_H100.nvswitch_bytes_per_s == 1.6e12 and hw.DGX_H100.nvswitches == 4
    assert hw.NIC_BYTES_PER_S == 5e10 and hw.IB_SWITCH_PORTS * hw.NIC_BYTES_PER_S == 3.2e12
    assert hw.DGX_H100.egress_bytes_per_s == 4e11 == hw.DGX_B200.egress_bytes_per_s
    assert hw.GB200_NVL72.gpus == 72 and hw.GB200_NVL72.egress_bytes_per_s == pytest.approx(3.6e12)
    assert dhw.egress_bytes_per_s_per_gpu(hw.DGX_H100) == 5e10


def test_derived_ratios_of_the_syllabus():
    """The README's "derived ratios": v5e HBM 240.24, v5e ICI 2188.9, v5p ICI 2550 (850 over 3 axes), v5p DCN 73,440."""
    v5e, v5p = hw.TPU_V5E, hw.TPU_V5P
    assert dhw.critical_intensity(v5e) == pytest.approx(240.24, rel=1e-4)
    assert v5e.bf16_flops_per_s / v5e.ici_bidirectional_bytes_per_s == pytest.approx(2188.9, rel=1e-4)
    assert v5p.bf16_flops_per_s / v5p.ici_bidirectional_bytes_per_s == pytest.approx(2550)
    assert v5p.bf16_flops_per_s / (3 * v5p.ici_bidirectional_bytes_per_s) == pytest.approx(850)
    assert v5p.bf16_flops_per_s / v5p.dcn_bytes_per_s == pytest.approx(73_440)
    assert dhw.critical_intensity(hw.H100) == pytest.approx(291.18, rel=1e-4)


def test_shapes_and_counts():
    """Derived for the references by ``solutions._derived.hardware`` (the records hold inputs only)."""
    assert dhw.pod_chips(hw.TPU_V5P) == 8960 and dhw.chips_per_host(hw.TPU_V5E) == 8
    assert dhw.chips_per_host(hw.TPU_V4P) == 4
    assert (dhw.torus_axes(hw.TPU_V5E), dhw.torus_axes(hw.TPU_V5P)) == (2, 3)
    assert (dhw.ici_links_per_chip(hw.TPU_V5E), dhw.ici_links_per_chip(hw.TPU_V4P)) == (4, 6)
    assert (dhw.cuda_cores(hw.H100), dhw.cuda_cores(hw.B200)) == (16896, 18944)


@pytest.mark.parametrize("record", [*hw.CHIPS, *hw.NODES], ids=lambda r: r.name)
def test_every_field_has_a_unit_free_value_and_a_source(record):
    for f in fields(record):
        value = getattr(record, f.name)
        if isinstance(value, float | int) and not isinstance(value, bool):
            assert value > 0 and math.isfinite(value), f"{record.name}.{f.name} = {value}"
        assert hw.source_of(record, f.name).startswith("https://"), f"{record.name}.{f.name} has no source"


def test_names_are_unique_and_looked_up_loosely():
    names = [c.name for c in hw.CHIPS]
    assert len(names) == len(set(names))
    assert hw.by_name("tpu V5E") is hw.TPU_V5E and hw.by_name("h100") is hw.H100
    with pytest.raises(KeyError, match="unknown chip"):
        hw.by_name("TPU v9")
    with pytest.raises(AttributeError):
        hw.source_of(hw.H100, "flops")


def test_chapter_1_names_still_work():
    assert hw.TPU_V5P_VPU_FLOPS_PER_S == 7e12 and hw.H100_SPARSE_BF16_FLOPS_PER_S == 1.979e15
    assert hw.TPU_V5E.ici_bytes_per_s_per_link == 4.5e10
    assert hw.BYTES_PER_ELEMENT["bf16"] == 2


def test_table_rows_hold_every_field():
    rows = hw.table(hw.GPUS)
    assert [r["name"] for r in rows] == [g.name for g in hw.GPUS]
    assert "source" not in rows[0] and rows[1]["sms"] == 132
