"""The networks of Li, Dai, Peng §4 with the paper's parameters as defaults.

Every builder takes ``token_budget`` (b = 768), ``time_model`` (one slot per batch,
:class:`~queuetheory.UnitTime`) and ``lengths`` (``"poisson"``: Poisson lengths with the given
means, clipped to ≥ 1 as the paper's §4.3 sizes; ``"fixed"``: the means themselves).
Rates follow from the target load ``rho`` through each agent's capacity ``b / t_b``.
"""

from __future__ import annotations

from functools import lru_cache

from scipy import stats

from ..errors import check_positive
from ..timing import UnitTime
from .graph import ROUTERS, AgentNetwork, mean_tokens

__all__ = ["parallel", "two_type_engine", "fork_join", "rybko_stolyar", "length_law"]

SHORT = (32, 32)          # (m_p, m_d) of the short tasks, Li, Dai, Peng (4.4)-(4.5)
LONG = (512, 32)          # the long tasks
FORK_JOIN = ((128, 32), (256, 64), (64, 128), (512, 32))   # spec §4.3 (the paper gives none)


@lru_cache(maxsize=256)
def _poisson(mean):
    return stats.poisson(mean)


def length_law(mean, lengths: str = "poisson"):
    """A length law with the given mean: ``poisson`` (frozen scipy; the same object for the
    same mean, so its quadrature mean is computed once) or ``fixed`` (int).

    Parameters
    ----------
    mean : float
        The mean length, in tokens (> 0; an integer for ``fixed``).
    lengths : {"poisson", "fixed"}, default "poisson"
        The law's kind.

    Returns
    -------
    scipy.stats distribution or int
        The frozen Poisson law, or the fixed length.

    Raises
    ------
    ValueError
        If ``mean`` is not positive (not a positive integer for ``fixed``), or ``lengths``
        is neither kind.
    """
    if lengths == "poisson":
        check_positive("mean length", mean)
        return _poisson(float(mean))
    if lengths == "fixed":
        check_positive("mean length", mean, integer=True)
        return int(mean)
    raise ValueError(f"lengths={lengths!r}: must be 'poisson' or 'fixed'")


def _slot(time_model):
    return 1.0 if isinstance(time_model, UnitTime) else time_model.slot


def _check_rho(rho):
    check_positive("rho", rho)
    return float(rho)


def parallel(K: int = 4, router: str = "random", *, rho: float = 0.9, sizes=SHORT,
             token_budget: int = 768, time_model=None, policy=None,
             lengths: str = "poisson") -> AgentNetwork:
    """K identical engines behind a load balancer (Li, Dai, Peng §4.1, Prop. 1).

    The arrival rate is ``λ = rho · K b/t_b / (m_p + m_d)``, so ``rho`` is the load of
    condition (4.1). ``router``: ``random``, ``round_robin``, ``least_requests`` or
    ``least_tokens`` (spec §4.1; ties go to the lowest index; counts include the requests
    and tokens of running batches). Every engine runs ``policy`` (default Sarathi).

    Parameters
    ----------
    K : int, default 4
        The number of engines.
    router : str, default "random"
        One of ``ROUTERS``.
    rho : float, default 0.9
        The load of condition (4.1), > 0.
    sizes : tuple of float, default SHORT
        ``(m_p, m_d)``, the mean prompt and output tokens (the short tasks, (32, 32)).
    token_budget : int, default 768
        ``b``, every agent's token budget (the paper's).
    time_model : TimeModel, optional
        Every agent's batch-time model; default :class:`~queuetheory.UnitTime` (one slot per
        batch, the paper's).
    policy : Policy, optional
        Every engine's scheduler (copied); default FCFS Sarathi.
    lengths : {"poisson", "fixed"}, default "poisson"
        Poisson lengths with the given means (clipped to ≥ 1), or the means themselves
        (:func:`length_law`).

    Returns
    -------
    AgentNetwork
        The network; ``net.graph["rho"]`` records ``rho``.

    Raises
    ------
    ValueError
        If ``K`` is not a positive integer, ``router`` is not one of ``ROUTERS``, ``rho`` is
        not positive, a mean length or the lengths' kind is bad (:func:`length_law`), or an
        agent's setting is refused (:meth:`AgentNetwork.add_agent`).
    """
    check_positive("K", K, integer=True)
    if router not in ROUTERS:
        raise ValueError(f"router={router!r}: must be one of {ROUTERS}")
    rho = _check_rho(rho)
    tm = time_model or UnitTime()
    net = AgentNetwork(slot=_slot(tm), name=f"parallel(K={K}, {router})")
    classes = []
    for k in range(1, K + 1):
        net.add_agent(f"E{k}", tm, token_budget, policy=policy)
        net.add_class(f"c{k}", f"E{k}", length_law(sizes[0], lengths),
                      length_law(sizes[1], lengths))
        classes.append(f"c{k}")
    net.add_router("router", classes, router=router)
    cap = net.agents["E1"].capacity
    net.add_source("src", rho * K * cap / _mean_tokens(net, "c1"), "router")
    net.graph["rho"] = rho
    return net


