"""Lyapunov functions of Li, Dai, Peng and the exact one-step drift of a state under a policy.

Two functions of the DTMC state ``x = (R, {(p'_i, d'_i)})`` (spec §3.2–§3.3):

* :class:`LinearLyapunov` (the proof sketch of Theorem 1, §2.3):
  ``f(x) = Σ_i (p'_i + d'_i) + R·b/t_b``. Its drift is ``λ(m_p+m_d) − b/t_b`` per slot only
  after *full* batches; a partial batch of ``b'`` tokens gives
  ``λ(m_p+m_d) − b' + (t_{b'} − 1)·b/t_b``, positive for large states with few requests, so
  it is no Foster–Lyapunov function on its own.
* :class:`QuadraticLyapunov` (App. B, the proof of Theorem 1(a), unit-time batches):
  ``f(x) = Σ_i (p'_i + d'_i + ε·(1(p'_i>0) + d'_i)²/(4Lλ))`` with ``ε' = b − λ(m_p+m_d)``,
  ``ε = min(ε', Lλ)`` and ``B = 2b(4Lλb/ε)² + b``. The paper bounds the arrivals' quadratic
  term with ``E[(d+1)²] ≤ 2E[d²] ≤ 2L`` (App. B, just before (B.1)), false for
  ``d ∈ {1, 2}``; the corrected constant is ``L = max(E[d²], E[(d+1)²]/2)`` (spec §6 item 2,
  :func:`appendix_b_constant`).

Both are sums over requests, and arrivals join after service (the system dynamics of §2.2),
so the expected next value is ``f(post-decision state) + E[a]·E[h(v_p, v_d)]`` (Wald's
identity): the drift is *exact* once ``E[h]`` is, which :func:`one_step_drift` computes by
enumerating the length laws' finite supports (``method="exact"``) or estimates with a
standard error (``method="mc"``). :func:`drift_certificate` searches sampled and adversarial
states with ``f(x) ≥ B`` for the worst drift, to test (B.1): drift ``≤ −ε/2`` beyond the
finite set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..engine.batch import check_batch
from ..errors import UnstableError, check_positive, renamed_keywords
from ..timing import TimeModel, UnitTime
from ..workload import RequestClass, Workload
from .work_conserving import dtmc_state

__all__ = ["length_pmf", "appendix_b_constant", "LinearLyapunov", "QuadraticLyapunov",
           "Drift", "one_step_drift", "DriftCertificate", "drift_certificate",
           "certificate_states"]

_MAX_SUPPORT = 1 << 20


# ---- length laws -------------------------------------------------------------------------------
def length_pmf(law, name: str = "length") -> tuple[np.ndarray, np.ndarray]:
    """``(values, probabilities)`` of a token-length law with finite support.

    ``law``: an int (point mass), a dict ``{value: probability}``, an array of samples, or a
    frozen ``scipy.stats`` distribution (rounded to integers and clipped to ``≥ 1`` as the
    workload does). Raises ``ValueError`` naming ``name`` when the support is unbounded.

    Parameters
    ----------
    law : int, dict, array_like or scipy.stats frozen distribution
        The token-length law, as above.
    name : str, default "length"
        The argument's name, for error messages.

    Returns
    -------
    values : numpy.ndarray of int
        The support, sorted, each value ``>= 1``.
    probabilities : numpy.ndarray of float
        ``P(length = value)``, positive, summing to 1.

    Raises
    ------
    ValueError
        If ``law`` is a bool or of no accepted kind, a length or sample is below 1, a dict's
        probabilities do not sum to 1, or a distribution's support is unbounded or larger than
        2²⁰ values.
    """
    if isinstance(law, bool):
        raise ValueError(f"{name}={law!r}: not a length law")
    if isinstance(law, int | np.integer):
        if law < 1:
            raise ValueError(f"{name}={law}: a length must be >= 1")
        return np.array([int(law)]), np.array([1.0])
    if isinstance(law, dict):
        v = np.array(list(law), dtype=np.int64)
        p = np.array(list(law.values()), dtype=float)
        if v.size == 0 or v.min() < 1 or p.min() < 0 or not math.isclose(p.sum(), 1.0):
            raise ValueError(f"{name}={law!r}: need values >= 1 and probabilities summing to 1")
        return _collect(v, p)
    if hasattr(law, "dist") and hasattr(law, "support"):
        lo, hi = (float(x) for x in law.support())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"{name}={law.dist.name}{law.args}: unbounded support [{lo}, {hi}]; "
                             "exact drift needs a finite support (truncate it, or use "
                             "method='mc')")
        if hi - lo > _MAX_SUPPORT:
            raise ValueError(f"{name}: support of size {hi - lo:.0f} is too large to enumerate")
        from scipy import stats  # the law is one of its frozen distributions

        if isinstance(law.dist, stats.rv_discrete):
            v = np.arange(int(lo), int(hi) + 1)
            p = law.pmf(v)
        else:
            v = np.arange(int(np.rint(lo)), int(np.rint(hi)) + 1)
            p = law.cdf(v + 0.5) - law.cdf(v - 0.5)
        return _collect(np.maximum(v, 1), p / p.sum())
    arr = np.asarray(law)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name}={law!r}: expected an int, a dict, samples or a distribution")
    v = np.rint(arr).astype(np.int64)
    if v.min() < 1:
        raise ValueError(f"{name}: samples must be >= 1")
    return _collect(v, np.full(v.size, 1.0 / v.size))


def _collect(v, p):
    values, inverse = np.unique(v, return_inverse=True)
    probs = np.bincount(inverse, weights=p, minlength=values.size)
    keep = probs > 0
    return values[keep].astype(np.int64), probs[keep]


def _classes(workload) -> tuple[RequestClass, ...]:
    if isinstance(workload, Workload):
        return workload.classes
    if isinstance(workload, RequestClass):
        return (workload,)
    raise ValueError(f"workload={workload!r}: must be a Workload or a RequestClass")


def _arrival_rate(workload) -> float:
    if isinstance(workload, RequestClass):
        return float(workload.rate)
    return workload.total_rate * workload.slot


def appendix_b_constant(output, *, printed: bool = False) -> float:
    """The constant ``L`` of App. B for the decode-length law ``output``.

    Corrected (default): ``L = max(E[d²], E[(d+1)²]/2)``, so that ``E[(d+1)²] ≤ 2L`` holds
    and every step of the proof goes through (spec §3.3). ``printed=True`` gives the
    paper's implicit ``L = E[d²]`` (App. B), which relies on the false ``E[(d+1)²] ≤ 2E[d²]``.
    ``output``: a length law, or a Workload / RequestClass (its rate-weighted mixture).

    Parameters
    ----------
    output : int, dict, array_like, scipy.stats frozen distribution, Workload or RequestClass
        The decode-length law ``d`` (finite support), as :func:`length_pmf` takes it, or a
        workload whose classes' output laws are mixed by rate.
    printed : bool, default False
        The paper's ``L = E[d²]`` instead of the corrected constant.

    Returns
    -------
    float
        ``L``, in tokens².

    Raises
    ------
    ValueError
        If a length law is malformed or has unbounded support (see :func:`length_pmf`).
    """
    v, p = _output_mixture(output)
    second = float(np.dot(p, v.astype(float) ** 2))
    if printed:
        return second
    return max(second, float(np.dot(p, (v + 1.0) ** 2)) / 2)


def _output_mixture(law):
    if isinstance(law, Workload | RequestClass):
        classes = _classes(law)
        rates = np.array([c.rate for c in classes], dtype=float)
        parts = [length_pmf(c.output, "output") for c in classes]
        return _collect(np.concatenate([v for v, _ in parts]),
                        np.concatenate([r / rates.sum() * p for r, (_, p) in
                                        zip(rates, parts, strict=True)]))
    return length_pmf(law, "output")


# ---- Lyapunov functions -------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearLyapunov:
    """``f(x) = Σ_i (p'_i + d'_i) + R·b/t_b`` (Li, Dai, Peng); ``t_b`` in slots.

    Attributes
    ----------
    b : int
        ``b``: the token budget per batch.
    t_b : float
        ``t_b``: the time of a full batch of ``b`` tokens, in slots.
    """

    b: int
    t_b: float

    def per_request(self, p, d) -> np.ndarray:
        """``h(p'_i, d'_i) = p'_i + d'_i``: each request's term of ``f``.

        Parameters
        ----------
        p : array_like of int
            ``p'_i``: the prompt tokens each request still has to prefill (0 once prefilled).
        d : array_like of int
            ``d'_i``: the output tokens each request still has to decode.

        Returns
        -------
        numpy.ndarray
            ``p'_i + d'_i`` per request, in tokens.
        """
        return np.asarray(p, dtype=float) + np.asarray(d, dtype=float)

    def __call__(self, p, d, R: float = 0) -> float:
        return float(self.per_request(p, d).sum()) + R * self.b / self.t_b

    def service_change(self, p, d, chunk, decode) -> np.ndarray:
        """``h(post) − h(pre)`` per request: minus the tokens the batch serves.

        Parameters
        ----------
        p : array_like of int
            ``p'_i``: the prompt tokens each request still has to prefill (unused: the change is
            linear).
        d : array_like of int
            ``d'_i``: the output tokens each request still has to decode (unused).
        chunk : numpy.ndarray of int
            The prompt tokens the batch prefills for each request.
        decode : numpy.ndarray of int
            1 where the batch decodes the request, else 0.

        Returns
        -------
        numpy.ndarray
            ``−(chunk + decode)`` per request.
        """
        return -(chunk + decode).astype(float)

    def arrival_value(self, prompt_values, output_values) -> np.ndarray:
        """``h`` of arriving requests, from their prompt and output lengths.

        Parameters
        ----------
        prompt_values : array_like of int
            The arrivals' prompt lengths ``p``.
        output_values : array_like of int
            The arrivals' output lengths ``d``.

        Returns
        -------
        numpy.ndarray
            ``p + d`` per arrival.
        """
        return self.per_request(prompt_values, output_values)

    def residual_time_value(self, t_slots: float) -> float:
        """``R(n+1)·b/t_b`` after a batch of ``t_slots`` slots.

        Parameters
        ----------
        t_slots : float
            ``t_{b'}``: the batch's time, in slots.

        Returns
        -------
        float
            ``(t_{b'} − 1)·b/t_b``.
        """
        return (t_slots - 1) * self.b / self.t_b


@dataclass(frozen=True)
class QuadraticLyapunov:
    """The Lyapunov function of App. B for unit-time batches.

    ``lam`` arrivals per slot, ``mp``, ``md`` mean sizes, budget ``b``, constant ``L``.
    Raises :class:`UnstableError` unless ``ε' = b − λ(m_p+m_d) > 0``.

    Attributes
    ----------
    lam : float
        ``λ``: arrivals per slot, ``> 0``.
    mp : float
        ``m_p``: the mean prompt length, in tokens.
    md : float
        ``m_d``: the mean output length, in tokens.
    b : int
        ``b``: the token budget per batch, an integer ``>= 1``.
    L : float
        ``L``: App. B's constant (:func:`appendix_b_constant`), ``> 0``.

    Raises
    ------
    UnstableError
        If ``ε' = b − λ(m_p+m_d) <= 0``.
    ValueError
        If ``lam`` or ``L`` is not positive, or ``b`` is not a positive integer.
    """

    lam: float
    mp: float
    md: float
    b: int
    L: float

    def __post_init__(self):
        check_positive("lam", self.lam)
        check_positive("L", self.L)
        check_positive("b", self.b, integer=True)
        if self.eps_prime <= 0:
            raise UnstableError("λ(m_p+m_d)/b (App. B needs ε' = b − λ(m_p+m_d) > 0)",
                                self.lam * (self.mp + self.md) / self.b, 1.0)

    @property
    def eps_prime(self) -> float:
        """The budget's slack per slot, ``ε' = b − λ(m_p+m_d)``, in tokens."""
        return self.b - self.lam * (self.mp + self.md)

    @property
    def eps(self) -> float:
        """``ε = min(ε', Lλ)``."""
        return min(self.eps_prime, self.L * self.lam)

    @property
    def scale(self) -> float:
        """``ε / (4Lλ)``, the weight of the quadratic term."""
        return self.eps / (4 * self.L * self.lam)

    @property
    def B(self) -> float:
        """The level ``B = 2b(4Lλb/ε)² + b``; (B.1) must hold on ``{f ≥ B}``."""
        return 2 * self.b * (4 * self.L * self.lam * self.b / self.eps) ** 2 + self.b

    def per_request(self, p, d) -> np.ndarray:
        """``h(p'_i, d'_i) = p'_i + d'_i + ε·(1(p'_i>0) + d'_i)²/(4Lλ)``: each request's
        term of ``f``.

        Parameters
        ----------
        p : array_like of int
            ``p'_i``: the prompt tokens each request still has to prefill (0 once prefilled).
        d : array_like of int
            ``d'_i``: the output tokens each request still has to decode.

        Returns
        -------
        numpy.ndarray
            ``h`` per request.
        """
        p = np.asarray(p, dtype=np.int64)
        d = np.asarray(d, dtype=np.int64)
        g = (p > 0) + d
        return p + d + self.scale * (g * g).astype(float)

    def __call__(self, p, d, R: float = 0) -> float:
        if R:
            raise ValueError(f"R={R}: App. B's function is for unit-time batches (R = 0)")
        return float(self.per_request(p, d).sum())

    def service_change(self, p, d, chunk, decode) -> np.ndarray:
        """``h(post) − h(pre)`` per request: minus the terms of Δ(X), computed exactly.

        Parameters
        ----------
        p : numpy.ndarray of int
            ``p'_i``: the prompt tokens each request still has to prefill (0 once prefilled).
        d : numpy.ndarray of int
            ``d'_i``: the output tokens each request still has to decode.
        chunk : numpy.ndarray of int
            The prompt tokens the batch prefills for each request.
        decode : numpy.ndarray of int
            1 where the batch decodes the request, else 0.

        Returns
        -------
        numpy.ndarray
            ``h(post) − h(pre)`` per request.
        """
        g = (p > 0).astype(np.int64) + d
        served = np.where(p > 0, chunk == p, decode == 1).astype(np.int64)
        g_next = g - served
        return -(chunk + decode).astype(float) + self.scale * (
            (g_next - g) * (g_next + g)).astype(float)

    def arrival_value(self, prompt_values, output_values) -> np.ndarray:
        """``h`` of arriving requests, from their prompt and output lengths.

        Parameters
        ----------
        prompt_values : array_like of int
            The arrivals' prompt lengths ``p``.
        output_values : array_like of int
            The arrivals' output lengths ``d``.

        Returns
        -------
        numpy.ndarray
            ``h(p, d)`` per arrival.
        """
        return self.per_request(prompt_values, output_values)

    def residual_time_value(self, t_slots: float) -> float:
        """The residual time's term: 0, as App. B's batches take one slot.

        Parameters
        ----------
        t_slots : float
            The batch's time, in slots; must be 1.

        Returns
        -------
        float
            0.0.

        Raises
        ------
        ValueError
            If ``t_slots != 1``.
        """
        if t_slots != 1:
            raise ValueError(f"batch time {t_slots}: App. B's drift assumes unit-time batches")
        return 0.0


# ---- one-step drift -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Drift:
    """Expected one-step change ``E[f(X(n+1)) − f(X(n)) | X(n) = x]``; ``stderr = 0`` if exact.

    ``service`` is the deterministic change due to the batch, ``arrivals`` the expected
    contribution of the slot's arrivals, ``load`` the batch's token load.

    Attributes
    ----------
    value : float
        The drift ``E[f(X(n+1)) − f(X(n)) | X(n) = x]`` (an estimate with ``method="mc"``).
    stderr : float
        Its standard error; 0 when exact.
    exact : bool
        Whether the arrivals' term was computed exactly.
    service : float
        The batch's deterministic change, the residual time's term included.
    arrivals : float
        The expected change due to the slot's arrivals, ``E[a]·E[h(v_p, v_d)]``.
    load : int
        ``b'``: the batch's token load.
    """

    value: float
    stderr: float
    exact: bool
    service: float
    arrivals: float
    load: int


def _policy_batch(policy, p, d, b):
    state = dtmc_state(p, d)
    policy.reset(0)
    batch = policy.schedule(state)
    check_batch(state, batch, policy=policy, iteration=0, token_budget=int(b), memory=None,
                emit_first=False)
    chunk = np.zeros(len(p), dtype=np.int64)
    dec = np.zeros(len(p), dtype=np.int64)
    chunk[batch.prefill] = batch.chunk
    dec[batch.decode] = 1
    return chunk, dec, batch.token_load


def _expected_arrival_value(lyap, workload) -> float:
    classes = _classes(workload)
    rates = np.array([c.rate for c in classes], dtype=float)
    total = 0.0
    for r, c in zip(rates / rates.sum(), classes, strict=True):
        pv, pp = length_pmf(c.prompt, "prompt")
        ov, op = length_pmf(c.output, "output")
        # h is p-part + d-part for a fresh request (p >= 1), so marginals suffice
        total += r * (float(np.dot(pp, pv)) + float(
            np.dot(op, lyap.arrival_value(np.ones_like(ov), ov) - 1.0)))
    return float(_arrival_rate(workload) * total)


def _sampled_arrival_value(lyap, workload, n_samples, rng) -> np.ndarray:
    wl = workload if isinstance(workload, Workload) else Workload([workload])
    if wl.arrivals not in ("poisson", "poisson-slot", "bernoulli"):
        raise ValueError(f"arrivals={wl.arrivals!r}: Monte Carlo drift needs i.i.d. per-slot "
                         "arrivals (poisson, poisson-slot or bernoulli)")
    out = np.zeros(n_samples)
    for c in wl.classes:
        lam = c.rate * wl.slot
        counts = rng.binomial(1, lam, n_samples) if wl.arrivals == "bernoulli" else \
            rng.poisson(lam, n_samples)
        p, d = c.sample_lengths(rng, int(counts.sum()))
        owner = np.repeat(np.arange(n_samples), counts)
        out += np.bincount(owner, weights=lyap.arrival_value(p, d), minlength=n_samples)
    return out


def one_step_drift(policy, state, lyapunov, workload, *, time_model=None, method: str = "auto",
                   n_samples: int = 20_000, seed: int = 0) -> Drift:
    """Expected one-step drift of ``lyapunov`` from ``state = (p', d')`` under ``policy``.

    The policy schedules one batch (checked against rules 2.5a–d), the state moves to the
    post-decision state ``(P'_i, D'_i)`` of §2.2's system dynamics, then the slot's arrivals
    join (the state ``X(n+1)`` of §2.2); the batch lasts ``t_{b'}`` slots of ``time_model``
    (default unit time). ``method``: ``"exact"`` enumerates the length laws (they must have
    finite support), ``"mc"`` samples ``n_samples`` slots of arrivals, ``"auto"`` is exact
    when it can be.

    Parameters
    ----------
    policy : Policy
        The scheduling policy (a :mod:`queuetheory.policies` object); its ``token_budget``, if
        it has one, must equal the Lyapunov function's ``b``.
    state : tuple of (array_like of int, array_like of int)
        ``(p', d')``: per request, the prompt tokens left to prefill (0 once prefilled) and the
        output tokens left to decode.
    lyapunov : LinearLyapunov or QuadraticLyapunov
        The function ``f``.
    workload : Workload or RequestClass
        The arrivals: rate per slot and length laws.
    time_model : TimeModel, optional
        The batch time ``t_{b'}``, in slots; default :class:`~queuetheory.timing.UnitTime`.
    method : {"auto", "exact", "mc"}, default "auto"
        Exact enumeration of the length laws, Monte Carlo, or exact when it can be.
    n_samples : int, default 20000
        The number of slots sampled with ``method="mc"``.
    seed : int, default 0
        The random seed of ``method="mc"``.

    Returns
    -------
    Drift
        The drift, its standard error, and its service and arrival parts.

    Raises
    ------
    ValueError
        If ``method`` is unknown, the policy's budget differs from ``b``, ``time_model`` is not
        a TimeModel, ``n_samples`` is not a positive integer, a length law has unbounded
        support with ``method="exact"``, Monte Carlo arrivals are not i.i.d. per slot, or a
        :class:`QuadraticLyapunov` meets a batch longer than one slot.
    InfeasibleBatchError
        If the policy's batch breaks rules 2.5a–d.
    """
    if method not in ("exact", "mc", "auto"):
        raise ValueError(f"method={method!r}: must be 'exact', 'mc' or 'auto'")
    b = lyapunov.b
    if getattr(policy, "token_budget", b) != b:
        raise ValueError(f"policy token_budget={policy.token_budget} differs from the "
                         f"Lyapunov function's b={b}")
    p = np.asarray(state[0], dtype=np.int64)
    d = np.asarray(state[1], dtype=np.int64)
    chunk, dec, load = _policy_batch(policy, p, d, b)
    time_model = time_model or UnitTime()
    if not isinstance(time_model, TimeModel):
        raise ValueError(f"time_model={time_model!r}: must be a queuetheory TimeModel")
    t_slots = float(time_model.token_time(load)) if load else 1.0
    service = float(lyapunov.service_change(p, d, chunk, dec).sum())
    service += lyapunov.residual_time_value(t_slots)
    if method == "auto":
        try:
            arrivals = float(_expected_arrival_value(lyapunov, workload))
            return Drift(service + arrivals, 0.0, True, service, arrivals, load)
        except ValueError:
            method = "mc"
    if method == "exact":
        arrivals = float(_expected_arrival_value(lyapunov, workload))
        return Drift(service + arrivals, 0.0, True, service, arrivals, load)
    check_positive("n_samples", n_samples, integer=True)
    draws = _sampled_arrival_value(lyapunov, workload, int(n_samples), np.random.default_rng(seed))
    arrivals = float(draws.mean())
    return Drift(service + arrivals, float(draws.std(ddof=1) / np.sqrt(draws.size)), False,
                 service, arrivals, load)


# ---- the certificate ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DriftCertificate:
    """Worst drift of App. B's function over states with ``f(x) ≥ B`` (test of B.1).

    ``certified`` iff every checked state has drift ``≤ −ε/2`` (up to rounding);
    ``worst_state`` is ``(p', d')`` of the state with the largest drift.

    Attributes
    ----------
    policy : str
        The policy's ``repr``.
    worst_drift : float
        The largest drift found, per slot.
    threshold : float
        ``−ε/2``: (B.1)'s bound.
    certified : bool
        Whether ``worst_drift <= threshold`` (up to rounding).
    worst_state : tuple of (tuple of int, tuple of int)
        ``(p', d')`` of the worst state.
    worst_family : str
        The family of the worst state (see :func:`certificate_states`), or ``"given"``.
    states_checked : int
        The number of states checked.
    epsilon : float
        ``ε = min(ε', Lλ)``.
    L : float
        The constant ``L`` used.
    B : float
        ``B = 2b(4Lλb/ε)² + b``: the level beyond which states are checked.
    """

    policy: str
    worst_drift: float
    threshold: float
    certified: bool
    worst_state: tuple[tuple[int, ...], tuple[int, ...]]
    worst_family: str
    states_checked: int
    epsilon: float
    L: float
    B: float


def _lift(lyap, p, d, i):
    """Raise ``d'_i`` to the smallest value with ``f ≥ B`` (a state beyond the finite set)."""
    d = d.copy()
    rest = lyap(p, d) - float(lyap.per_request(p[i:i + 1], d[i:i + 1])[0])
    need = lyap.B - rest - p[i]
    ind = int(p[i] > 0)
    if need > 0:   # solve d + s(ind + d)^2 >= need
        s = lyap.scale
        g = (-1 + math.sqrt(1 + 4 * s * (need + ind))) / (2 * s)
        d[i] = max(d[i], int(math.floor(g)) - ind)
        while lyap(p, d) < lyap.B:
            d[i] += 1
    return p, d


def certificate_states(lyap, *, n_random: int = 200, max_prompt: int | None = None,
                       max_decode: int | None = None, seed: int = 0):
    """Sampled and adversarial states ``(family, p', d')`` with ``f(x) ≥ B``.

    Families: ``random`` (up to ``3b`` requests of random phase and size); ``few`` (fewer
    than ``b`` tokens available: App. B's case 2); ``prefill+decoders`` (one short prompt
    waiting while decoders owe long outputs — what starves decodes under prefill priority);
    ``giant-prefill`` (one request whose prompt exceeds the budget: ``Δ = b`` exactly);
    ``boundary`` (``avail(x) ∈ {b−1, b, b+1}``). In each, one request's ``d'`` is raised
    until ``f ≥ B``.

    Parameters
    ----------
    lyap : QuadraticLyapunov
        App. B's function, which sets ``b`` and ``B``.
    n_random : int, default 200
        The number of ``random`` and of ``few`` states.
    max_prompt : int, optional
        The largest sampled prompt, in tokens; default ``2b``.
    max_decode : int, optional
        The largest sampled ``d'``, in tokens; default ``4·max(1, round(m_d))``.
    seed : int, default 0
        The random seed.

    Yields
    ------
    family : str
        The family's name.
    p : numpy.ndarray of int
        ``p'_i`` per request.
    d : numpy.ndarray of int
        ``d'_i`` per request, one of them raised so that ``f(x) >= B``.
    """
    b = lyap.b
    max_prompt = int(max_prompt or 2 * b)
    max_decode = int(max_decode or 4 * max(1, round(lyap.md)))
    rng = np.random.default_rng(seed)

    def sizes(n, prefill_share):
        p = np.where(rng.random(n) < prefill_share, rng.integers(1, max_prompt + 1, n), 0)
        return p, rng.integers(1, max_decode + 1, n)

    for _ in range(n_random):
        p, d = sizes(int(rng.integers(1, 3 * b + 1)), rng.random())
        yield ("random", *_lift(lyap, p, d, int(rng.integers(p.size))))
        n = int(rng.integers(1, b))
        p, d = sizes(n, rng.random())
        while p.sum() + np.count_nonzero(p == 0) >= b:
            p[int(np.argmax(p))] //= 2
        yield ("few", *_lift(lyap, p, d, int(rng.integers(n))))
    for k in (1, 2, max(1, b // 2), b - 1):
        for m in sorted({1, b // 2, b - k, b, 2 * b}):
            if m < 1:
                continue
            p = np.array([k] + [0] * m)
            d = np.array([1] + [max_decode] * m)
            for i in (0, m):
                yield ("prefill+decoders", *_lift(lyap, p, d, i))
    for extra in (0, 1, b):
        p = np.array([b + 1 + extra])
        yield ("giant-prefill", *_lift(lyap, p, np.array([1]), 0))
    for avail in (b - 1, b, b + 1):
        for prefill in (0, 1, avail // 2):
            m = avail - prefill
            p = np.array(([prefill] if prefill else []) + [0] * m, dtype=np.int64)
            d = np.ones(p.size, dtype=np.int64)
            yield ("boundary", *_lift(lyap, p, d, p.size - 1))


@renamed_keywords(b="token_budget")
def drift_certificate(policy, workload, token_budget, states=None, *, L: float | None = None,
                      printed_constant: bool = False, n_random: int = 200,
                      seed: int = 0) -> DriftCertificate:
    """Search states beyond App. B's finite set for the worst drift of ``policy`` (B.1).

    ``workload``: unit-time arrivals, ``λ = workload.total_rate`` per slot, length laws with
    finite support (exact drift). ``L`` defaults to the corrected constant
    (``printed_constant=True``: the paper's ``E[d²]``). ``states``: an iterable of ``(p', d')``
    pairs to check instead of :func:`certificate_states` (each lifted to ``f ≥ B`` by raising
    its last request's ``d'``).

    Parameters
    ----------
    policy : Policy
        The scheduling policy (a :mod:`queuetheory.policies` object) with token budget ``b``.
    workload : Workload or RequestClass
        Unit-time arrivals with finite-support length laws.
    token_budget : int
        ``b``: the token budget per batch, a positive integer.
    states : iterable of tuple, optional
        ``(p', d')`` pairs to check instead of :func:`certificate_states`.
    L : float, optional
        App. B's constant; default :func:`appendix_b_constant` of the workload.
    printed_constant : bool, default False
        Default ``L`` to the paper's ``E[d²]`` instead of the corrected constant.
    n_random : int, default 200
        Passed to :func:`certificate_states`.
    seed : int, default 0
        Passed to :func:`certificate_states`.

    Returns
    -------
    DriftCertificate
        The worst drift, the threshold ``−ε/2``, whether it is certified, and the worst state.

    Raises
    ------
    ValueError
        If ``b`` is not a positive integer, a length law is malformed or unbounded, or ``L`` is
        not positive.
    UnstableError
        If ``ε' = b − λ(m_p+m_d) <= 0``.
    InfeasibleBatchError
        If the policy's batch breaks rules 2.5a–d.
    """
    b = token_budget                 # the paper's b
    b = int(check_positive("b", b, integer=True))
    lam = _arrival_rate(workload)
    wl = workload if isinstance(workload, Workload) else Workload([workload])
    if L is None:
        L = appendix_b_constant(wl, printed=printed_constant)
    lyap = QuadraticLyapunov(lam, wl.mean_prompt, wl.mean_output, b, float(L))
    if states is None:
        cases = certificate_states(lyap, n_random=n_random, seed=seed)
    else:
        cases = []
        for p, d in states:
            p = np.asarray(p, dtype=np.int64)
            cases.append(("given", *_lift(lyap, p, np.asarray(d, dtype=np.int64), p.size - 1)))
    arrivals = _expected_arrival_value(lyap, wl)
    worst, worst_case, count = -math.inf, None, 0
    for family, p, d in cases:
        chunk, dec, _ = _policy_batch(policy, p, d, b)
        value = float(lyap.service_change(p, d, chunk, dec).sum()) + arrivals
        count += 1
        if value > worst:
            worst, worst_case = value, (family, p, d)
    threshold = -lyap.eps / 2
    family, p, d = worst_case
    return DriftCertificate(repr(policy), worst, threshold,
                            worst <= threshold + 1e-9 * max(1.0, abs(threshold)),
                            (tuple(int(x) for x in p), tuple(int(x) for x in d)), family, count,
                            lyap.eps, lyap.L, lyap.B)
