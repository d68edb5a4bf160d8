"""Test-wide setup: 8 simulated CPU devices before anything imports JAX, and a progress file of the
test session's own (self-checks record attempts; a learner's real progress must not change)."""

import os
import tempfile

import course.devices

os.environ["SCALING_COURSE_PROGRESS"] = os.path.join(tempfile.mkdtemp(prefix="scaling-course-tests-"),
                                                     "progress.json")
course.devices.setup("cpu")
