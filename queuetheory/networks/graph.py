"""``AgentNetwork``: a networkx ``DiGraph`` of request classes routed through LLM agents.

Seed 004 §4 (spec ``throughput_optimal.md`` §4). The graph is a *class graph*: a node is a
*class* (one visit of a request type to one agent, with its own prompt/output length laws),
a ``source`` (external Poisson arrivals), a ``router`` (load balancer), a ``fork`` (one task
per branch), a ``join`` (waits for every branch of its fork) or the ``sink``. An edge
``u → v`` means "on completion at ``u`` go to ``v``". The agents (LLM engines: time model,
token budget, scheduler or static class priority) live in ``net.agents``.

Lengths are drawn afresh at every visit, independently of earlier visits (spec §4).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import networkx as nx

from ..engine.server import Server, as_server
from ..errors import check_positive
from ..policies import Policy, Sarathi, StaticPriority
from ..timing import TimeModel
from ..workload import Lengths, RequestClass

__all__ = ["AgentNetwork", "Agent", "ROUTERS", "KINDS", "mean_tokens"]

KINDS = ("source", "class", "router", "fork", "join", "sink")
ROUTERS = ("random", "round_robin", "least_requests", "least_tokens")
SINK = "sink"
_LAW_MEANS: dict = {}


def _law_mean(spec) -> float:
    """Mean of a length law as :class:`RequestClass` computes it (rounded, clipped to ≥ 1),
    remembered per distribution object: the quantile-grid quadrature is slow."""
    if not hasattr(spec, "ppf"):
        return Lengths(spec).mean
    hit = _LAW_MEANS.get(id(spec))
    if hit is None or hit[0] is not spec:
        hit = _LAW_MEANS[id(spec)] = (spec, Lengths(spec).mean)
    return hit[1]


def mean_tokens(lengths: RequestClass) -> tuple:
    """``(m_p, m_d)`` of a class's length laws."""
    return _law_mean(lengths.prompt), _law_mean(lengths.output)


@dataclass(frozen=True)
class Agent:
    """One LLM engine of the network.

    ``policy`` is any :class:`~queuetheory.policies.Policy` (copied for every run);
    ``priority`` lists the agent's classes, most important first, and gives the
    work-conserving :class:`~queuetheory.policies.StaticPriority` (Li, Dai, Peng §4.3).
    With neither, the agent runs type-blind FCFS :class:`~queuetheory.policies.Sarathi`.

    Attributes
    ----------
    name : str
        The agent's name, a key of ``AgentNetwork.agents``.
    time_model : TimeModel
        The engine's batch-time model.
    token_budget : int
        ``b``, the most tokens one batch serves.
    policy : Policy or None
        The scheduler (copied for every run), or ``None``.
    priority : tuple or None
        The agent's class names, most important first (static priority), or ``None``.
    """

    name: str
    time_model: TimeModel
    token_budget: int
    policy: Policy | None = None
    priority: tuple | None = None

    def make_policy(self, classes: list) -> Policy:
        """A fresh policy for one run; ``classes`` are the agent's class names in local order.

        Parameters
        ----------
        classes : list
            The agent's class names, in local order (the order the engine numbers them).

        Returns
        -------
        Policy
            A deep copy of ``policy``; else :class:`~queuetheory.policies.StaticPriority`
            over ``priority``; else FCFS :class:`~queuetheory.policies.Sarathi`, with the
            agent's token budget.
        """
        if self.policy is not None:
            return copy.deepcopy(self.policy)
        if self.priority is not None:
            return StaticPriority(self.token_budget, [classes.index(c) for c in self.priority])
        return Sarathi(self.token_budget)

    @property
    def batch_time(self) -> float:
        """``t_b``: the duration of a full batch of ``b`` tokens."""
        return float(self.time_model.token_time(self.token_budget))

    @property
    def capacity(self) -> float:
        """``b / t_b``: the token rate of full batches (Li, Dai, Peng, eq. 2.7)."""
        return self.token_budget / self.batch_time


