"""Tasks: definitions, splits, phases, organisers, and who may see what."""
