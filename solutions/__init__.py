"""Reference solutions, one module per chapter (instructors only)."""
