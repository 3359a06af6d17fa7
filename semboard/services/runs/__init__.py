"""Runs: submission, the upload log, and organiser moves recorded in the audit log."""
