"""Batch grading: sanitize, execute in a jailed kernel, collect records, judge, write."""
