"""Multi-turn sessions: chat conversations and agent loops that resend their history.

A session opens with a Poisson arrival; its turn ``k`` sends a prompt made of a shared system
prompt, every earlier turn's new tokens and answer, and its own new tokens (a user message,
or a tool's result in an agent loop), and receives an answer; the next turn is sent a think
time after that answer is complete — a closed loop, so a slow server delays the session's
later turns (:func:`queuetheory.networks.simulate_fleet` runs it). Prompts carry prefix blocks
(:attr:`Trace.blocks`): the system prompt's full blocks are shared by every session, and each
session's history blocks by its later turns, so a prefix cache can serve them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import check_positive
from .core import Lengths, Trace

__all__ = ["Sessions", "SessionPlan", "MAX_SESSIONS"]

#: the most sessions one plan draws
MAX_SESSIONS = 10**6


@dataclass(frozen=True)
class SessionPlan:
    """Sessions, one row per turn: sampled (:meth:`Sessions.sample`, in session order, turn
    order within each) or recorded (:func:`queuetheory.data.bailian_sessions`, in arrival
    order). ``trace`` (arrival = the session's start for a first turn; a later turn's
    arrival is set when the simulation sends it: infinite in a sampled plan, the recorded
    one in a recorded plan), ``session``, ``turn`` (0 for a session's first), ``think`` (the
    wait after the previous turn's answer; 0 for the rows that start) and ``next`` (the row
    of the session's next turn, −1 after its last); ``classes``: the labels of the trace's
    classes, where it has any.

    Attributes
    ----------
    trace : Trace
        One request per turn, with its prompt's prefix blocks.
    session : numpy.ndarray of int64
        The session (conversation) of each row.
    turn : numpy.ndarray of int64
        The turn's number in its session, 0 for the first.
    think : numpy.ndarray of float
        The wait after the previous turn's answer, in time units; 0 for the rows that start.
    next : numpy.ndarray of int64
        The row of the session's next turn, −1 after its last.
    classes : tuple of str, default ()
        The labels of the trace's classes, by class index (empty for a sampled plan).
    """

    trace: Trace
    session: np.ndarray
    turn: np.ndarray
    think: np.ndarray
    next: np.ndarray
    classes: tuple = ()

    @property
    def first(self) -> np.ndarray:
        """Rows that start: no row's next turn (a sampled plan's first turns; in a recorded
        one also the turns whose parent the file does not hold, and later branches)."""
        start = np.ones(len(self.next), dtype=bool)
        start[self.next[self.next >= 0]] = False
        return np.flatnonzero(start)


@dataclass(frozen=True)
class Sessions:
    """A workload of sessions (module docstring).

    Parameters
    ----------
    rate : float
        Sessions opened per time unit (Poisson), > 0.
    turns : int, frozen scipy.stats distribution or array_like, default 4
        Turns per session (a length law: an int, a frozen ``scipy.stats`` distribution or
        samples).
    new_tokens : int, frozen scipy.stats distribution or array_like, default 64
        Tokens a turn adds (the user's message, or a tool's result).
    output : int, frozen scipy.stats distribution or array_like, default 128
        Tokens of each answer (the first included).
    think : float or frozen scipy.stats distribution, default 10.0
        The wait between an answer and the next turn, in time units (a number, or a frozen
        ``scipy.stats`` distribution of non-negative values).
    system : int, default 0
        Tokens of the system prompt every session starts with (0: none).
    block_size : int, default 16
        Tokens per prefix block of the prompts' ids.

    Raises
    ------
    ValueError
        If ``rate`` or ``block_size`` is not positive, ``system`` is not an integer ≥ 0, a
        length law is invalid (see :class:`~queuetheory.workload.Lengths`), or ``think`` is
        a negative number or neither a number nor a distribution.
    """

    rate: float
    turns: object = 4
    new_tokens: object = 64
    output: object = 128
    think: object = 10.0
    system: int = 0
    block_size: int = 16

    def __post_init__(self):
        check_positive("rate", self.rate)
        check_positive("system", self.system, integer=True, allow_zero=True)
        check_positive("block_size", self.block_size, integer=True)
        for name in ("turns", "new_tokens", "output"):
            Lengths(getattr(self, name), name)
        if isinstance(self.think, int | float | np.number):
            check_positive("think", self.think, allow_zero=True)
        elif not hasattr(self.think, "rvs"):
            raise ValueError(f"think={self.think!r}: a number or a frozen scipy.stats "
                             "distribution of non-negative times")

    def sample(self, n_sessions: int, seed=0) -> SessionPlan:
        """``n_sessions`` sessions: their first turns' arrivals, every turn's lengths and
        prefix blocks, and the think times.

        Parameters
        ----------
        n_sessions : int
            Number of sessions, in ``[1, MAX_SESSIONS]``.
        seed : int or numpy.random.Generator, default 0
            Seed of the draw.

        Returns
        -------
        SessionPlan
            One row per turn, in session order and turn order within each; a later turn's
            arrival is infinite (the simulation sends it).

        Raises
        ------
        ValueError
            If ``n_sessions`` is not a positive integer or exceeds :data:`MAX_SESSIONS`, or a
            think time drawn is negative or not finite.
        """
        check_positive("n_sessions", n_sessions, integer=True)
        if n_sessions > MAX_SESSIONS:
            raise ValueError(f"n_sessions={n_sessions!r}: at most {MAX_SESSIONS:,} (every turn "
                             "of every session is held in memory)")
        n_sessions = int(n_sessions)
        rng = np.random.default_rng(seed)
        starts = np.cumsum(rng.exponential(1 / self.rate, n_sessions))
        turns = Lengths(self.turns, "turns").sample(rng, n_sessions)
        rows = int(turns.sum())
        new = Lengths(self.new_tokens, "new_tokens").sample(rng, rows)
        out = Lengths(self.output, "output").sample(rng, rows)
        think = (np.full(rows, float(self.think)) if not hasattr(self.think, "rvs")
                 else np.asarray(self.think.rvs(size=rows, random_state=rng), float))
        if np.any(think < 0) or not np.all(np.isfinite(think)):
            raise ValueError("think: drew a negative or non-finite time")
        session = np.repeat(np.arange(n_sessions), turns)
        first = np.concatenate([[0], np.cumsum(turns)[:-1]])
        turn = np.arange(rows) - np.repeat(first, turns)
        think[turn == 0] = 0.0
        prompt = np.empty(rows, np.int64)
        blocks = np.empty(rows, dtype=object)
        bs, sys_blocks = self.block_size, self.system // self.block_size
        for s in range(n_sessions):
            history = self.system
            for r in range(first[s], first[s] + turns[s]):
                prompt[r] = history + new[r]
                full = int(prompt[r]) // bs
                # ids: the system prompt's blocks shared by all, then this session's own
                ids = np.arange(full, dtype=np.int64)
                own = ids >= sys_blocks
                ids[own] = (s + 1) * (1 << 32) + ids[own]
                blocks[r] = ids
                history = int(prompt[r] + out[r])
        nxt = np.arange(1, rows + 1)
        nxt[np.cumsum(turns) - 1] = -1
        arrival = np.where(turn == 0, np.repeat(starts, turns), np.inf)
        zeros = np.zeros(rows, np.int64)
        trace = Trace(arrival, prompt, out, zeros, out.copy(), out.copy(), zeros,
                      blocks=blocks, block_size=bs)
        return SessionPlan(trace, session, turn, think, nxt)
