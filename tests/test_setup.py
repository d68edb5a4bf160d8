"""course.setup(): 8 simulated devices whatever the environment says, and no stderr noise."""

import subprocess
import sys

import pytest

SNIPPET = """
import course
print(course.setup())
import jax, jax.numpy as jnp
print(len(jax.devices()), jax.devices()[0].platform)
x = jax.device_put(jnp.ones((8, 8)), jax.sharding.NamedSharding(course.mesh(X=8), jax.sharding.PartitionSpec("X")))
print(float(jax.jit(lambda a: (a @ a.T).sum())(x)))
"""


def _run(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", **env})


@pytest.mark.parametrize("stray", ["--xla_force_host_platform_device_count=3", "--xla_cpu_enable_fast_math=false"])
def test_setup_overrides_a_stray_device_count(stray):
    proc = _run({"XLA_FLAGS": stray, "JAX_PLATFORMS": "cpu", "SCALING_COURSE_DEVICES": "auto"})
    assert proc.returncode == 0, proc.stderr
    assert "8 cpu" in proc.stdout, proc.stdout
    assert proc.stderr.strip() == "", f"setup must keep stderr quiet (nbgrader zeroes such cells): {proc.stderr}"


def test_setup_rejects_an_unknown_mode():
    proc = _run({"SCALING_COURSE_DEVICES": "tpu-please"})
    assert proc.returncode != 0 and "SCALING_COURSE_DEVICES" in proc.stderr


def test_setup_after_jax_started_says_restart():
    code = "import jax; jax.devices(); import course; course.setup()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0 and "Restart the kernel" in proc.stderr
