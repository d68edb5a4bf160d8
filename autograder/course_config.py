"""The course's own settings in ``nbgrader_config.py``: whether students get variants, and of what.

nbgrader reads the file as traitlets configuration and ignores sections it does not know, so the
course keeps its settings there too, in a ``ScalingCourse`` section beside nbgrader's own:

    c.CourseDirectory.course_id = "scaling-course"     # part of every student's deal
    c.ScalingCourse.variants = True                    # or False, or {"ch01_rooflines": False, ...}
    c.ScalingCourse.variant_values = {"ch01-e3": {"chip": ["TPU v5e", "TPU v5p"]}}   # keep only these

``variants`` is on for every assignment unless it says otherwise; ``variant_values`` keeps, per setting
and parameter, a subset of the values the records allow (docs/grading.md). The release writes the plan
into the self-check data, where the kernel reads it; the grader refuses to grade on a plan that
differs from the released one, since students would have been shown other numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_COURSE = "scaling-course"


@dataclass(frozen=True)
class VariantPlan:
    course: str = DEFAULT_COURSE
    enabled: bool = True
    allowed: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # setting -> parameter -> labels

    def to_json(self) -> dict[str, Any]:
        return {"course": self.course, "enabled": self.enabled, "allowed": self.allowed}


class ConfigError(ValueError):
    """``nbgrader_config.py`` holds a course setting the course cannot use; the message says which."""


def _course_config(course_dir: Path) -> Any:
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    path = course_dir / "nbgrader_config.py"
    return PyFileConfigLoader(path.name, str(course_dir)).load_config() if path.exists() else Config()


def variant_plan(course_dir: Path, assignment: str) -> VariantPlan:
    """The plan for one assignment, from the course directory's ``nbgrader_config.py``."""
    config = _course_config(course_dir)
    course = config.CourseDirectory.get("course_id") or DEFAULT_COURSE
    switch = config.ScalingCourse.get("variants", True)
    enabled = switch.get(assignment, True) if isinstance(switch, dict) else switch
    if not isinstance(enabled, bool):
        raise ConfigError("c.ScalingCourse.variants is True, False, or a dict of assignment -> True/False")
    allowed = config.ScalingCourse.get("variant_values", {})
    if not isinstance(allowed, dict) or not all(isinstance(v, dict) for v in allowed.values()):
        raise ConfigError("c.ScalingCourse.variant_values maps a setting (\"ch01-e3\") to "
                          "{parameter: [allowed values]}")
    prefix = assignment[:4] + "-"
    mine = {s: {p: list(v) for p, v in params.items()} for s, params in allowed.items() if s.startswith(prefix)}
    return VariantPlan(str(course), enabled, mine)
