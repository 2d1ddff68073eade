"""Request classes, arrival processes, length distributions and traces.

A *request* has an arrival time, a prompt length (prefill tokens), an output length (decode
tokens), a class index, a priority, and a prediction interval ``[lo, hi]`` for its output
length (Chen et al.'s model; the default predictor is exact, ``lo = hi = output``).

Lengths are given as a fixed ``int``, a frozen ``scipy.stats`` distribution (samples are
rounded to the nearest integer and clipped to at least one token), or an array of empirical
samples (drawn with replacement).  Time is in the unit of the time model used with the
workload (seconds, milliseconds, rounds or slots); rates are per that unit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import check_between, check_positive

__all__ = [
    "MAX_LENGTH",
    "MAX_REQUESTS",
    "RequestClass",
    "Workload",
    "Trace",
    "TimeVarying",
    "ExactPredictor",
    "RelativeInterval",
    "ClassInterval",
]

_QUANTILE_GRID = (np.arange(1 << 15) + 0.5) / (1 << 15)


def _is_frozen_distribution(obj) -> bool:
    return hasattr(obj, "rvs") and hasattr(obj, "ppf") and hasattr(obj, "dist")

#: Longest prompt or output accepted (tokens): sums of longer lengths would overflow the
#: engine's int64 token counters.
MAX_LENGTH = 1 << 40

#: Most requests one sample may draw (about 0.8 kB each once simulated): a workload whose
#: expected count over the horizon is larger is refused with the estimate.
MAX_REQUESTS = 20_000_000


def _gigabytes(requests: float) -> str:
    return f"{requests * 800 / 1e9:.3g} GB"


def _show(a) -> str:
    a = np.asarray(a)
    return repr(a.tolist()) if a.size <= 6 else f"<array of {a.size}>"


def _column(name: str, values, n: int | None) -> np.ndarray:
    """``values`` as a 1-d float array of length ``n``, or a ValueError naming ``name``."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}={values!r}: must be a 1-d sequence of numbers") from None
    if arr.ndim != 1 or (n is not None and arr.size != n):
        want = "a 1-d sequence" if n is None else f"a 1-d sequence of {n} values (one per arrival)"
        raise ValueError(f"{name}={_show(arr)}: must be {want}, got shape {arr.shape}")
    return arr


def _lengths(name: str, values, n: int) -> np.ndarray:
    """Token lengths rounded to the nearest integer, each in ``[1, MAX_LENGTH]``."""
    arr = _column(name, values, n)
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}={_show(arr)}: token lengths must be finite")
    arr = np.rint(arr)
    if arr.size and not (arr.min() >= 1 and arr.max() <= MAX_LENGTH):
        raise ValueError(f"{name}={_show(arr)}: token lengths must round to integers in "
                         f"[1, {MAX_LENGTH}]")
    return arr.astype(np.int64)


def _integers(name: str, values, n: int, low: int | None = None) -> np.ndarray:
    arr = _column(name, values, n)
    if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr == np.rint(arr))
                         and np.abs(arr).max() <= MAX_LENGTH
                         and (low is None or arr.min() >= low)):
        rule = "integers" if low is None else f"integers >= {low}"
        raise ValueError(f"{name}={_show(arr)}: must be {rule}")
    return arr.astype(np.int64)


def _check_distribution(name: str, dist) -> None:
    """Refuse a length law whose quantiles are not finite (a degenerate or broken frozen
    distribution), that exceeds ``MAX_LENGTH``, or whose draws would mostly be clipped up
    to one token (more than half its mass below 0.5: every length would become 1)."""
    with np.errstate(all="ignore"):
        q = np.asarray(dist.ppf(_QUANTILE_GRID), dtype=float)
    what = f"{name}={_dist_name(dist)}"
    if not np.all(np.isfinite(q)):
        raise ValueError(f"{what}: its quantiles are not all finite (a degenerate or "
                         "unbounded distribution); a length law needs finite draws")
    if q[-1] > MAX_LENGTH:
        raise ValueError(f"{what}: upper quantile {q[-1]:.3g} exceeds MAX_LENGTH = "
                         f"{MAX_LENGTH}")
    if np.median(q) < 0.5:
        raise ValueError(f"{what}: median {np.median(q):.3g} < 0.5, so more than half of "
                         "the draws would be clipped up to 1 token; shift the law to "
                         "positive lengths")


def _dist_name(dist) -> str:
    args = ", ".join(f"{a:g}" if isinstance(a, float) else repr(a) for a in dist.args)
    return f"{getattr(dist.dist, 'name', 'distribution')}({args})"


