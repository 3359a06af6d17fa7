"""Boards: leaderboards, significance groups, prepared builds, charts and per-item analysis."""
