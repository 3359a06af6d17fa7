"""Closing a task: system descriptions, paper tables, score diffs, the bundle, schedule, archive."""