@dataclass(frozen=True, eq=False)
class Lengths:
    """A token-length law: fixed, a frozen scipy.stats distribution, or empirical samples.

    Parameters
    ----------
    spec : int, frozen scipy.stats distribution or array_like of numbers
        A fixed length in ``[1, MAX_LENGTH]``; a distribution (draws rounded to the nearest
        integer and clipped to at least 1 token); or a non-empty 1-d array of empirical
        samples in ``[1, MAX_LENGTH]`` (rounded, drawn with replacement).
    name : str, default "length"
        The law's name in error messages.

    Raises
    ------
    ValueError
        If ``spec`` is a bool, a fixed length outside ``[1, MAX_LENGTH]``, a distribution
        whose quantiles are not finite, exceed ``MAX_LENGTH`` or have a median below 0.5, or
        samples that are empty, not 1-d, not numbers, not finite or outside
        ``[1, MAX_LENGTH]``.
    """

    spec: object
    name: str = "length"

    def __post_init__(self):
        spec = self.spec
        if isinstance(spec, bool):
            raise ValueError(f"{self.name}={spec!r}: a length must be an int, a distribution "
                             "or samples")
        if isinstance(spec, int | np.integer):
            if not 1 <= spec <= MAX_LENGTH:
                raise ValueError(f"{self.name}={spec}: a fixed length must be an integer in "
                                 f"[1, {MAX_LENGTH}]")
        elif _is_frozen_distribution(spec):
            _check_distribution(self.name, spec)
        else:
            arr = np.asarray(spec)
            if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.number):
                raise ValueError(
                    f"{self.name}: expected an int, a frozen scipy.stats distribution or a "
                    f"non-empty 1-d array of samples, got {type(spec).__name__}"
                )
            if not np.all(np.isfinite(arr)) or arr.min() < 1 or arr.max() > MAX_LENGTH:
                raise ValueError(f"{self.name}: empirical samples must be finite and in "
                                 f"[1, {MAX_LENGTH}]")
            object.__setattr__(self, "spec", np.rint(arr).astype(np.int64))

    @property
    def fixed(self) -> bool:
        """Whether the length is a fixed integer."""
        return isinstance(self.spec, int | np.integer)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths drawn from the law.

        Parameters
        ----------
        rng : numpy.random.Generator
            The random generator to draw with.
        n : int
            How many lengths.

        Returns
        -------
        numpy.ndarray of int64
            ``n`` lengths in tokens, each ≥ 1.
        """
        spec = self.spec
        if self.fixed:
            return np.full(n, int(spec), dtype=np.int64)
        if isinstance(spec, np.ndarray):
            return spec[rng.integers(0, spec.size, n)]
        draws = np.asarray(spec.rvs(size=n, random_state=rng), dtype=float)
        return np.maximum(1, np.rint(draws)).astype(np.int64)

    def _support_grid(self) -> np.ndarray:
        """Rounded, clipped quantiles on a fine midpoint grid (exact for samples and ints)."""
        spec = self.spec
        if self.fixed:
            return np.array([int(spec)], dtype=np.int64)
        if isinstance(spec, np.ndarray):
            return spec
        return np.maximum(1, np.rint(spec.ppf(_QUANTILE_GRID))).astype(np.int64)

    def moment(self, k: int = 1) -> float:
        """E[X^k] of the rounded, clipped length (quantile-grid quadrature for distributions).

        Parameters
        ----------
        k : int, default 1
            The moment's order.

        Returns
        -------
        float
            ``E[X^k]`` in tokens^k.
        """
        return float(np.mean(self._support_grid().astype(float) ** k))

    @property
    def mean(self) -> float:
        """``E[X]``, the mean length in tokens."""
        return self.moment(1)

    @property
    def max(self) -> int:
        """The largest length in tokens (the top of the quantile grid for a distribution)."""
        return int(self._support_grid().max())


@dataclass(frozen=True, eq=False)
class RequestClass:
    """One class of requests: prompt and output length laws and a Poisson rate.

    Parameters
    ----------
    prompt, output : int, frozen ``scipy.stats`` distribution, or array of samples
        Prefill tokens (Ao et al.: ``l_j``) and decode tokens (Ao et al.: ``l'_j``).
    rate : float
        Arrival rate ``λ_j`` per time unit (per slot for slotted arrivals), ≥ 0.
    name : str, optional
        The class's label in tables and plots.
    priority : int, default 0
        Larger is more important (paying users of Bari et al., static priorities of Li, Dai,
        Peng §4).

    Raises
    ------
    ValueError
        If ``rate`` is negative or not a number, ``priority`` is not an integer, or a length
        law is invalid (see :class:`Lengths`).
    """

    prompt: object
    output: object
    rate: float
    name: str | None = None
    priority: int = 0
    _prompt: Lengths = field(init=False, repr=False)
    _output: Lengths = field(init=False, repr=False)

    def __post_init__(self):
        check_positive("rate", self.rate, allow_zero=True)
        _check_priority(self.priority)
        object.__setattr__(self, "_prompt", Lengths(self.prompt, "prompt"))
        object.__setattr__(self, "_output", Lengths(self.output, "output"))

    @classmethod
    def from_samples(cls, prompt_samples, output_samples, rate, **kwargs) -> RequestClass:
        """A class whose lengths are drawn jointly from paired empirical samples.

        Parameters
        ----------
        prompt_samples : array_like of int
            Prompt lengths in tokens, one per recorded request.
        output_samples : array_like of int
            Output lengths in tokens, paired with ``prompt_samples`` (same length).
        rate : float
            Arrival rate ``λ_j`` per time unit.
        **kwargs
            ``name`` and ``priority``, as for :class:`RequestClass`.

        Returns
        -------
        RequestClass
            A class that draws a recorded (prompt, output) pair at a time, keeping their
            correlation.

        Raises
        ------
        ValueError
            As :class:`RequestClass`: a negative rate, a non-integer priority, or samples
            that are not valid lengths.
        """
        return _PairedClass(prompt_samples, output_samples, rate, **kwargs)

    @property
    def fixed(self) -> bool:
        """Whether both the prompt and the output lengths are fixed."""
        return self._prompt.fixed and self._output.fixed

    @property
    def mean_prompt(self) -> float:
        """Mean prompt length in tokens (Li, Dai, Peng's ``m_p`` for this class)."""
        return self._prompt.mean

    @property
    def mean_output(self) -> float:
        """Mean output length in tokens (Li, Dai, Peng's ``m_d`` for this class)."""
        return self._output.mean

    def output_moment(self, k: int) -> float:
        """``E[o^k]`` of the rounded output length.

        Parameters
        ----------
        k : int
            The moment's order.

        Returns
        -------
        float
            The ``k``-th moment in tokens^k.
        """
        return self._output.moment(k)

    def output_pmf(self) -> tuple[np.ndarray, np.ndarray]:
        """The rounded output-length law as ``(values, probabilities)`` (quantile grid for
        continuous distributions, exact for fixed lengths and samples).

        Returns
        -------
        values : numpy.ndarray of int64
            The distinct output lengths in tokens, increasing.
        probabilities : numpy.ndarray of float
            Their probabilities, summing to 1.
        """
        values, counts = np.unique(self._output._support_grid(), return_counts=True)
        return values, counts / counts.sum()

    @property
    def max_prompt(self) -> int:
        """The longest prompt in tokens."""
        return self._prompt.max

    @property
    def max_output(self) -> int:
        """The longest output in tokens."""
        return self._output.max

    def sample_lengths(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` (prompt, output) length pairs drawn from the class's laws.

        Parameters
        ----------
        rng : numpy.random.Generator
            The random generator to draw with.
        n : int
            How many requests.

        Returns
        -------
        prompt : numpy.ndarray of int64
            Prompt lengths in tokens.
        output : numpy.ndarray of int64
            Output lengths in tokens.
        """
        return self._prompt.sample(rng, n), self._output.sample(rng, n)


def _check_priority(priority) -> None:
    """A priority is an integer (a float with an integer value is accepted)."""
    ok = isinstance(priority, int | np.integer | float | np.floating) and not isinstance(
        priority, bool)
    if not (ok and np.isfinite(priority) and priority == int(priority)
            and abs(priority) <= MAX_LENGTH):
        raise ValueError(f"priority={priority!r}: must be an integer (larger is more "
                         f"important), |priority| <= {MAX_LENGTH}")


class _PairedClass(RequestClass):
    """Empirical (prompt, output) pairs drawn together, keeping their correlation."""

    def sample_lengths(self, rng, n):
        k = rng.integers(0, self._prompt.spec.size, n)
        return self._prompt.spec[k], self._output.spec[k]


@dataclass(frozen=True)
class Trace:
    """A sampled or recorded request sequence, sorted by arrival time.

    ``blocks`` (optional): per request, the ids of its prompt's full prefix blocks of
    ``block_size`` tokens, equal ids meaning equal prompt tokens up to the end of that block
    (a prefix hash chain, as vLLM's prefix cache and the Mooncake traces key blocks); a
    numpy object array of int arrays. ``None``: the requests share no known prefix.

    Attributes
    ----------
    arrival : numpy.ndarray of float
        Arrival times in the time model's unit, non-decreasing.
    prompt : numpy.ndarray of int64
        Prompt (prefill) lengths in tokens.
    output : numpy.ndarray of int64
        Output (decode) lengths in tokens, the first token included.
    cls : numpy.ndarray of int64
        Class index of each request.
    lo : numpy.ndarray of int64
        Lower end of each request's predicted output interval (Chen, Ye, Zhou's ``ℓ``).
    hi : numpy.ndarray of int64
        Upper end of the interval (their ``u``); ``lo ≤ output ≤ hi``.
    priority : numpy.ndarray of int64
        Priority of each request, larger more important.
    blocks : numpy.ndarray of object, optional
        Per request, the ids of its prompt's full prefix blocks (see above).
    block_size : int, optional
        Tokens per prefix block; required with ``blocks``.

    Raises
    ------
    ValueError
        With ``blocks``: if ``block_size`` is not a positive integer, ``blocks`` has not one
        entry per request, or a request has more full blocks than its prompt holds.
    """

    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    cls: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    priority: np.ndarray
    blocks: np.ndarray | None = None
    block_size: int | None = None

    def __post_init__(self):
        if self.blocks is None:
            return
        if not isinstance(self.block_size, int | np.integer) or self.block_size < 1:
            raise ValueError(f"block_size={self.block_size!r}: a trace with prefix blocks "
                             "needs their size in tokens, a positive integer")
        if len(self.blocks) != self.arrival.size:
            raise ValueError(f"blocks: {len(self.blocks)} entries for "
                             f"{self.arrival.size} requests")
        full = np.array([len(b) for b in self.blocks]) * self.block_size
        over = np.flatnonzero(full > self.prompt)
        if over.size:
            i = int(over[0])
            raise ValueError(f"blocks[{i}]: {len(self.blocks[i])} blocks of {self.block_size} "
                             f"tokens is more than its prompt of {int(self.prompt[i])} tokens")

    def __len__(self) -> int:
        return int(self.arrival.size)

    def take(self, index) -> Trace:
        """The requests at ``index`` (a slice, an index array or a boolean mask).

        Parameters
        ----------
        index : slice, array_like of int or array_like of bool
            The rows to keep (numpy indexing; keep them in arrival order).

        Returns
        -------
        Trace
            The selected requests, with their prefix blocks.
        """
        rows = [getattr(self, f)[index] for f in _TRACE_ROWS]
        blocks = None if self.blocks is None else self.blocks[index]
        return Trace(*rows, blocks=blocks, block_size=self.block_size)

    def head(self, n: int) -> Trace:
        """The first ``n`` requests.

        Parameters
        ----------
        n : int
            How many requests to keep.

        Returns
        -------
        Trace
            The first ``n`` requests in arrival order (all of them if fewer).
        """
        return self.take(slice(0, n))

    def until(self, horizon: float) -> Trace:
        """The requests arriving by ``horizon``.

        Parameters
        ----------
        horizon : float
            The last arrival time kept (inclusive), in the trace's time unit.

        Returns
        -------
        Trace
            The requests with ``arrival ≤ horizon``.
        """
        return self.head(int(np.searchsorted(self.arrival, horizon, side="right")))


_TRACE_ROWS = ("arrival", "prompt", "output", "cls", "lo", "hi", "priority")


@dataclass(frozen=True)
class TimeVarying:
    """Non-homogeneous Poisson arrivals by thinning (Ao et al. §7.1, eq. 13).

    ``multiplier(t)`` scales every class rate at time ``t`` (a scalar, or an array with one
    entry per class); ``peak`` bounds it from above and is checked on every candidate.

    Parameters
    ----------
    multiplier : callable
        ``multiplier(t)`` for an array of times ``t``: the factor on each class rate, in
        ``[0, peak]`` (one value per time, or one row per class).
    peak : float
        An upper bound of ``multiplier``, > 0: candidates arrive at rate ``λ_j · peak`` and
        are thinned.

    Raises
    ------
    ValueError
        If ``peak`` is not a positive number.
    """

    multiplier: Callable[[np.ndarray], np.ndarray]
    peak: float

    def __post_init__(self):
        check_positive("peak", self.peak)


class ExactPredictor:
    """``lo = hi = output``: the scheduler knows every output length."""

    def __call__(self, rng, output, cls):
        return output.copy(), output.copy()


@dataclass(frozen=True)
class RelativeInterval:
    """``[floor((1-α)·o), ceil((1+α)·o)]``, clipped to at least 1 (Chen et al. §6).

    Parameters
    ----------
    alpha : float
        The relative half-width ``α`` in ``[0, 1)``.

    Raises
    ------
    ValueError
        If ``alpha`` is not in ``[0, 1)``.
    """

    alpha: float

    def __post_init__(self):
        check_between("alpha", self.alpha, 0, 1, low_closed=True)

    def __call__(self, rng, output, cls):
        lo = np.maximum(1, np.floor((1 - self.alpha) * output)).astype(np.int64)
        hi = np.ceil((1 + self.alpha) * output).astype(np.int64)
        return lo, hi


@dataclass(frozen=True)
class ClassInterval:
    """Every request of class ``j`` gets the interval ``bounds[j] = (lo, hi)``.

    Parameters
    ----------
    bounds : sequence of (int, int)
        One ``(lo, hi)`` pair per class, in tokens, ``1 ≤ lo ≤ hi ≤ MAX_LENGTH``; each
        request's output must lie in its class's interval.

    Raises
    ------
    ValueError
        If ``bounds`` is not a non-empty sequence of such integer pairs (and, when called,
        if an output falls outside its class's interval).
    """

    bounds: tuple[tuple[int, int], ...]

    def __post_init__(self):
        try:
            b = np.asarray(self.bounds, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"bounds={self.bounds!r}: must be a sequence of (lo, hi) "
                             "pairs of integers") from None
        if b.ndim != 2 or b.shape[1] != 2 or not len(b):
            raise ValueError(f"bounds={self.bounds!r}: must be a non-empty sequence of "
                             "(lo, hi) pairs, one per class")
        if not (np.all(np.isfinite(b)) and np.all(b == np.rint(b)) and b.min() >= 1
                and b.max() <= MAX_LENGTH and np.all(b[:, 0] <= b[:, 1])):
            raise ValueError(f"bounds={self.bounds!r}: every (lo, hi) must be integers with "
                             f"1 <= lo <= hi <= {MAX_LENGTH}")

    def __call__(self, rng, output, cls):
        b = np.asarray(self.bounds, dtype=np.int64)[cls]
        if np.any(output < b[:, 0]) or np.any(output > b[:, 1]):
            raise ValueError("ClassInterval: some output lengths fall outside their class interval")
        return b[:, 0].copy(), b[:, 1].copy()


_ARRIVALS = ("poisson", "deterministic", "bernoulli", "poisson-slot")


class Workload:
    """A set of request classes and how they arrive.

    Parameters
    ----------
    classes : sequence of RequestClass
        The request classes, indexed ``j`` in order.
    arrivals : {"poisson", "deterministic", "bernoulli", "poisson-slot"} or TimeVarying
        ``poisson``: independent Poisson processes; ``deterministic``: class ``j`` arrives
        at ``1/λ_j, 2/λ_j, …``; ``bernoulli``: at most one class-``j`` arrival per slot with
        probability ``λ_j``; ``poisson-slot``: ``Poisson(λ_j)`` arrivals at the start of each
        slot (Li, Dai, Peng's ``a_n``); ``TimeVarying``: Poisson with rate ``λ_j·multiplier(t)``.
    predictor : callable, optional
        ``(rng, output, cls) -> (lo, hi)``, each request's predicted output interval;
        default exact (:class:`ExactPredictor`), or :class:`RelativeInterval`,
        :class:`ClassInterval`.
    slot : float, default 1.0
        The slot length for slotted arrivals, in time units.

    Raises
    ------
    ValueError
        If ``classes`` is empty or holds something else than ``RequestClass``, ``arrivals``
        is unknown, ``slot`` is not positive, or a Bernoulli class has ``λ_j · slot > 1``.
    """

    def __init__(self, classes, arrivals="poisson", predictor=None, slot: float = 1.0):
        classes = list(classes)
        if not classes or not all(isinstance(c, RequestClass) for c in classes):
            raise ValueError("classes: expected a non-empty sequence of RequestClass")
        if not isinstance(arrivals, TimeVarying) and arrivals not in _ARRIVALS:
            raise ValueError(f"arrivals={arrivals!r}: must be one of {_ARRIVALS} or a TimeVarying")
        check_positive("slot", slot)
        if arrivals == "bernoulli" and any(c.rate * slot > 1 for c in classes):
            raise ValueError("rate: Bernoulli arrivals need rate * slot <= 1 for every class")
        self.classes = tuple(classes)
        self.arrivals = arrivals
        self.predictor = predictor or ExactPredictor()
        self.slot = float(slot)
        self._trace: Trace | None = None

    # ---- summary quantities -------------------------------------------------------------
    @property
    def rates(self) -> np.ndarray:
        """The class rates ``λ_j`` per time unit, as an array."""
        return np.array([c.rate for c in self.classes], dtype=float)

    @property
    def total_rate(self) -> float:
        """``λ = Σ_j λ_j``, requests per time unit."""
        return float(self.rates.sum())

    def _weighted(self, values) -> float:
        r = self.rates
        return float(np.dot(r, values) / r.sum())

    @property
    def mean_prompt(self) -> float:
        """Rate-weighted mean prompt length in tokens (Li, Dai, Peng's ``m_p``)."""
        return self._weighted([c.mean_prompt for c in self.classes])

    @property
    def mean_output(self) -> float:
        """Rate-weighted mean output length in tokens (Li, Dai, Peng's ``m_d``)."""
        return self._weighted([c.mean_output for c in self.classes])

    @property
    def token_rate(self) -> float:
        """Offered token load ``Σ_j λ_j (m_p^j + m_d^j)`` per time unit (Li, Dai, Peng, eq. 2.7)."""
        return float(sum(c.rate * (c.mean_prompt + c.mean_output) for c in self.classes))

    # ---- traces -----------------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, arrival, prompt, output, cls_=None, *, lo=None, hi=None, priority=None):
        """A workload that replays a recorded trace (``cls_`` is the class index per request).

        Lengths (``prompt``, ``output``, ``lo``, ``hi``) are token counts: real numbers are
        rounded to the nearest integer, as :class:`RequestClass` rounds empirical samples, and
        must then lie in ``[1, MAX_LENGTH]``; ``cls_`` and ``priority`` must be integers
        (classes ``>= 0``). Every array must be 1-d with one entry per arrival.

        Parameters
        ----------
        arrival : array_like of float
            Arrival times in the time model's unit (any order; sorted stably).
        prompt : array_like of int
            Prompt lengths in tokens.
        output : array_like of int
            Output lengths in tokens.
        cls_ : array_like of int, optional
            Class index per request (default: all 0).
        lo : array_like of int, optional
            Lower end of each predicted output interval (default: ``output``, exact).
        hi : array_like of int, optional
            Upper end (default: ``output``); ``lo ≤ output ≤ hi``.
        priority : array_like of int, optional
            Priority per request (default: all 0).

        Returns
        -------
        Workload
            A workload whose :meth:`sample` replays the trace (cut at ``horizon`` /
            ``n_requests`` where given); its classes carry each class's empirical lengths and
            its mean rate over the span.

        Raises
        ------
        ValueError
            If an array is not 1-d with one entry per arrival, an arrival time is not
            finite, a length is not in ``[1, MAX_LENGTH]`` after rounding, a class or
            priority is not an integer (a class negative), or ``lo ≤ output ≤ hi`` fails.
        """
        arrival = _column("arrival", arrival, None)
        n = arrival.size
        if not np.all(np.isfinite(arrival)):
            raise ValueError(f"arrival={_show(arrival)}: arrival times must be finite")
        prompt = _lengths("prompt", prompt, n)
        output = _lengths("output", output, n)
        c = np.zeros(n, np.int64) if cls_ is None else _integers("cls_", cls_, n, low=0)
        order = np.argsort(arrival, kind="stable")
        lo = output if lo is None else _lengths("lo", lo, n)
        hi = output if hi is None else _lengths("hi", hi, n)
        pr = np.zeros(n, np.int64) if priority is None else _integers("priority", priority, n)
        bad = np.flatnonzero((lo > output) | (hi < output))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"lo, hi: need lo <= output <= hi for every request; request {i} "
                             f"has lo={int(lo[i])}, output={int(output[i])}, hi={int(hi[i])}")
        k = int(c.max()) + 1 if n else 1
        span = float(arrival.max() - min(arrival.min(), 0.0)) if n else 1.0
        classes = []
        for j in range(k):
            sel = c == j
            count = int(sel.sum())
            rate = count / span if span > 0 else 0.0
            p = prompt[sel] if count else np.array([1])
            o = output[sel] if count else np.array([1])
            classes.append(RequestClass(p, o, rate, name=f"trace-{j}"))
        wl = cls(classes)
        wl._trace = Trace(
            *(a[order] for a in (arrival, prompt, output, c, lo, hi, pr))
        )
        return wl

    @staticmethod
    def from_trace(source, **options) -> Trace:
        """A recorded production trace (CSV, JSONL, Parquet or a DataFrame) as a Trace to
        replay: :func:`queuetheory.workload.traces.read_trace` has the options (format
        presets, columns, time unit, window, speedup, rate, bad rows).

        Parameters
        ----------
        source : str, path-like or pandas.DataFrame
            The trace file or table.
        **options
            Keyword arguments of :func:`~queuetheory.workload.traces.read_trace`.

        Returns
        -------
        Trace
            The recorded requests, the first arriving at 0.

        Raises
        ------
        ValueError
            As :func:`~queuetheory.workload.traces.read_trace`.
        """
        from .traces import read_trace

        return read_trace(source, **options)

    @classmethod
    def from_lengths(cls, prompt, output, *, rate=None, load=None, time_model=None,
                     token_budget=None, arrivals="poisson", predictor=None, name=None):
        """One class of requests with real lengths, arriving at ``rate`` or at a target ``load``.

        ``prompt`` and ``output`` are paired samples (e.g. :func:`queuetheory.data.
        sharegpt_lengths`), drawn together so that their correlation is kept, or any length
        laws :class:`RequestClass` accepts. With ``load`` the rate is
        ``load / time_model.full_batch_time(m_p, m_d, token_budget)``: the fraction of the
        saturated engine's capacity (Li, Dai, Peng, eq. 2.7: ``λ (m_p + m_d) t_b / b``).

        Parameters
        ----------
        prompt : array_like of int, int or frozen scipy.stats distribution
            Prompt lengths ``l_j`` in tokens: samples paired with ``output``, or a length law.
        output : array_like of int, int or frozen scipy.stats distribution
            Output lengths ``l'_j`` in tokens, paired with ``prompt`` when both are samples.
        rate : float, optional
            Arrival rate ``λ`` per time unit; give this or ``load``.
        load : float, optional
            Target load ``ρ = λ (m_p + m_d) t_b / b`` (> 0; 1 saturates the engine).
        time_model : TimeModel, optional
            The batch time model whose ``full_batch_time`` gives the capacity; required with
            ``load``.
        token_budget : int, optional
            The token budget ``b`` per batch; required with ``load``.
        arrivals : str or TimeVarying, default "poisson"
            The arrival process (see :class:`Workload`).
        predictor : callable, optional
            The output-interval predictor (see :class:`Workload`).
        name : str, optional
            The class's label.

        Returns
        -------
        Workload
            One class at the given or computed rate.

        Raises
        ------
        ValueError
            If neither or both of ``rate`` and ``load`` are given, paired samples differ in
            shape, ``load`` or ``token_budget`` is not positive, ``load`` comes without
            ``time_model`` and ``token_budget``, the time model has no full-batch capacity,
            or a length law or the rate is invalid.
        """
        if (rate is None) == (load is None):
            raise ValueError(f"rate={rate!r}, load={load!r}: give exactly one of them")
        paired = not (isinstance(prompt, int | np.integer) or _is_frozen_distribution(prompt)
                      or isinstance(output, int | np.integer) or _is_frozen_distribution(output))
        if paired:
            prompt, output = np.asarray(prompt), np.asarray(output)
            if prompt.shape != output.shape:
                raise ValueError(f"prompt, output: paired samples need equal shapes, got "
                                 f"{prompt.shape} and {output.shape}")
            make = RequestClass.from_samples
        else:
            make = RequestClass
        if load is not None:
            check_positive("load", load)
            if time_model is None or token_budget is None:
                raise ValueError("load: a target load needs time_model and token_budget")
            check_positive("token_budget", token_budget, integer=True)
            probe = make(prompt, output, 1.0)
            try:
                per_request = time_model.full_batch_time(probe.mean_prompt, probe.mean_output,
                                                         int(token_budget))
            except TypeError as err:
                raise ValueError(f"time_model={time_model!r}: no full-batch capacity ({err}); "
                                 "give rate instead of load") from None
            rate = float(load) / per_request
        return cls([make(prompt, output, rate, name=name)], arrivals=arrivals,
                   predictor=predictor)

    def sample(self, *, horizon: float | None = None, n_requests: int | None = None,
               seed=0) -> Trace:
        """Draw requests arriving in ``[0, horizon]`` and/or the first ``n_requests`` (a
        recorded trace is replayed whole when neither is given).

        Parameters
        ----------
        horizon : float, optional
            The end of the arrival window, in time units (> 0).
        n_requests : int, optional
            The most requests to keep (≥ 0, at most :data:`MAX_REQUESTS`).
        seed : int or numpy.random.Generator, default 0
            Seed of the draw (unused for a recorded trace).

        Returns
        -------
        Trace
            The requests in arrival order, with their predicted intervals.

        Raises
        ------
        ValueError
            If neither ``horizon`` nor ``n_requests`` is given for a sampled workload, either
            is invalid, the total rate is 0 with ``n_requests``, the draw would exceed
            :data:`MAX_REQUESTS`, or a ``TimeVarying`` multiplier leaves ``[0, peak]``.
        """
        if horizon is None and n_requests is None and self._trace is None:
            raise ValueError("sample: give horizon or n_requests (or both)")
        if horizon is not None:
            check_positive("horizon", horizon)
        if n_requests is not None:
            check_positive("n_requests", n_requests, allow_zero=True, integer=True)
            if n_requests > MAX_REQUESTS:
                raise ValueError(f"n_requests={n_requests}: more than MAX_REQUESTS = "
                                 f"{MAX_REQUESTS:,} (about {_gigabytes(n_requests)} once "
                                 "simulated)")
        if self._trace is not None:
            tr = self._trace
            if horizon is not None:
                tr = tr.until(horizon)
            return tr if n_requests is None else tr.head(int(n_requests))
        rng = np.random.default_rng(seed)
        if horizon is None and n_requests == 0:
            return self._sample_until(rng, 0.0).head(0)
        if horizon is None:
            # enough horizon for n_requests with overwhelming probability, then cut
            lam = self.total_rate
            if lam <= 0:
                raise ValueError("rate: the total arrival rate is 0; n_requests is never reached")
            span = (n_requests + 10 * np.sqrt(n_requests) + 20) / lam
            if isinstance(self.arrivals, TimeVarying):
                span /= max(1e-12, float(np.min(self.arrivals.multiplier(np.array([0.0])))))
            tr = self._sample_until(rng, span, "n_requests", n_requests)
            while len(tr) < n_requests:
                span *= 2
                tr = self._sample_until(rng, span, "n_requests", n_requests)
            return tr.head(int(n_requests))
        tr = self._sample_until(rng, horizon, "horizon", horizon)
        return tr if n_requests is None else tr.head(int(n_requests))

    def _arrival_times(self, rng, j: int, horizon: float) -> np.ndarray:
        lam = self.classes[j].rate
        if lam == 0:
            return np.empty(0)
        a = self.arrivals
        if a == "poisson":
            n = rng.poisson(lam * horizon)
            return np.sort(rng.uniform(0.0, horizon, n))
        if a == "deterministic":
            return np.arange(1, int(np.floor(lam * horizon)) + 1) / lam
        slots = np.arange(int(np.floor(horizon / self.slot)) + 1) * self.slot
        if a == "bernoulli":
            return slots[rng.random(slots.size) < lam * self.slot]
        if a == "poisson-slot":
            return np.repeat(slots, rng.poisson(lam * self.slot, slots.size))
        # TimeVarying: thinning of a Poisson(λ_j · peak) process
        n = rng.poisson(lam * a.peak * horizon)
        t = np.sort(rng.uniform(0.0, horizon, n))
        m = np.broadcast_to(np.asarray(a.multiplier(t), dtype=float).T, (len(self.classes), n))
        mj = m[j] if m.ndim == 2 else m
        if np.any(mj > a.peak * (1 + 1e-12)) or np.any(mj < 0):
            raise ValueError(f"TimeVarying: multiplier leaves [0, peak={a.peak}]")
        return t[rng.random(n) * a.peak < mj]

    def expected_draws(self, horizon: float) -> float:
        """How many values drawing arrivals over ``[0, horizon]`` takes, in expectation:
        ``Σ_j λ_j × horizon`` requests (``× peak`` candidates for thinned arrivals), or the
        number of slots for slotted arrivals if larger.

        Parameters
        ----------
        horizon : float
            The end of the arrival window, in time units.

        Returns
        -------
        float
            The expected number of draws.
        """
        lam = self.total_rate
        if isinstance(self.arrivals, TimeVarying):
            return lam * self.arrivals.peak * horizon
        if self.arrivals in ("bernoulli", "poisson-slot"):
            slots = horizon / self.slot + 1
            return max(lam * self.slot * slots, slots)
        return lam * horizon

    def _sample_until(self, rng, horizon: float, name="horizon", value=None) -> Trace:
        draws = self.expected_draws(horizon)
        if not draws <= MAX_REQUESTS:
            raise ValueError(
                f"{name}={value if value is not None else horizon!r}: about {draws:.3g} "
                f"requests (or arrival slots) to draw (total rate {self.total_rate:.4g} over "
                f"{horizon:.4g} time units), more than MAX_REQUESTS = {MAX_REQUESTS:,} (about "
                f"{_gigabytes(draws)} once simulated); shorten the horizon or raise the rates")
        parts = []
        for j, c in enumerate(self.classes):
            t = self._arrival_times(rng, j, horizon)
            p, o = c.sample_lengths(rng, t.size)
            parts.append((t, p, o, np.full(t.size, j, np.int64), np.full(t.size, c.priority)))
        arrival, prompt, output, cls, pr = (np.concatenate(x) for x in zip(*parts, strict=True))
        order = np.argsort(arrival, kind="stable")
        arrival, prompt, output, cls, pr = (x[order] for x in (arrival, prompt, output, cls, pr))
        lo, hi = self.predictor(rng, output, cls)
        return Trace(arrival, prompt, output, cls, np.asarray(lo, np.int64),
                     np.asarray(hi, np.int64), pr.astype(np.int64))

    def __repr__(self) -> str:
        return (f"Workload({len(self.classes)} classes, arrivals={self.arrivals!r}, "
                f"λ={self.total_rate:.4g})")
