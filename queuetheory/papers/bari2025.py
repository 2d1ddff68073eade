"""Bari, Hegde, de Veciana's instances: the package's illustrative tiled time model (Eq. 7),
the small exact pmf the theory runs use, RAD's optimal work price and the random routing of
Theorem 2.

The paper gives no μ values, so the tiled model's parameters are the package's (a
Mistral-like shape, efficiency 1 at the tile ``(128, 256, 32)``). The ledger
(:mod:`queuetheory.claims.bari2025`) checks the paper's statements on these; the Table 1
workload of the SLAI experiments is :func:`queuetheory.workload.rad.table1_workload`.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ..bounds.rad_capacity import _decode_attention_sum, _rad_prefill_total, rad_capacity
from ..networks import simulate_fleet
from ..timing import GPUModel, ModelDims, TiledGPUTime
from ..workload import RequestClass, Workload

__all__ = ["PROMPTS", "MAX_DECODE", "MEMORY", "tiled_model", "theory_pmf", "theory_capacity",
           "theory_workload", "work_rate", "routed_work"]

PROMPTS = (256, 512, 1024, 2048)
"""The prompt lengths of the theory runs' pmf (each equally likely)."""
MAX_DECODE = 128
"""The theory runs' decode lengths are uniform on ``1 … MAX_DECODE``."""
MEMORY = 200_000
"""The KV pool of the SLAI experiments (tokens)."""


@cache
def tiled_model(tile=(128, 256, 32), c0=0.0) -> TiledGPUTime:
    """The illustrative Eq. 7 model: a Mistral-like shape, efficiency 1 at ``tile``, ``c0``
    seconds of fixed cost per batch (``c0 = 0.005`` is the SLAI experiments' calibration).

    Parameters
    ----------
    tile : tuple of int, default (128, 256, 32)
        The optimal tile ``(t_row, t_col, t_red)``.
    c0 : float, default 0.0
        The fixed cost per batch, in seconds.

    Returns
    -------
    TiledGPUTime
        The batch-time model (cached: the same object for the same arguments).
    """
    eff = {tuple(tile): 1.0}
    return TiledGPUTime(ModelDims.mistral_like(), GPUModel.from_efficiency(efficiency=eff,
                                                                           c0=c0))


def theory_pmf():
    """The theory runs' exact length pmf: every prompt of :data:`PROMPTS` with every decode
    length ``1 … MAX_DECODE``, equally likely.

    Returns
    -------
    prompt, decode, weight : numpy.ndarray
        The support and its probabilities.
    """
    p, d = np.meshgrid(np.array(PROMPTS), np.arange(1, MAX_DECODE + 1), indexing="ij")
    return p.ravel(), d.ravel(), np.full(p.size, 1.0 / p.size)


@cache
def theory_capacity():
    """RAD's capacity (Eqs. 12–13) for :func:`theory_pmf` on :func:`tiled_model`.

    Returns
    -------
    RadCapacity
        :func:`~queuetheory.bounds.rad_capacity` of the pmf (``lambda_star`` a node).
    """
    p, d, w = theory_pmf()
    return rad_capacity(p, d, tiled_model(), weights=w)


def theory_workload(rate):
    """Poisson arrivals at ``rate`` with :func:`theory_pmf`'s lengths (output ``d + 1``: the
    stop token counted, the convention of :mod:`queuetheory.policies.rad`).

    Parameters
    ----------
    rate : float
        Requests per second.

    Returns
    -------
    Workload
        One class drawing ``(p, d + 1)`` pairs from the theory pmf, at ``rate``.
    """
    p, d, _ = theory_pmf()
    return Workload([RequestClass.from_samples(p, d + 1, rate)])


def work_rate(res) -> float:
    """Optimal work done per second: every processed token priced at RAD's optimal cost
    (prefilled tokens as RAD's ``t_lcm`` chunks, decode iterations as ``t*_col``-wide
    batches), partial requests included, divided by the run length. 1 means λ* is reached.

    Parameters
    ----------
    res : Result
        A run on :func:`tiled_model`.

    Returns
    -------
    float
        The priced work over the run's length.
    """
    return _priced_work(res.requests) / res.end_time


def _priced_work(req):
    """The optimal work of the requests' rows ``req`` (``prompt``, ``prefilled``,
    ``decoded``), summed in row order: :func:`work_rate` before its division."""
    tm = tiled_model()
    p = req["prefilled"].to_numpy()
    k = np.maximum(req["decoded"].to_numpy() - 1, 0)
    prompt = req["prompt"].to_numpy()
    work = _rad_prefill_total(tm, p) + k * (tm.inv_mu_lin / tm.tile[1] + tm.gpu.inv_mu_nlin)
    work = work + np.where(k > 0, _decode_attention_sum(tm, prompt, prompt + k), 0.0)
    return float(work.sum())


def routed_work(make_policy, rho: float, n: int, r: int = 2, seed: int = 3) -> list[float]:
    """Optimal work done per second (1 = λ*) of every node behind uniform random routing to
    ``r`` nodes at ``λ = ρ r λ*``, ``n`` requests a node (Theorem 2's work leg).

    The nodes are the one random-router fleet,
    :func:`~queuetheory.networks.simulate_fleet` (``router="random"``, ``first_token=
    "prefill"``, no batch started after the last arrival); each node's work is divided by
    its run's length: to that last arrival, or to the end of its last batch when later.

    Parameters
    ----------
    make_policy : callable
        ``make_policy()`` builds the scheduler that every node runs a copy of.
    rho : float
        The load ``λ / (r λ*)``.
    n : int
        Requests a node.
    r : int, default 2
        Nodes.
    seed : int, default 3
        Seeds the sample, the router and the nodes (an integer in ``[0, 2**32)``).

    Returns
    -------
    list of float
        :func:`work_rate` of each node.
    """
    tr = theory_workload(rho * r * theory_capacity().lambda_star).sample(n_requests=r * n,
                                                                        seed=seed)
    horizon = float(tr.arrival[-1])
    # the router draws the routes this leg always drew, from SeedSequence([seed, 2]): an
    # integer seed's 32-bit words are its entropy, so seed + 2·2³² is that sequence
    fleet = simulate_fleet(tr, make_policy(), tiled_model(), r, router="random",
                           horizon=horizon, seed=seed + (2 << 32))
    req, b = fleet.requests, fleet.batches
    end = (b["start"] + b["duration"]).groupby(b["engine"]).max()
    return [_priced_work(req[req["engine"] == k]) / max(horizon, float(end.get(k, horizon)))
            for k in range(r)]
