"""``simulate()``: one engine, one workload, one policy, one time model."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import CensoredRunWarning, check_positive, check_seed
from ..timing import TimeModel
from ..workload import Trace, Workload
from .conventions import check_first_token
from .core import Engine
from .kernels import bulk_runner
from .log import ColumnLog, TBTHistogram
from .server import as_server
from .state import RequestTable

__all__ = ["simulate", "Result"]


@dataclass(eq=False)
class Result:
    """The records of one run of :func:`simulate`, not the engine that made them.

    ``requests``, ``batches``, ``paths`` (DataFrames) and ``metrics`` (a dict) are read from
    the records. ``engine`` (deprecated) is the engine of the run, kept for one release.

    Attributes
    ----------
    trace : Trace
        The :class:`~queuetheory.workload.Trace` that arrived.
    horizon : float
        The time after which no batch started (``inf`` for a run that drains).
    end_time : float
        The time the run ended.
    policy : Policy
        The scheduler that ran.
    time_model : TimeModel
        The batch-time model it ran on.
    warmup : float
        The time before which :attr:`metrics` discards requests and tokens.
    table : RequestTable
        The request table (:class:`~queuetheory.engine.RequestTable`): one array per
        field, indexed by request id; :attr:`requests` is its frame.
    log : ColumnLog
        The batch log (:class:`~queuetheory.engine.log.ColumnLog`), one row per
        iteration; :attr:`batches` is its frame, :attr:`paths` its queue paths.
    tbt : TBTHistogram
        The token-level time-between-tokens histogram per class
        (:class:`~queuetheory.engine.log.TBTHistogram`: ``counts``, ``quantile``).
    iterations : int
        Batches run.
    admitted : int
        Requests admitted into the engine (the first ``admitted`` rows of ``table``).
    live : numpy.ndarray
        Ids of the requests still in the system at ``end_time``.
    work_left : int
        Their unprocessed prompt and output tokens, ``|X(n)|``.
    kv_left : int
        Their resident KV tokens.
    peak_memory : int
        The largest KV cache held at once, in tokens.
    _engine : Engine or None
        The engine of the run, behind the deprecated :attr:`engine` (``None``: records
        alone).
    """

    trace: Trace
    horizon: float
    end_time: float
    policy: object
    time_model: TimeModel
    warmup: float
    table: RequestTable
    log: ColumnLog
    tbt: TBTHistogram
    iterations: int
    admitted: int
    live: np.ndarray
    work_left: int
    kv_left: int
    peak_memory: int
    _engine: Engine | None = field(default=None, repr=False)

    @classmethod
    def of_engine(cls, engine: Engine, trace: Trace, horizon: float, end_time: float,
                  warmup: float = 0.0) -> Result:
        """The records of a finished run of ``engine``.

        Parameters
        ----------
        engine : Engine
            The :class:`~queuetheory.engine.Engine` that ran.
        trace : Trace
            What arrived.
        horizon : float
            The run's horizon (``inf``: it drained).
        end_time : float
            The time the run ended.
        warmup : float, default 0.0
            The start of the steady-state window of :attr:`metrics`.

        Returns
        -------
        Result
            The engine's records (its request table, batch log and TBT histogram, shared,
            not copied) and its end state.
        """
        return cls(trace, float(horizon), float(end_time), engine.policy, engine.time_model,
                   float(warmup), engine.table, engine.log, engine.tbt, int(engine.iteration),
                   int(engine._pending), engine.live.copy(), int(engine.work),
                   int(engine.kv_total), int(engine.peak_memory), engine)

    @property
    def engine(self) -> Engine:
        """The engine of the run (deprecated: read the records, ``table``, ``log``, ``tbt``,
        ``iterations``, ``live``, ``work_left``, ``kv_left``, ``peak_memory``).

        Returns
        -------
        Engine
            The engine that ran, kept for one release.

        Raises
        ------
        AttributeError
            When the result holds no engine (built from records alone).
        """
        warnings.warn("Result.engine is deprecated and goes in the next release: read the "
                      "records (res.table, res.log, res.tbt, res.iterations, res.live, "
                      "res.work_left, res.kv_left, res.peak_memory)", DeprecationWarning,
                      stacklevel=2)
        if self._engine is None:
            raise AttributeError("this Result holds records only, no engine")
        return self._engine

    @property
    def requests(self) -> pd.DataFrame:
        """One row per request that arrived: lengths, interval, time stamps, restarts."""
        t = self.table
        n = t.n
        df = pd.DataFrame({f: t.column(f) for f in (
            "arrival", "prompt", "output", "cls", "lo", "hi", "priority", "prefilled",
            "decoded", "recomputed", "restarts", "cached", "prefill_done", "first_token",
            "finish", "tbt_max")})
        admitted = np.zeros(n, dtype=bool)
        admitted[: self.admitted] = True
        df["admitted"] = admitted
        df["latency"] = df["finish"] - df["arrival"]
        df["ttft"] = df["first_token"] - df["arrival"]
        gaps, gap_time = t.timed_gaps()
        df["tbt_mean"] = np.where(gaps > 0, gap_time / np.maximum(gaps, 1), np.nan)
        df.index.name = "rid"
        return df

    @property
    def batches(self) -> pd.DataFrame:
        """One row per iteration: start, duration, composition, memory after, queue sizes."""
        return self.log.frame()

    @property
    def paths(self) -> pd.DataFrame:
        """Queue length, unfinished tokens and memory at the end of every iteration."""
        log = self.log
        return pd.DataFrame({
            "time": log.column("start") + log.column("duration"),
            "in_system": log.column("in_system"),
            "unfinished_tokens": log.column("unfinished_tokens"),
            "memory": log.column("memory"),
        })

    @property
    def metrics(self) -> dict:
        """:func:`~queuetheory.metrics.summarize` of the run: with ``warmup``, throughput,
        latency, TTFT and the number in system are those of the steady-state window
        ``[warmup, end]`` (:meth:`window`); ``arrived``, ``completed`` and ``unfinished``
        always count the whole run."""
        from ..metrics import summarize

        if self.warmup > self.end_time:
            raise ValueError(f"warmup={self.warmup:g}: past the end of the run at "
                             f"{self.end_time:g}; no steady-state window is left")
        return summarize(self, start=self.warmup)

    def window(self, t0: float, t1: float | None = None) -> dict:
        """Figures of the window ``[t0, t1]`` (default: to the end): latency and TTFT of
        the requests that arrived in it, output tokens emitted in it per unit time, the
        time-average number in system over it (:func:`~queuetheory.metrics.window`).

        Parameters
        ----------
        t0 : float
            The window's start.
        t1 : float, optional
            The window's end; ``None``: the end of the run.

        Returns
        -------
        dict
            The window's figures, as :func:`~queuetheory.metrics.window` gives them.
        """
        from ..metrics import window

        return window(self, t0, t1)


def simulate(workload, policy, time_model, *, memory=None, token_budget=None, horizon=None,
             n_requests=None, seed=0, max_iterations=None, progress=False,
             first_token=None, fast_path=True, warmup: float = 0.0) -> Result:
    """Run ``policy`` on ``workload`` with batch durations from ``time_model``.

    A policy that cannot build feasible batches with this ``memory`` and ``first_token``
    (:meth:`Policy.supports`), or that has no token budget when one below ``memory`` is
    given (``Policy.no_token_budget``: the round models), is refused with
    :class:`UnsupportedSettingError` before the run starts (:meth:`Server.check`). A run that
    ends with requests unfinished — any, when it should drain (no ``horizon``), or more than
    1 % of the arrivals at the horizon — warns :class:`CensoredRunWarning`, saying how many and why.

    Parameters
    ----------
    workload : Workload or Trace
        What arrives: a workload to draw from, or a trace to replay (cut at ``horizon`` and
        to ``n_requests``).
    policy : Policy
        The :class:`~queuetheory.policies.Policy` that builds every batch.
    time_model : TimeModel or Server
        A :class:`~queuetheory.timing.TimeModel`, or a whole
        :class:`~queuetheory.engine.Server` (then ``memory``, ``token_budget`` and
        ``first_token`` are its own, and giving one again must agree).
    memory : int, optional
        KV-cache capacity ``M`` in tokens (``None``: unlimited).
    token_budget : int, optional
        The engine's per-batch token limit ``b`` (``None``: the policy's own).
    horizon : float, optional
        Stop starting batches at this time; arrivals are drawn up to it (``None``: the run
        drains every request).
    n_requests : int, optional
        Number of requests to draw; without a horizon the run drains them all.
    seed : int, default 0
        Seeds the workload's random draws and the policy's.
    max_iterations : int, optional
        Hard cap on the number of batches.
    progress : bool, default False
        Show a tqdm progress bar: simulated time against ``horizon`` when one is
        given, else requests completed against the number drawn, each with its ETA (the
        bulk rule of FCFS Sarathi reports once, at the end).
    first_token : {"prefill", "decode"}, optional
        ``"prefill"`` (the default, the real engines': the prefill iteration emits the
        first output token, which the output length counts) or ``"decode"`` (Li, Dai, Peng's
        model: every output token takes a decode iteration); see
        :mod:`~queuetheory.engine.conventions`.
    fast_path : bool, default True
        Run a policy's decision rule in bulk where it has one
        (:meth:`~queuetheory.policies.Policy.bulk`) and repeat steady decode-only batches
        in closed form (:meth:`Engine.advance`); the records are the same as with
        ``fast_path=False``, which decides every iteration.
    warmup : float, default 0.0
        The time before which ``metrics`` discards requests and tokens (steady-state
        figures; see :meth:`Result.window`).

    Returns
    -------
    Result
        The run's records: the request table, the batch log, the TBT histogram and the
        end state.

    Raises
    ------
    UnsupportedSettingError
        For a policy that cannot run with these settings (:meth:`Server.check`).
    ValueError
        For a ``policy`` that is no policy, a ``workload`` that is neither a
        :class:`~queuetheory.workload.Workload` nor a :class:`~queuetheory.workload.Trace`,
        a ``token_budget`` below the policy's own, a setting that is not a positive integer
        (``token_budget``, ``max_iterations``), a negative ``warmup`` or one at or past the
        horizon, a bad ``seed`` or ``first_token``, a setting that contradicts a
        :class:`Server`'s, or a ``memory`` smaller than some request's KV peak.
    InfeasibleBatchError
        When the policy builds a batch that breaks a rule (:func:`check_batch`).
    RuntimeError
        When the policy idles and asks to wait until a time that is not in the future.

    Warns
    -----
    CensoredRunWarning
        When the run ends with requests unfinished (see above).
    """
    server = as_server(time_model, token_budget=token_budget, memory=memory,
                       first_token=first_token)
    time_model, memory, first_token = server.time_model, server.memory, server.first_token
    if not hasattr(policy, "schedule"):
        raise ValueError(f"policy={policy!r}: must be a queuetheory Policy")
    own = getattr(policy, "token_budget", None)
    budget = server.budget_for(policy)
    if budget is not None:
        check_positive("token_budget", budget, integer=True)
    if server.token_budget is not None and own is not None and server.token_budget < own:
        raise ValueError(f"token_budget={server.token_budget}: below the policy's own budget "
                         f"{own}, which its batches fill; build the policy with the smaller "
                         "budget")
    if max_iterations is not None:
        check_positive("max_iterations", max_iterations, integer=True)
    emit_first = check_first_token(first_token) == "prefill"
    check_positive("warmup", warmup, allow_zero=True)
    check_seed(seed)
    if horizon is not None and warmup >= horizon:
        raise ValueError(f"warmup={warmup!r}: at or past the horizon {horizon!r}; no "
                         "steady-state window is left")
    server.check(policy)
    if isinstance(workload, Trace):
        trace = workload
        if horizon is not None:
            trace = trace.until(horizon)
        if n_requests is not None:
            trace = trace.head(n_requests)
    elif isinstance(workload, Workload):
        trace = workload.sample(horizon=horizon, n_requests=n_requests, seed=seed)
    else:
        raise ValueError(f"workload={workload!r}: must be a Workload or a Trace")
    if memory is not None and len(trace):
        peak = trace.prompt + trace.output - int(emit_first)
        worst = int(np.argmax(peak))
        if peak[worst] > memory:
            raise ValueError(
                f"memory={memory}: smaller than the KV peak {int(peak[worst])} of request "
                f"{worst} (prompt {int(trace.prompt[worst])} + output {int(trace.output[worst])}); "
                "it could never finish")
    n_classes = int(trace.cls.max()) + 1 if len(trace) else 1
    engine = Engine(policy, time_model, memory=memory, token_budget=budget, first_token=first_token,
                    n_classes=n_classes, capacity=max(16, len(trace)))
    engine.load(trace, final=horizon is None)
    policy.reset(seed=seed)
    stop = np.inf if horizon is None else float(horizon)
    limit = np.inf if max_iterations is None else int(max_iterations)
    t = 0.0 if not len(trace) else min(0.0, float(trace.arrival[0]))
    bar = _Progress(engine, horizon, len(trace)) if progress else None
    bulk = bulk_runner(engine, policy) if fast_path else None
    if bulk is not None:
        t = bulk(t, stop, limit)
    t = _step_by_step(engine, policy, t, stop, limit, fast_path, bar)
    if bar is not None:
        bar.close(t)
    result = Result.of_engine(engine, trace, stop, t, warmup)
    _warn_if_censored(result, stop, limit)
    return result


def _warn_if_censored(result, stop, limit) -> None:
    """:class:`CensoredRunWarning` when requests are left unfinished: any in a run that
    should drain (no horizon), over 1 % of the arrivals when a horizon cut the run."""
    table = result.table
    arrived = int(np.searchsorted(table.column("arrival"), result.end_time, side="right"))
    left = arrived - int(np.count_nonzero(~np.isnan(table.column("finish"))))
    if left <= 0:
        return
    if result.iterations >= limit:
        why = f"max_iterations={int(limit)} stopped the run"
    elif result.end_time >= stop:
        if left <= 0.01 * arrived:
            return
        why = f"the horizon {stop:g} cut the run"
    else:
        why = (f"{result.policy!r} idled with work waiting at t = {result.end_time:g} and no "
               "request left to arrive")
    warnings.warn(f"{left} of {arrived} requests ({100 * left / max(arrived, 1):.1f} %) are "
                  f"unfinished: {why}; metrics over completed requests leave them out "
                  "(metrics['unfinished'])", CensoredRunWarning, stacklevel=3)


def _step_by_step(engine, policy, t, stop, limit, fast_path, bar) -> float:
    """Admit arrivals and let the policy decide, up to the horizon or iteration cap."""
    most = 1
    nxt = engine.next_arrival()
    while t < stop and engine.iteration < limit:
        if t >= nxt:
            engine.admit_until(t)
            nxt = engine.next_arrival()
        if engine.live.size == 0:
            if nxt == np.inf:
                break
            t = nxt
            continue
        if fast_path:
            most = limit - engine.iteration if limit < np.inf else 1 << 62
        out = engine.advance(t, min(nxt, stop), most, horizon=stop)
        if isinstance(out, tuple):
            t = out[0]
        else:
            if fast_path and out.until == np.inf and policy.idles_through(engine.state(t)):
                # it idles at every arrival to come: admitted as stepping would, unasked
                last = engine.admit_before(stop)
                nxt = engine.next_arrival()
                t = nxt if nxt < np.inf else t if last is None else last
                if bar is not None:
                    bar.update(t)
                break
            wait = nxt if out.until is None else min(out.until, nxt)
            if wait == np.inf:
                break           # the policy idles and nothing else will arrive
            if wait <= t:
                raise RuntimeError(f"{policy!r} idled but asked to wait until {wait} <= now {t}")
            t = wait
        if bar is not None:
            bar.update(t)
    return t


class _Progress:
    """A tqdm bar with a total: simulated time up to the horizon, else requests completed."""

    def __init__(self, engine, horizon, n_requests: int):
        from tqdm.auto import tqdm

        self.engine, self.horizon = engine, horizon
        if horizon is not None:
            self.bar = tqdm(total=float(horizon), desc="simulated time", unit="time unit",
                            unit_scale=True)
        else:
            self.bar = tqdm(total=n_requests, desc="requests completed", unit="request")

    def update(self, t: float) -> None:
        if self.horizon is not None:
            done = min(float(t), float(self.horizon))
        else:
            done = self.engine._pending - self.engine.live.size
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def close(self, t: float) -> None:
        self.update(t)
        self.bar.close()
