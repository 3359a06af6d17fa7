"""This host's cache of arrays derived from stored files, shared by its workers."""
