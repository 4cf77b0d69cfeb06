"""Reads. Queries are scoped to a project; an object of another project is "not found"."""
