"""Test-wide setup: 8 simulated CPU devices before anything imports JAX."""

import course.devices

course.devices.setup("cpu")
