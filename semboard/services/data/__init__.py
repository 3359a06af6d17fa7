"""A task's data files: inputs and gold, checked, versioned and released."""
