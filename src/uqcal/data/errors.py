"""User-facing data errors."""


class DataSourceError(RuntimeError):
    """A dataset could not be obtained; the message says which, from where, and how to fix it."""
