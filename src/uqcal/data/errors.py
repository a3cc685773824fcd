"""User-facing data-layer errors."""

from __future__ import annotations


class DataSourceError(RuntimeError):
    """A dataset could not be obtained or read; the message says what to do about it."""
