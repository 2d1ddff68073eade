"""Silence HiGHS's start-up banner.

HiGHS prints "Running HiGHS … Copyright …" from C++ when the first ``Highs`` object of a
process is built, before any option (``output_flag``, ``log_to_console``) can be set, so
neither a solver option nor a Python warnings filter reaches it. The analytic packages build
that first instance here with the process's stdout and stderr pointed at ``os.devnull`` at
the file-descriptor level; later instances print nothing, and cvxpy keeps the solver's log
off unless a solve asks for ``verbose=True``.
"""

from __future__ import annotations

import ctypes
import os
import sys

_silenced = False


def _flush_c_streams() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):    # no C runtime reachable this way
        pass


def silence_highs_banner() -> None:
    """Build the process's first ``highspy.Highs`` with its output discarded (once)."""
    global _silenced
    if _silenced:
        return
    try:
        import highspy
    except ImportError:
        _silenced = True
        return
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    _flush_c_streams()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        highspy.Highs()
        _flush_c_streams()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
    _silenced = True


def solve_highs(problem, what: str, **options) -> None:
    """Solve a cvxpy ``problem`` with HiGHS, quietly; :class:`~queuetheory.errors.SolverError`
    naming ``what`` unless it ends optimal."""
    import cvxpy as cp

    from .errors import SolverError

    silence_highs_banner()
    try:
        problem.solve(solver=cp.HIGHS, verbose=False, **options)
    except (cp.error.SolverError, ValueError) as err:
        raise SolverError(f"{what}: HiGHS failed ({err})") from None
    if problem.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"{what}: solver status {problem.status}")