def two_type_engine(priority=None, *, rho: float = 0.9, sizes=(SHORT, LONG),
                    token_budget: int = 768, time_model=None,
                    lengths: str = "poisson") -> AgentNetwork:
    """One engine serving two request types at equal rates (Li, Dai, Peng §4.2).

    The types are ``short`` and ``long`` with mean sizes ``sizes`` (the Rybko–Stolyar tasks by
    default, spec §4.2); ``priority``: ``("short", "long")``, ``("long", "short")`` (static
    priority, most important first) or ``None`` (type-blind Sarathi FCFS). ``rho`` is the load
    of condition (4.2).

    Parameters
    ----------
    priority : tuple of str, optional
        ``("short", "long")`` or ``("long", "short")``, most important first; ``None``:
        type-blind FCFS Sarathi.
    rho : float, default 0.9
        The load of condition (4.2), > 0.
    sizes : tuple of tuple, default (SHORT, LONG)
        ``(m_p, m_d)`` of the short and of the long type ((32, 32) and (512, 32)).
    token_budget : int, default 768
        ``b``, every agent's token budget (the paper's).
    time_model : TimeModel, optional
        Every agent's batch-time model; default :class:`~queuetheory.UnitTime` (one slot per
        batch, the paper's).
    lengths : {"poisson", "fixed"}, default "poisson"
        Poisson lengths with the given means (clipped to ≥ 1), or the means themselves
        (:func:`length_law`).

    Returns
    -------
    AgentNetwork
        The network; ``net.graph["rho"]`` records ``rho``.

    Raises
    ------
    ValueError
        If ``rho`` is not positive, a mean length or the lengths' kind is bad
        (:func:`length_law`), or the agent's setting is refused
        (:meth:`AgentNetwork.add_agent`).
    """
    rho = _check_rho(rho)
    tm = time_model or UnitTime()
    net = AgentNetwork(slot=_slot(tm), name=f"two types, priority={priority}")
    net.add_agent("E", tm, token_budget, priority=priority)
    for name, (mp, md) in zip(("short", "long"), sizes, strict=True):
        net.add_class(name, "E", length_law(mp, lengths), length_law(md, lengths))
    w = _mean_tokens(net, "short") + _mean_tokens(net, "long")
    lam = rho * net.agents["E"].capacity / w
    net.add_source("src:short", lam, "short")
    net.add_source("src:long", lam, "long")
    net.graph["rho"] = rho
    return net


def fork_join(rho: float = 0.9, *, sizes=FORK_JOIN, token_budget: int = 768, time_model=None,
              policy=None, lengths: str = "poisson") -> AgentNetwork:
    """Agent 0, then a fork to agents 1 and 2, a join, then agent 3 (Li, Dai, Peng §4.3).

    The paper gives no parameters; the defaults are spec §4.3's. ``λ`` is set so that the
    most loaded agent has load ``rho`` (Conjecture 1's condition (4.3) is ``max_j ρ_j < 1``).

    Parameters
    ----------
    rho : float, default 0.9
        The load of the most loaded agent, > 0.
    sizes : tuple of tuple, default FORK_JOIN
        ``(m_p, m_d)`` of the classes at agents 0, 1, 2 and 3.
    token_budget : int, default 768
        ``b``, every agent's token budget (the paper's).
    time_model : TimeModel, optional
        Every agent's batch-time model; default :class:`~queuetheory.UnitTime` (one slot per
        batch, the paper's).
    policy : Policy, optional
        Every agent's scheduler (copied); default FCFS Sarathi.
    lengths : {"poisson", "fixed"}, default "poisson"
        Poisson lengths with the given means (clipped to ≥ 1), or the means themselves
        (:func:`length_law`).

    Returns
    -------
    AgentNetwork
        The network; ``net.graph["rho"]`` records ``rho``.

    Raises
    ------
    ValueError
        If ``rho`` is not positive, a mean length or the lengths' kind is bad
        (:func:`length_law`), or an agent's setting is refused
        (:meth:`AgentNetwork.add_agent`).
    """
    rho = _check_rho(rho)
    tm = time_model or UnitTime()
    net = AgentNetwork(slot=_slot(tm), name="fork-join")
    for j in range(4):
        net.add_agent(f"agent{j}", tm, token_budget, policy=policy)
    net.add_class("c0", "agent0", *(length_law(m, lengths) for m in sizes[0]), to="fork")
    net.add_fork("fork", ["c1", "c2"])
    net.add_class("c1", "agent1", *(length_law(m, lengths) for m in sizes[1]), to="join")
    net.add_class("c2", "agent2", *(length_law(m, lengths) for m in sizes[2]), to="join")
    net.add_join("join", "fork", to="c3")
    net.add_class("c3", "agent3", *(length_law(m, lengths) for m in sizes[3]))
    worst = max(_mean_tokens(net, f"c{j}") / net.agents[f"agent{j}"].capacity for j in range(4))
    net.add_source("src", rho / worst, "c0")
    net.graph["rho"] = rho
    return net


