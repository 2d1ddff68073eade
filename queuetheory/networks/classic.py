"""The classical exponential Rybko–Stolyar / Lu–Kumar network: the non-LLM reference.

Two single-server stations, four classes (Rybko & Stolyar 1992; Dai & Harrison 2020 §8):
type A visits class 1 at station 1 then class 2 at station 2; type B visits class 3 at
station 2 then class 4 at station 1. Poisson(λ) arrivals per type, exponential services with
means ``m_1 … m_4``, preemptive static priorities. ``"up"`` favours the exiting classes
(4 at station 1, 2 at station 2) and is unstable when the virtual station is overloaded,
``λ (m_2 + m_4) > 1``, even with both station loads ``λ(m_1+m_4)``, ``λ(m_2+m_3)`` below 1;
``"down"`` favours the entering classes.

The chain is simulated exactly, jump by jump (Gillespie), with all random numbers drawn up
front.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import check_positive
from ..stability import path_growth_rate
from .traffic import virtual_pairs

__all__ = ["ClassicRybkoStolyar", "ClassicResult", "rybko_stolyar_classic"]

STATION = (0, 1, 1, 0)            # class k (0-based) is served at this station
PRED = (None, 0, None, 2)         # class 2 is fed by class 1, class 4 by class 3
PRIORITY = {"up": (3, 0, 1, 2), "down": (0, 3, 2, 1)}   # per station: most important first


@dataclass(frozen=True)
class ClassicRybkoStolyar:
    """Arrival rate ``lam`` per type, mean service times ``means = (m_1, m_2, m_3, m_4)``.

    Attributes
    ----------
    lam : float
        ``λ``, the Poisson arrival rate of each type (> 0).
    means : tuple of float
        ``(m_1, m_2, m_3, m_4)``, the mean exponential service time of each class (> 0).
    priority : {"up", "down"}, default "up"
        ``"up"`` favours the exiting classes (4 at station 1, 2 at station 2); ``"down"``
        the entering ones.

    Raises
    ------
    ValueError
        On construction, if ``lam`` or a mean is not positive, ``means`` does not hold four
        values, or ``priority`` is neither value.
    """

    lam: float
    means: tuple
    priority: str = "up"

    def __post_init__(self):
        check_positive("lam", self.lam)
        if len(self.means) != 4:
            raise ValueError(f"means={self.means!r}: need four mean service times")
        for k, m in enumerate(self.means, 1):
            check_positive(f"means[{k}]", m)
        if self.priority not in PRIORITY:
            raise ValueError(f"priority={self.priority!r}: must be 'up' or 'down'")

    def ranks(self) -> tuple:
        """Rank of each class at its station (0 = most important).

        Returns
        -------
        tuple of int
            One rank per class, classes 1 to 4.
        """
        order = PRIORITY[self.priority]
        return tuple([c for c in order if STATION[c] == STATION[k]].index(k) for k in range(4))

    def stability_report(self) -> pd.DataFrame:
        """Station loads and the virtual-station loads of the chosen priorities.

        Returns
        -------
        pandas.DataFrame
            Indexed by condition (``"rho[station1] < 1"``, ``"virtual[2+4] < 1"``, ...):
            ``kind`` (``agent`` or ``virtual``), ``load`` and ``holds``.
        """
        load = [self.lam * m for m in self.means]
        rows = [{"condition": f"rho[station{s + 1}] < 1", "kind": "agent",
                 "load": sum(load[k] for k in range(4) if STATION[k] == s)} for s in (0, 1)]
        for k, m, v in virtual_pairs(STATION, self.ranks(), PRED, load):
            rows.append({"condition": f"virtual[{k + 1}+{m + 1}] < 1", "kind": "virtual",
                         "load": v})
        df = pd.DataFrame(rows).set_index("condition")
        df["holds"] = df["load"] < 1
        return df


@dataclass(frozen=True)
class ClassicResult:
    """Jump times and the class counts ``x`` (one column per class) just after each jump.

    Attributes
    ----------
    time : numpy.ndarray
        The jump times, 0 first.
    counts : numpy.ndarray
        The class counts just after each jump, one row per jump, one column per class.
    horizon : float
        The run's end.
    lam : float
        ``λ``, the arrival rate per type.
    """

    time: np.ndarray
    counts: np.ndarray
    horizon: float
    lam: float

    def growth_rate(self, **kwargs):
        """Block-means slope of the total number in system, relative to the arrival rate 2λ."""
        return path_growth_rate(self.time, self.counts.sum(axis=1), end=self.horizon,
                                offered=2 * self.lam, quantity="in_system", **kwargs)

    def mean_counts(self, warmup: float = 0.0) -> np.ndarray:
        """Time-average number of each class over ``[warmup, horizon]``."""
        t = np.append(self.time, self.horizon)
        dt = np.diff(np.clip(t, warmup, self.horizon))
        return (self.counts * dt[:, None]).sum(axis=0) / (self.horizon - warmup)


def simulate_classic(model: ClassicRybkoStolyar, horizon: float, seed=0) -> ClassicResult:
    """Exact simulation of the continuous-time Markov chain from empty until ``horizon``.

    Parameters
    ----------
    model : ClassicRybkoStolyar
        The network.
    horizon : float
        The run's end, in the unit of the mean service times (> 0).
    seed : int or numpy.random.SeedSequence, default 0
        The seed of the chain's random numbers.

    Returns
    -------
    ClassicResult
        The jump times and the class counts.

    Raises
    ------
    ValueError
        If ``horizon`` is not a positive number.
    """
    check_positive("horizon", horizon)
    rng = np.random.default_rng(seed)
    mu = 1.0 / np.asarray(model.means, dtype=float)
    order = PRIORITY[model.priority]
    tops = [[c for c in order if STATION[c] == s] for s in (0, 1)]
    nxt = (1, None, 3, None)
    cap = int(4 * (2 * model.lam + mu.max()) * horizon) + 1000
    expo, unif = rng.exponential(size=cap), rng.random(cap)
    x = [0, 0, 0, 0]
    t, i = 0.0, 0
    times, rows = [0.0], [tuple(x)]
    while True:
        serving = [next((c for c in top if x[c]), None) for top in tops]
        rates = [model.lam, model.lam] + [mu[c] if c is not None else 0.0 for c in serving]
        total = sum(rates)
        if i == cap:
            expo, unif, i = rng.exponential(size=cap), rng.random(cap), 0
        t += expo[i] / total
        if t >= horizon:
            break
        u = unif[i] * total
        i += 1
        if u < rates[0]:
            x[0] += 1
        elif u < rates[0] + rates[1]:
            x[2] += 1
        else:
            c = serving[0] if u < rates[0] + rates[1] + rates[2] else serving[1]
            x[c] -= 1
            if nxt[c] is not None:
                x[nxt[c]] += 1
        times.append(t)
        rows.append(tuple(x))
    return ClassicResult(np.asarray(times), np.asarray(rows, dtype=np.int64), float(horizon),
                         model.lam)


def rybko_stolyar_classic(priority: str = "up", lam: float = 1.0,
                          means=(0.1, 0.6, 0.1, 0.6)) -> ClassicRybkoStolyar:
    """The classical network; the defaults have station loads 0.7 and virtual load 1.2.

    Parameters
    ----------
    priority : {"up", "down"}, default "up"
        The static priorities (see :class:`ClassicRybkoStolyar`).
    lam : float, default 1.0
        ``λ``, the arrival rate per type.
    means : sequence of float, default (0.1, 0.6, 0.1, 0.6)
        ``(m_1, m_2, m_3, m_4)``, the mean service times.

    Returns
    -------
    ClassicRybkoStolyar
        The network.

    Raises
    ------
    ValueError
        If an argument breaks a rule of :class:`ClassicRybkoStolyar`.
    """
    return ClassicRybkoStolyar(lam, tuple(float(m) for m in means), priority)
