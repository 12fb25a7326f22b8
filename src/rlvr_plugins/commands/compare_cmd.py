"""``rlvr compare``: placeholder, being written."""

from __future__ import annotations


def add_arguments(parser) -> None:
    """Add this command's arguments to its argparse sub-parser (keep imports here light)."""


def run(args) -> int:
    """Run the command from parsed arguments; return the exit code."""
    raise NotImplementedError("rlvr compare is not written yet")
