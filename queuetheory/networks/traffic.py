"""Traffic equations, per-agent token loads, virtual stations and the stability report.

Seed 004 §4 (spec §4): the visit rate ``λ_k`` of every class solves the traffic equations
on the class graph (a fork copies its rate onto each branch, a join releases at the rate of
one branch, a router splits evenly). The token load of agent ``j`` is

    ρ_j = Σ_{k at j} λ_k (m_p^k + m_d^k) · t_b^j / b^j                     (4.1)–(4.3)

with ``t_b^j = time_model.token_time(b^j)``. ``ρ_j < 1`` is necessary for stability.

Static priorities add *virtual stations* (Rybko–Stolyar 1992; Dai & Harrison 2020 §8):
classes ``k`` at agent ``i`` and ``l`` at agent ``j ≠ i`` such that ``k``'s only input comes
from a class at ``j`` ranked below ``l``, and ``l``'s from a class at ``i`` ranked below ``k``.
While ``l`` holds fluid, ``k`` gets no input, and vice versa, so in the fluid model the two
are never served together and ``ρ_k + ρ_l < 1`` is necessary too. For Li, Dai, Peng's
Rybko–Stolyar network under "up" priorities this is the condition that the paper's Figure 8
violates at ρ = 0.9 (spec §4.4, derived, not stated in the paper).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import pandas as pd

from .graph import mean_tokens

__all__ = ["class_rates", "traffic", "agent_loads", "virtual_station_loads",
           "stability_report", "StabilityReport", "virtual_pairs"]


def class_rates(net) -> dict:
    """Visit rate of every node of ``net`` from the traffic equations (topological order).

    Parameters
    ----------
    net : AgentNetwork
        The network (validated first).

    Returns
    -------
    dict
        node -> ``λ``, its visit rate in requests (or tasks) per time unit.

    Raises
    ------
    ValueError
        If ``net`` is not valid (:meth:`AgentNetwork.validate`).
    """
    net.validate()
    rate = {}
    for v in nx.topological_sort(net):
        d = net.nodes[v]
        if d["kind"] == "source":
            rate[v] = float(d["rate"])
            continue
        inflow = 0.0
        for u in net.predecessors(v):
            share = rate[u]
            if net.nodes[u]["kind"] == "router":
                share /= net.out_degree(u)
            inflow += share
        rate[v] = inflow / net.in_degree(v) if d["kind"] == "join" else inflow
    return rate


def traffic(net) -> pd.DataFrame:
    """One row per class: agent, visit rate, mean lengths, token rate and token load.

    Parameters
    ----------
    net : AgentNetwork
        The network (validated first).

    Returns
    -------
    pandas.DataFrame
        Indexed by class: ``agent``, ``rate`` (``λ_k``), ``mean_prompt`` (``m_p^k``),
        ``mean_output`` (``m_d^k``), ``token_rate`` (``λ_k (m_p^k + m_d^k)``) and ``load``
        (its share of the agent's capacity ``b/t_b``, the summand of eqs. 4.1–4.3).

    Raises
    ------
    ValueError
        If ``net`` is not valid (:meth:`AgentNetwork.validate`).
    """
    rate = class_rates(net)
    rows = []
    for k in net.nodes_of("class"):
        d = net.nodes[k]
        a = net.agents[d["agent"]]
        mp, md = mean_tokens(d["lengths"])
        w = mp + md
        rows.append({"class": k, "agent": d["agent"], "rate": rate[k],
                     "mean_prompt": mp, "mean_output": md,
                     "token_rate": rate[k] * w, "load": rate[k] * w / a.capacity})
    return pd.DataFrame(rows).set_index("class")


def agent_loads(net) -> pd.DataFrame:
    """One row per agent: budget ``b``, ``t_b``, capacity ``b/t_b``, token rate, load ``ρ_j``.

    Parameters
    ----------
    net : AgentNetwork
        The network (validated first).

    Returns
    -------
    pandas.DataFrame
        Indexed by agent: ``token_budget``, ``batch_time``, ``capacity``, ``token_rate``
        and ``load`` (``ρ_j``, eqs. 4.1–4.3).

    Raises
    ------
    ValueError
        If ``net`` is not valid (:meth:`AgentNetwork.validate`).
    """
    tr = traffic(net)
    rows = []
    for name, a in net.agents.items():
        mine = tr[tr["agent"] == name]
        rows.append({"agent": name, "token_budget": a.token_budget, "batch_time": a.batch_time,
                     "capacity": a.capacity, "token_rate": float(mine["token_rate"].sum()),
                     "load": float(mine["load"].sum())})
    return pd.DataFrame(rows).set_index("agent")


def virtual_pairs(station, rank, pred, load) -> list:
    """Virtual stations of a static-priority network given as plain sequences per class.

    ``station[k]``: where class ``k`` is served; ``rank[k]``: its priority there (smaller is
    more important; ``None`` when the station has no static priority); ``pred[k]``: the
    class feeding ``k`` (``None`` for external arrivals); ``load[k]``: ``λ_k m_k / capacity``.
    Returns ``[(k, l, load[k] + load[l]), ...]`` over the pairs defined in the module doc.
    """
    pairs = []
    n = len(station)

    def below(c, top):
        return (c is not None and station[c] == station[top] and rank[c] is not None
                and rank[top] is not None and rank[c] > rank[top])

    for k in range(n):
        for m in range(k + 1, n):
            if station[k] != station[m] and below(pred[k], m) and below(pred[m], k):
                pairs.append((k, m, load[k] + load[m]))
    return pairs


def virtual_station_loads(net) -> pd.DataFrame:
    """Virtual stations of ``net``'s static priorities, with their loads ``ρ_k + ρ_l``.

    Parameters
    ----------
    net : AgentNetwork
        The network (validated first).

    Returns
    -------
    pandas.DataFrame
        One row per virtual station: ``classes`` (the pair), ``agents`` (theirs) and
        ``load`` (``ρ_k + ρ_l``); empty without one.

    Raises
    ------
    ValueError
        If ``net`` is not valid (:meth:`AgentNetwork.validate`).
    """
    tr = traffic(net)
    names = list(tr.index)
    index = {k: i for i, k in enumerate(names)}
    rank, pred = [], []
    for k in names:
        a = net.agents[tr.loc[k, "agent"]]
        order = [str(c) for c in a.priority] if a.priority is not None else None
        rank.append(order.index(str(k)) if order else None)
        feeders = [u for u in net.predecessors(k) if net.nodes[u]["kind"] == "class"]
        only = len(feeders) == 1 and net.in_degree(k) == 1
        pred.append(index[feeders[0]] if only else None)
    pairs = virtual_pairs(list(tr["agent"]), rank, pred, list(tr["load"]))
    rows = [{"classes": (names[k], names[m]),
             "agents": (tr.loc[names[k], "agent"], tr.loc[names[m], "agent"]), "load": v}
            for k, m, v in pairs]
    return pd.DataFrame(rows, columns=["classes", "agents", "load"])


@dataclass(frozen=True)
class StabilityReport:
    """Every necessary load condition of a network, with its value.

    ``conditions`` has one row per condition: ``kind`` (``agent``: ρ_j < 1, eqs. 4.1–4.3;
    ``pool``: the engines behind a router together, eq. 4.1; ``virtual``: a virtual station),
    ``members``, ``load`` and ``holds``. All loads are linear in the arrival rates, so
    ``scale = 1 / max load`` is the factor by which every rate can grow before the first
    condition binds. The conditions are necessary, not sufficient: ``all_hold`` does not
    prove stability (the paper proves it for one engine, parallel engines and two types).

    Attributes
    ----------
    conditions : pandas.DataFrame
        Indexed by condition (``"rho[agent] < 1"``, ``"pool[router] < 1"``,
        ``"virtual[k+l] < 1"``): ``kind``, ``members``, ``load``, ``holds`` and ``margin``
        (``1 − load``).
    classes : pandas.DataFrame
        The per-class traffic (:func:`traffic`).
    agents : pandas.DataFrame
        The per-agent loads (:func:`agent_loads`).
    """

    conditions: pd.DataFrame
    classes: pd.DataFrame
    agents: pd.DataFrame

    @property
    def all_hold(self) -> bool:
        """Whether every necessary condition holds (not a proof of stability)."""
        return bool(self.conditions["holds"].all())

    @property
    def max_load(self) -> float:
        """The largest load over the conditions."""
        return float(self.conditions["load"].max())

    @property
    def binding(self) -> str:
        """The name of the condition with the largest load."""
        return str(self.conditions["load"].idxmax())

    @property
    def virtual_station_loads(self) -> pd.DataFrame:
        """The rows of ``conditions`` of kind ``virtual``."""
        return self.conditions[self.conditions["kind"] == "virtual"]

    def scale(self, kind: str | None = None) -> float:
        """``1 / max load`` over the conditions (of one ``kind``): the rate multiplier at
        which the first condition reaches 1.

        Parameters
        ----------
        kind : {"agent", "pool", "virtual"}, optional
            Only the conditions of this kind; default all.

        Returns
        -------
        float
            ``1 / max load``.

        Raises
        ------
        ValueError
            If the report has no condition of that kind.
        """
        c = self.conditions if kind is None else self.conditions[self.conditions["kind"] == kind]
        if c.empty:
            raise ValueError(f"kind={kind!r}: the report has no such condition")
        return float(1.0 / c["load"].max())

    def __str__(self) -> str:
        return self.conditions.to_string()


def stability_report(net) -> StabilityReport:
    """List every necessary condition of ``net`` (agents, router pools, virtual stations).

    Parameters
    ----------
    net : AgentNetwork
        The network (validated first).

    Returns
    -------
    StabilityReport
        The conditions with their loads, and the per-class and per-agent traffic.

    Raises
    ------
    ValueError
        If ``net`` is not valid (:meth:`AgentNetwork.validate`).
    """
    tr = traffic(net)
    ag = agent_loads(net)
    rows = [{"condition": f"rho[{a}] < 1", "kind": "agent", "members": (a,),
             "load": ag.loc[a, "load"]} for a in ag.index]
    for r in net.nodes_of("router"):
        engines = sorted({net.nodes[k]["agent"] for k in net.successors(r)}, key=str)
        cap = float(sum(net.agents[a].capacity for a in engines))
        served = [k for k in tr.index if tr.loc[k, "agent"] in engines]
        rows.append({"condition": f"pool[{r}] < 1", "kind": "pool", "members": tuple(engines),
                     "load": float(tr.loc[served, "token_rate"].sum()) / cap})
    vs = virtual_station_loads(net)
    for _, v in vs.iterrows():
        k, m = v["classes"]
        rows.append({"condition": f"virtual[{k}+{m}] < 1", "kind": "virtual",
                     "members": v["classes"], "load": v["load"]})
    cond = pd.DataFrame(rows).set_index("condition")
    cond["holds"] = cond["load"] < 1
    cond["margin"] = 1 - cond["load"]
    return StabilityReport(cond, tr, ag)