def rybko_stolyar(priority: str = "up", rho: float = 0.9, *, short=SHORT, long=LONG,
                  token_budget: int = 768, time_model=None,
                  lengths: str = "poisson") -> AgentNetwork:
    """The Rybko–Stolyar network of LLM agents (Li, Dai, Peng, Figs. 7–8).

    Type A: a short task at ``agent1`` (class ``A1``), then a long one at ``agent2``
    (``A2``). Type B: short at ``agent2`` (``B1``), long at ``agent1`` (``B2``). Equal Poisson
    rates ``λ = rho · b/t_b / (short + long tokens)``, so both agents have load ``rho``.
    ``priority="up"``: each agent favours the *exiting* long tasks (``B2`` at agent 1, ``A2``
    at agent 2), the paper's unstable policy; ``"down"`` reverses it. Within a class
    decode-priority FCFS; classes mix only when the favoured one cannot fill the batch.

    Parameters
    ----------
    priority : {"up", "down"}, default "up"
        ``"up"``: each agent favours the exiting long tasks (unstable); ``"down"``: the
        entering short ones.
    rho : float, default 0.9
        Each agent's load, > 0.
    short : tuple of float, default SHORT
        ``(m_p, m_d)`` of the short tasks, (32, 32).
    long : tuple of float, default LONG
        ``(m_p, m_d)`` of the long tasks, (512, 32).
    token_budget : int, default 768
        ``b``, every agent's token budget (the paper's).
    time_model : TimeModel, optional
        Every agent's batch-time model; default :class:`~queuetheory.UnitTime` (one slot per
        batch, the paper's).
    lengths : {"poisson", "fixed"}, default "poisson"
        Poisson lengths with the given means (clipped to ≥ 1), or the means themselves
        (:func:`length_law`).

    Returns
    -------
    AgentNetwork
        The network; ``net.graph["rho"]`` records ``rho``.

    Raises
    ------
    ValueError
        If ``priority`` is neither value, ``rho`` is not positive, a mean length or the
        lengths' kind is bad (:func:`length_law`), or an agent's setting is refused
        (:meth:`AgentNetwork.add_agent`).
    """
    if priority not in ("up", "down"):
        raise ValueError(f"priority={priority!r}: must be 'up' or 'down'")
    rho = _check_rho(rho)
    tm = time_model or UnitTime()
    net = AgentNetwork(slot=_slot(tm), name=f"Rybko-Stolyar ({priority})")
    order = {"up": (("B2", "A1"), ("A2", "B1")), "down": (("A1", "B2"), ("B1", "A2"))}[priority]
    net.add_agent("agent1", tm, token_budget, priority=order[0])
    net.add_agent("agent2", tm, token_budget, priority=order[1])
    s = [length_law(m, lengths) for m in short]
    g = [length_law(m, lengths) for m in long]
    net.add_route("A", 1.0, [("agent1", *s), ("agent2", *g)])
    net.add_route("B", 1.0, [("agent2", *s), ("agent1", *g)])
    lam = rho * net.agents["agent1"].capacity / (_mean_tokens(net, "A1") + _mean_tokens(net, "A2"))
    net.nodes["src:A"]["rate"] = lam
    net.nodes["src:B"]["rate"] = lam
    net.graph["rho"] = rho
    return net


def _mean_tokens(net, k) -> float:
    return sum(mean_tokens(net.nodes[k]["lengths"]))
