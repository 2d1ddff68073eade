"""The command line's argument parser: a bad flag is one line naming it, no usage dump."""

from __future__ import annotations

import argparse

__all__ = ["OneLineParser"]


class OneLineParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors raise ``SystemExit("<prog>: error: ...")``
    (exit status 1 and the message on stderr), so every subcommand fails the same way."""

    def error(self, message):
        raise SystemExit(f"{self.prog}: error: {message}")
