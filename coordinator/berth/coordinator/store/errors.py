"""The store's one error type, for everything that makes the data dir unusable.

Rule: a ``StoreError`` message is a single line that names the path and what is wrong with it, because the
``berth-coordinator`` command prints it as is and exits 2 (docs/api.md §10). Lower-level exceptions are chained.
"""


class StoreError(Exception):
    """The data dir or its database cannot be used (missing rights, corrupt, newer schema, in use...)."""
