"""Batch grading: sanitize, execute in a jailed kernel, collect records, judge, write."""

STATE = ".scaling-course"  # the grader's own folder in the course directory: results, logs, work, cache, secret
