"""The command line's argument parser: a bad flag is one line naming it, no usage dump."""

from __future__ import annotations

import argparse

__all__ = ["OneLineParser", "time_model_option"]


class OneLineParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors raise ``SystemExit("<prog>: error: ...")``
    (exit status 1 and the message on stderr), so every subcommand fails the same way."""

    def error(self, message):
        raise SystemExit(f"{self.prog}: error: {message}")


def time_model_option(spec: str, named: dict, constants, shape: str):
    """The model a ``--time`` value names: a key of ``named`` (``{name: factory}``), or three
    comma-separated constants for ``constants`` (written ``shape``, e.g. ``'C,A,B0'``)."""
    if spec in named:
        return named[spec]()
    try:
        values = [float(x) for x in spec.split(",")]
    except ValueError:
        values = []
    if len(values) != 3:
        raise ValueError(f"--time {spec!r}: expected {shape!r} or one of "
                         f"{', '.join(repr(n) for n in named)}")
    return constants(*values)
