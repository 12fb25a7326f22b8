"""The `rlvr` command line: a thin layer over the Python API, one module per command."""

from .app import main

__all__ = ["main"]
