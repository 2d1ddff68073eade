"""Simulation of an :class:`AgentNetwork`: one shared :class:`~queuetheory.engine.Engine` per
agent, and the records of a run (:class:`NetworkResult`).

The run itself is :class:`~queuetheory.networks.stepped.StepRun` (the general path: one
engine decision per agent per epoch) or, for unit-time networks of FCFS Sarathi and static
priority agents, :class:`~queuetheory.networks.slotted.SlotRun` (the per-slot kernel, the
same result).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import check_positive
from ..stability import path_growth_rate
from .slotted import SlotRun, covers
from .stepped import StepRun
from .traffic import agent_loads

__all__ = ["simulate", "NetworkResult"]


@dataclass
class NetworkResult:
    """The records of one network run.

    ``paths``: at every epoch, ``requests`` (external requests in the network),
    ``tokens`` (unprocessed tokens at all agents, ``|X(n)|`` summed; the two panels of Figure 8),
    ``join_waiting`` and per agent ``requests[a]`` and ``tokens[a]``. ``requests`` (one row
    per external request), ``per_agent``, ``per_type`` and ``per_class`` are DataFrames;
    ``engines`` maps each agent to its :class:`~queuetheory.engine.Engine`.

    Attributes
    ----------
    net : AgentNetwork
        The network run.
    engines : dict
        Agent name -> its :class:`~queuetheory.engine.Engine` (with its request table and
        batch log).
    paths : pandas.DataFrame
        At every epoch: ``time``, ``requests``, ``join_waiting``, ``requests[a]`` and
        ``tokens[a]`` per agent, and ``tokens`` (their sum).
    requests : pandas.DataFrame
        One row per external request: ``type`` (its source), ``arrival``, ``finish`` and
        ``sojourn``.
    horizon : float
        The run's end, in the time unit.
    tokens_in : int
        The tokens that entered the agents over the run.
    local : dict
        Agent name -> its class names in local order.
    job_of : dict
        Agent name -> the external request of each of its visits (an array).
    """

    net: object
    engines: dict
    paths: pd.DataFrame
    requests: pd.DataFrame
    horizon: float
    tokens_in: int
    local: dict
    job_of: dict

    def growth_rate(self, quantity: str = "tokens", **kwargs):
        """Block-means slope of ``tokens`` or ``requests`` (see
        :func:`~queuetheory.stability.path_growth_rate`), relative to the tokens (requests) that
        entered the agents per time unit.

        Parameters
        ----------
        quantity : {"tokens", "requests"}, default "tokens"
            The path tested.
        **kwargs
            To :func:`~queuetheory.stability.path_growth_rate` (``tail``, ``blocks``,
            ``level``, ``tolerance``).

        Returns
        -------
        GrowthRate
            The verdict, the drift and its intervals.

        Raises
        ------
        ValueError
            If ``quantity`` is neither value, or a test argument breaks its rule.
        """
        if quantity not in ("tokens", "requests"):
            raise ValueError(f"quantity={quantity!r}: must be 'tokens' or 'requests'")
        offered = (self.tokens_in if quantity == "tokens" else len(self.requests)) / self.horizon
        return path_growth_rate(self.paths["time"].to_numpy(), self.paths[quantity].to_numpy(),
                                end=self.horizon, offered=offered, quantity=quantity, **kwargs)

    def time_average(self, column: str) -> float:
        """Time average of a ``paths`` column over ``[first epoch, horizon]``.

        Parameters
        ----------
        column : str
            A column of ``paths`` (``"requests"``, ``"tokens"``, ``"requests[a]"``, ...).

        Returns
        -------
        float
            Its time average (0 without epochs).
        """
        t = self.paths["time"].to_numpy()
        y = self.paths[column].to_numpy(float)
        if t.size == 0:
            return 0.0
        dt = np.diff(np.append(t, self.horizon))
        return float((y * dt).sum() / max(self.horizon - t[0], 1e-300))

    @property
    def per_agent(self) -> pd.DataFrame:
        """One row per agent: ``load`` (``ρ_j``), ``iterations``, ``busy_fraction``,
        ``token_throughput``, ``mean_requests``, ``requests_end`` and ``tokens_end``."""
        loads = agent_loads(self.net)["load"]
        rows = []
        for a, eng in self.engines.items():
            log = eng.log
            rows.append({"agent": a, "load": loads[a], "iterations": eng.iteration,
                         "busy_fraction": float(log.column("duration").sum()) / self.horizon,
                         "token_throughput": float(log.column("token_load").sum()) / self.horizon,
                         "mean_requests": self.time_average(f"requests[{a}]"),
                         "requests_end": int(self.paths[f"requests[{a}]"].iloc[-1]),
                         "tokens_end": int(self.paths[f"tokens[{a}]"].iloc[-1])})
        return pd.DataFrame(rows).set_index("agent")

    @property
    def per_type(self) -> pd.DataFrame:
        """One row per request type (source): ``arrived``, ``completed``, ``mean_sojourn``
        and ``p99_sojourn``."""
        r = self.requests
        g = r.groupby("type")
        return pd.DataFrame({"arrived": g.size(), "completed": g["finish"].count(),
                             "mean_sojourn": g["sojourn"].mean(),
                             "p99_sojourn": g["sojourn"].quantile(0.99)})

    @property
    def visits(self) -> pd.DataFrame:
        """One row per visit of a request (or fork task) to a class: agent, class, request,
        lengths, entry (``arrival``), ``first_token`` and ``finish`` times."""
        frames = []
        for a, eng in self.engines.items():
            t = eng.table
            local = np.asarray(self.local[a], dtype=object)
            frames.append(pd.DataFrame({
                "agent": a, "class": local[t.column("cls")], "request": self.job_of[a][: t.n],
                "prompt": t.column("prompt"), "output": t.column("output"),
                "arrival": t.column("arrival"), "first_token": t.column("first_token"),
                "finish": t.column("finish")}))
        return pd.concat(frames, ignore_index=True)

    @property
    def per_class(self) -> pd.DataFrame:
        """One row per class: ``agent``, ``visits``, ``completed`` and ``mean_sojourn`` (of
        the completed visits)."""
        rows = []
        for a, eng in self.engines.items():
            t = eng.table
            cls, fin, arr = t.column("cls"), t.column("finish"), t.column("arrival")
            for c, k in enumerate(self.local[a]):
                mine = cls == c
                done = mine & ~np.isnan(fin)
                rows.append({"class": k, "agent": a, "visits": int(mine.sum()),
                             "completed": int(done.sum()),
                             "mean_sojourn": float(np.mean(fin[done] - arr[done]))
                             if done.any() else float("nan")})
        return pd.DataFrame(rows).set_index("class")

    @property
    def metrics(self) -> dict:
        """The run's figures: ``horizon``, ``arrived``, ``completed``, ``mean_sojourn``,
        ``mean_requests``, ``mean_tokens``, ``requests_end`` and ``tokens_end``."""
        r = self.requests
        done = r["finish"].notna()
        return {"horizon": self.horizon, "arrived": int(len(r)), "completed": int(done.sum()),
                "mean_sojourn": float(r.loc[done, "sojourn"].mean()),
                "mean_requests": self.time_average("requests"),
                "mean_tokens": self.time_average("tokens"),
                "requests_end": int(self.paths["requests"].iloc[-1]) if len(self.paths) else 0,
                "tokens_end": int(self.paths["tokens"].iloc[-1]) if len(self.paths) else 0}


def simulate(net, *, horizon: float, seed=0, fast_path: bool = True) -> NetworkResult:
    """Run ``net`` (an :class:`AgentNetwork`) from empty until ``horizon``.

    Every agent is the shared engine with its own policy; arrivals are the sources' Poisson
    processes, lengths are drawn per visit. Returns a :class:`NetworkResult`.

    ``fast_path``: networks of unit-time agents running FCFS Sarathi or FCFS StaticPriority
    (the builders' defaults) go through the per-slot kernel of
    :mod:`~queuetheory.networks.slotted`, which gives the same result as the general path
    (:mod:`~queuetheory.networks.stepped`, one engine decision per agent per epoch) about
    ten times faster on the paper's networks (benchmarks/networks_rs.py); ``False`` forces
    the general path. Other networks always take it.

    Parameters
    ----------
    net : AgentNetwork
        The network (validated first).
    horizon : float
        The run's end, in the time unit (> 0).
    seed : int, default 0
        The seed of the arrivals, lengths, routing and policies (the root of a
        :class:`numpy.random.SeedSequence`).
    fast_path : bool, default True
        Whether networks the per-slot kernel covers go through it.

    Returns
    -------
    NetworkResult
        The paths, the requests and each agent's engine.

    Raises
    ------
    ValueError
        If ``net`` is not valid (:meth:`AgentNetwork.validate`) or ``horizon`` is not a
        positive number.
    """
    net.validate()
    check_positive("horizon", horizon)
    run = (SlotRun if fast_path and covers(net) else StepRun)(net, horizon, seed)
    rows, arrived = run.run()
    names = run.names
    cols = (["time", "requests", "join_waiting"] + [f"requests[{a}]" for a in names]
            + [f"tokens[{a}]" for a in names])
    paths = pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(columns=cols)
    paths["tokens"] = paths[[f"tokens[{a}]" for a in names]].sum(axis=1)
    reqs = pd.DataFrame({"type": np.asarray(run.sources, dtype=object)[run.source[:arrived]],
                         "arrival": run.arrival[:arrived], "finish": run.finish[:arrived]})
    reqs["sojourn"] = reqs["finish"] - reqs["arrival"]
    reqs.index.name = "request"
    return NetworkResult(net, dict(zip(names, run.engines, strict=True)), paths, reqs,
                         float(horizon), run.tokens_in, dict(zip(names, run.local, strict=True)),
                         dict(zip(names, run.job_of, strict=True)))