class AgentNetwork(nx.DiGraph):
    """A network of LLM agents: a class graph plus the agents that serve the classes.

    Build it with :meth:`add_agent`, :meth:`add_source`, :meth:`add_class`,
    :meth:`add_route`, :meth:`add_router`, :meth:`add_fork` and :meth:`add_join`, or with
    the builders :func:`parallel`, :func:`two_type_engine`, :func:`fork_join` and
    :func:`rybko_stolyar`. ``slot`` (optional) puts decisions on a slot grid: an arrival in
    ``(n−1, n]`` slots is admitted at slot ``n`` (Li, Dai, Peng's ``a_n``, (2.1)).

    Parameters
    ----------
    incoming_graph_data : optional
        As for :class:`networkx.DiGraph`: a graph to copy (with its ``graph["agents"]``).
    slot : float, optional
        The slot length of the decision grid, in the time unit; ``None``: decisions in
        continuous time.
    arrivals : str, default "poisson"
        Every source's arrival process, as a :class:`~queuetheory.Workload`'s ``arrivals``
        (``"poisson"``, ``"deterministic"``, ...).
    **attr
        Graph attributes, as for :class:`networkx.DiGraph`.
    """

    def __init__(self, incoming_graph_data=None, *, slot: float | None = None,
                 arrivals: str = "poisson", **attr):
        super().__init__(incoming_graph_data, **attr)
        self.graph.setdefault("agents", {})
        self.graph.setdefault("slot", slot)
        self.graph.setdefault("arrivals", arrivals)
        if SINK not in self:
            self.add_node(SINK, kind="sink")

    # ---- description ------------------------------------------------------------------------
    @property
    def agents(self) -> dict:
        """The agents, name -> :class:`Agent`."""
        return self.graph["agents"]

    @property
    def slot(self):
        """The slot length of the decision grid, or ``None`` (continuous time)."""
        return self.graph["slot"]

    def nodes_of(self, kind: str) -> list:
        """The nodes of one kind, in the order they were added.

        Parameters
        ----------
        kind : str
            One of ``KINDS``: ``"source"``, ``"class"``, ``"router"``, ``"fork"``,
            ``"join"``, ``"sink"``.

        Returns
        -------
        list
            Their names.
        """
        return [v for v, k in self.nodes(data="kind") if k == kind]

    def classes_at(self, agent: str) -> list:
        """The class names served by ``agent``, in the order they were added.

        Parameters
        ----------
        agent : str
            An agent's name.

        Returns
        -------
        list
            Its class names.
        """
        return [v for v, d in self.nodes(data=True)
                if d.get("kind") == "class" and d["agent"] == agent]

    def agent_graph(self) -> nx.DiGraph:
        """Agents as nodes; an edge ``i → j`` when a class at ``i`` feeds a class at ``j``.

        Returns
        -------
        networkx.DiGraph
            The agent graph; each edge's ``classes`` lists the classes at ``i`` that feed
            ``j``.
        """
        g = nx.DiGraph()
        g.add_nodes_from(self.agents)
        for k in self.nodes_of("class"):
            for nxt in self.next_classes(k):
                i, j = self.nodes[k]["agent"], self.nodes[nxt]["agent"]
                g.add_edge(i, j, classes=g.get_edge_data(i, j, {}).get("classes", ()) + (k,))
        return g

    def next_classes(self, node) -> list:
        """The classes reached from ``node`` through routers, forks and joins.

        Parameters
        ----------
        node : hashable
            A node of the class graph.

        Returns
        -------
        list
            The class names reached (the sink ends a path and is left out).
        """
        out = []
        for v in self.successors(node):
            kind = self.nodes[v].get("kind")
            out.extend([v] if kind == "class" else [] if kind == "sink" else self.next_classes(v))
        return out

    # ---- building -----------------------------------------------------------------------------
    def add_agent(self, name, time_model: TimeModel, token_budget: int | None = None, *,
                  policy=None, priority=None) -> Agent:
        """Add an LLM engine (see :class:`Agent`); ``time_model`` may be a whole
        :class:`~queuetheory.engine.Server`, whose ``token_budget`` then stands (the
        network's engines have no KV limit and emit the first token with a decode
        iteration: a server that says otherwise is refused).

        Parameters
        ----------
        name : str
            The agent's name, new to the network.
        time_model : TimeModel or Server
            The engine's batch-time model, or a whole :class:`~queuetheory.engine.Server`
            (its ``token_budget`` then stands; given again, it must agree; its ``memory``
            must be ``None`` and its ``first_token`` ``"decode"``).
        token_budget : int, optional
            ``b``, the most tokens one batch serves; required unless a server gives it.
        policy : Policy, optional
            The scheduler (copied for every run); not with ``priority``.
        priority : sequence, optional
            The agent's class names, most important first (static priority); not with
            ``policy``.

        Returns
        -------
        Agent
            The agent added.

        Raises
        ------
        ValueError
            If the name is already taken, the server has a memory limit or
            ``first_token="prefill"`` or contradicts ``token_budget``, no token budget is
            given or it is not a positive integer, ``time_model`` is not a
            :class:`~queuetheory.timing.TimeModel`, both ``policy`` and ``priority`` are
            given, ``policy`` is not a :class:`~queuetheory.policies.Policy`, or its own
            token budget exceeds the agent's.
        """
        if name in self.agents:
            raise ValueError(f"agent={name!r}: already in the network")
        if isinstance(time_model, Server):
            server = as_server(time_model, token_budget=token_budget)
            if server.memory is not None or server.first_token != "decode":
                raise ValueError(f"time_model={server!r}: an agent network's engines have no "
                                 "KV limit (memory=None) and first_token='decode' (Li, Dai, "
                                 "Peng's model)")
            time_model, token_budget = server.time_model, server.token_budget
        if token_budget is None:
            raise ValueError(f"token_budget=None: agent {name!r} needs a token budget")
        agent = Agent(name, time_model, token_budget, policy,
                      None if priority is None else tuple(priority))
        self._check_agent(agent)
        self.agents[name] = agent
        return agent

    def add_source(self, name, rate: float, to) -> None:
        """External Poisson arrivals at ``rate`` per time unit, entering node ``to``.

        Parameters
        ----------
        name : hashable
            The source's node name.
        rate : float
            The arrival rate, in requests per time unit (checked by :meth:`validate`).
        to : hashable
            The node the arrivals enter (a class, router or fork).
        """
        self.add_node(name, kind="source", rate=rate)
        self.add_edge(name, to)

    def add_class(self, name, agent, prompt, output, to=SINK) -> None:
        """A visit to ``agent`` with its own prompt/output length laws (int, frozen
        ``scipy.stats`` distribution or samples, as in :class:`~queuetheory.RequestClass`).

        Parameters
        ----------
        name : hashable
            The class's node name.
        agent : str
            The agent that serves it.
        prompt : int, scipy.stats distribution or array_like
            The prompt length law, drawn afresh at every visit.
        output : int, scipy.stats distribution or array_like
            The output length law, drawn afresh at every visit.
        to : hashable, default "sink"
            Where a request goes on completion.
        """
        self.add_node(name, kind="class", agent=agent,
                      lengths=RequestClass(prompt, output, rate=0.0, name=str(name)))
        self.add_edge(name, to)

    def add_route(self, name, rate: float, stages, to=SINK) -> list:
        """A request type visiting ``stages = [(agent, prompt, output), ...]`` in order.

        Its classes are named ``f"{name}{k}"`` for stage ``k = 1, 2, …``; returns them.

        Parameters
        ----------
        name : str
            The request type's name; its source is ``f"src:{name}"``.
        rate : float
            Its external arrival rate, in requests per time unit.
        stages : sequence of tuple
            ``(agent, prompt, output)`` per stage, in visiting order.
        to : hashable, default "sink"
            Where a request goes after the last stage.

        Returns
        -------
        list of str
            The class names, one per stage.
        """
        names = [f"{name}{k}" for k in range(1, len(stages) + 1)]
        for k, (agent, prompt, output) in enumerate(stages):
            self.add_class(names[k], agent, prompt, output,
                           to=names[k + 1] if k + 1 < len(stages) else to)
        self.add_source(f"src:{name}", rate, names[0])
        return names

    def add_router(self, name, to, router: str = "random") -> None:
        """A load balancer sending each request to one of the classes ``to`` (Li, Dai, Peng
        §4.1).

        Parameters
        ----------
        name : hashable
            The router's node name.
        to : iterable
            The classes it chooses among.
        router : str, default "random"
            One of ``ROUTERS``: ``random``, ``round_robin``, ``least_requests``,
            ``least_tokens`` (checked by :meth:`validate`).
        """
        self.add_node(name, kind="router", router=router)
        self.add_edges_from((name, v) for v in to)

    def add_fork(self, name, to) -> None:
        """Each request becomes one task on every branch ``to`` (Li, Dai, Peng §4.3).

        Parameters
        ----------
        name : hashable
            The fork's node name.
        to : iterable
            The first node of each branch (at least two).
        """
        self.add_node(name, kind="fork")
        self.add_edges_from((name, v) for v in to)

    def add_join(self, name, fork, to=SINK) -> None:
        """Releases a request once all the branches of ``fork`` have finished it.

        Parameters
        ----------
        name : hashable
            The join's node name.
        fork : hashable
            The fork whose branches it waits for.
        to : hashable, default "sink"
            Where the request goes once released.
        """
        self.add_node(name, kind="join", fork=fork)
        self.add_edge(name, to)

    # ---- validation ---------------------------------------------------------------------------
    def _check_agent(self, a: Agent) -> None:
        if not isinstance(a.time_model, TimeModel):
            raise ValueError(f"agent {a.name!r}: time_model={a.time_model!r} must be a TimeModel")
        check_positive(f"agent {a.name!r}: token_budget", a.token_budget, integer=True)
        if a.policy is not None and a.priority is not None:
            raise ValueError(f"agent {a.name!r}: give a policy or a priority order, not both")
        if a.policy is not None:
            if not isinstance(a.policy, Policy):
                raise ValueError(f"agent {a.name!r}: policy={a.policy!r} must be a Policy")
            own = getattr(a.policy, "token_budget", None)
            if own is not None and own > a.token_budget:
                raise ValueError(f"agent {a.name!r}: the policy's token_budget={own} exceeds "
                                 f"the agent's token_budget={a.token_budget}")

    def validate(self) -> AgentNetwork:
        """Check the description; raise ``ValueError`` naming the node and the rule broken.

        Returns
        -------
        AgentNetwork
            The network itself, valid.

        Raises
        ------
        ValueError
            Naming the node and the rule broken: a node referenced but never added, a sink
            with successors, a class, source or join without exactly one successor, a source
            with a rate that is not positive or with predecessors, a class whose agent is
            not in the network or that no source reaches or that never reaches the sink, a
            router of unknown kind or without class successors, a fork with fewer than two
            branches, a join that does not match its fork, a cycle, no source, an agent with
            a bad setting (as in :meth:`add_agent`), that serves no class or whose priority
            does not list exactly its classes.
        """
        for v, d in self.nodes(data=True):
            kind = d.get("kind")
            if kind not in KINDS:
                raise ValueError(f"node {v!r}: referenced by an edge but never added "
                                 f"(kind={kind!r}, must be one of {KINDS})")
            out, inn = self.out_degree(v), self.in_degree(v)
            if kind == "sink" and out:
                raise ValueError(f"node {v!r}: the sink has no successors")
            if kind in ("class", "source", "join") and out != 1:
                raise ValueError(f"node {v!r}: a {kind} needs exactly one successor, has {out}")
            if kind == "source":
                check_positive(f"source {v!r}: rate", d["rate"])
                if inn:
                    raise ValueError(f"node {v!r}: a source has no predecessors")
            if kind == "class" and d["agent"] not in self.agents:
                raise ValueError(f"class {v!r}: agent={d['agent']!r} is not in the network "
                                 f"(agents: {sorted(self.agents)})")
            if kind == "router":
                if d.get("router") not in ROUTERS:
                    raise ValueError(f"router {v!r}: router={d.get('router')!r} must be one of "
                                     f"{ROUTERS}")
                if out < 1 or any(self.nodes[w].get("kind") != "class"
                                  for w in self.successors(v)):
                    raise ValueError(f"router {v!r}: needs one or more class successors")
            if kind == "fork" and out < 2:
                raise ValueError(f"fork {v!r}: needs at least two branches, has {out}")
            if kind == "join":
                self._check_join(v, d)
        if not nx.is_directed_acyclic_graph(self):
            cycle = nx.find_cycle(self)
            raise ValueError(f"routes must not loop: cycle {cycle}")
        sources = self.nodes_of("source")
        if not sources:
            raise ValueError("the network has no source: add one with add_source or add_route")
        reached = set().union(*(nx.descendants(self, s) for s in sources))
        for k in self.nodes_of("class"):
            if k not in reached:
                raise ValueError(f"class {k!r}: no source reaches it, so its rate is 0 "
                                 "(every class needs a positive rate)")
            if not nx.has_path(self, k, SINK):
                raise ValueError(f"class {k!r}: its route never reaches the sink")
        for name, a in self.agents.items():
            self._check_agent(a)
            mine = self.classes_at(name)
            if not mine:
                raise ValueError(f"agent {name!r}: serves no class")
            if a.priority is not None and sorted(map(str, a.priority)) != sorted(map(str, mine)):
                raise ValueError(f"agent {name!r}: priority={list(a.priority)} must list "
                                 f"exactly its classes {mine}")
        return self

    def _check_join(self, v, d) -> None:
        fork = d.get("fork")
        if fork not in self or self.nodes[fork].get("kind") != "fork":
            raise ValueError(f"join {v!r}: fork={fork!r} is not a fork node")
        branches = list(self.successors(fork))
        if self.in_degree(v) != len(branches):
            raise ValueError(f"join {v!r}: has {self.in_degree(v)} inputs but fork {fork!r} "
                             f"has {len(branches)} branches")
        for b in branches:
            if not nx.has_path(self, b, v):
                raise ValueError(f"join {v!r}: branch {b!r} of fork {fork!r} never reaches it")
