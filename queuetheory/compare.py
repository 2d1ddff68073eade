"""The cross-paper comparison: every scheduler on the same workload, time model and memory.

A scheduler is one entry ``(name, factory, needs)``: ``factory(setting)`` builds a fresh
policy from a :class:`Setting` (token budget, KV memory, time model, workload, load), and
``needs`` says what it must know beyond what a real engine sees — ``"none"``, ``"output
lengths"`` (exact, Jaillet et al.'s MC-SF), ``"intervals"`` (``[lo, hi]``, Chen et al.), ``"class
rates"`` (Ao et al.'s WAIT thresholds), ... The table shows it beside the figures, so a
scheduler that knows more is never compared silently with one that knows less.

Adding a scheduler is one line in a list::

    schedulers = CLASSIC + [("Sarathi SPF", Budgeted(Sarathi, order="sjf_prompt"), "none")]

Every (scheduler, load, seed) run is one :func:`queuetheory.sweep` point; the table reports
the mean over seeds with a 95 % interval that never leaves the metric's range (see
:attr:`Comparison.table`), and each row's completion ratio: latency figures average over the
completed requests only, so a row whose runs left more than 1 % unfinished is marked.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ._argparse import OneLineParser, time_model_option
from .engine import simulate
from .errors import CensoredRunWarning
from .policies import FasterTransformer, Orca, Sarathi, VLLMVanilla
from .stability import growth_rate
from .sweep import sweep
from .timing import AffineTokenTime, TimeModel
from .workload import Workload, with_rate

__all__ = ["Scheduler", "Setting", "Budgeted", "Plain", "NestedWAITFactory", "CLASSIC",
           "paper_schedulers", "METRICS", "Comparison", "compare", "compare_main", "ANCHOR_TIME",
           "MIN_SEEDS", "UNFINISHED_MARK"]

#: Seeds a point needs before the table gives it an interval.
MIN_SEEDS = 5
#: A row whose runs left more than this share of their requests unfinished is marked.
UNFINISHED_MARK = 0.01

ANCHOR_TIME = AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)

METRICS = {
    "throughput": "output tokens / s",
    "mean_latency": "mean latency (s)",
    "p99_latency": "P99 latency (s)",
    "mean_ttft": "mean TTFT (s)",
    "p99_ttft": "P99 TTFT (s)",
    "p99_tbt": "P99 TBT (s)",
    "peak_memory": "peak KV memory (tokens)",
    "restarts": "restarts (evictions)",
}


@dataclass(frozen=True)
class Setting:
    """What a scheduler factory may read to build its policy for one run.

    Attributes
    ----------
    token_budget : int
        The engine's token budget ``b`` per iteration.
    memory : int or None
        The KV-cache capacity ``M``, in tokens (``None``: unlimited).
    time_model : TimeModel
        The batch-time model.
    workload : Workload
        The run's workload.
    load : float
        The offered load, a fraction of the full-batch capacity.
    """

    token_budget: int
    memory: int | None
    time_model: TimeModel
    workload: Workload
    load: float


@dataclass(frozen=True)
class Scheduler:
    """One comparison entry: a name, ``factory(setting) -> Policy``, what it needs to know.

    Attributes
    ----------
    name : str
        The scheduler's name in the table (unique within a comparison).
    factory : callable
        ``factory(setting) -> Policy``, called with a :class:`Setting` per run.
    needs : str, default "none"
        What it needs to know (exact lengths, intervals, ...), shown in the table.
    """

    name: str
    factory: object
    needs: str = "none"


@dataclass(frozen=True)
class Plain:  # numpydoc drops a first parameter named cls: numpydoc ignore=PR02
    """Factory ``setting -> cls(**kwargs)`` (picklable, so process pools can run it).

    Parameters
    ----------
    cls : type
        The policy class.
    **kwargs
        Its keyword arguments.
    """

    cls: type
    kwargs: dict = field(default_factory=dict)

    def __init__(self, cls, **kwargs):
        object.__setattr__(self, "cls", cls)
        object.__setattr__(self, "kwargs", kwargs)

    def __call__(self, setting: Setting):
        return self.cls(*self._args(setting), **self.kwargs)

    def _args(self, setting: Setting) -> tuple:
        return ()


class Budgeted(Plain):  # as Plain: numpydoc ignore=PR02
    """Factory ``setting -> cls(setting.token_budget, **kwargs)``.

    Parameters
    ----------
    cls : type
        The policy class; its first argument is the token budget.
    **kwargs
        Its other keyword arguments.
    """

    def _args(self, setting: Setting) -> tuple:
        return (setting.token_budget,)


CLASSIC = [
    Scheduler("vLLM", Budgeted(VLLMVanilla)),
    Scheduler("Orca", Budgeted(Orca)),
    Scheduler("Sarathi", Budgeted(Sarathi)),
    Scheduler("FasterTransformer", Budgeted(FasterTransformer)),
]


@dataclass(frozen=True)
class NestedWAITFactory:
    """Nested WAIT (Ao et al., Alg. 2) for a workload of unknown types: the output-length law
    is cut into ``segments`` groups of consecutive lengths (§7.2) and the thresholds follow
    the paper's batch-limit rule with ``B`` = the token budget; the memory gate keeps every
    batch within ``M``.

    Attributes
    ----------
    segments : int, default 4
        The most segments of the output-length law.
    """

    segments: int = 4

    def __call__(self, setting: Setting):
        from .fluid.nested import nested_thresholds, segment_design
        from .policies import NestedWAIT

        (cls,) = setting.workload.classes
        values, probs = cls.output_pmf()
        seg = segment_design(max(1, round(cls.mean_prompt)), values, probs * cls.rate,
                             min(self.segments, values.size))
        # the batch-limit rule reads only the segments; d0 and d1 enter the other rules
        n = nested_thresholds(seg, 1.0, 0.0, rule="tail_sum", batch_limit=setting.token_budget)
        return NestedWAIT(seg, n, overflow="gate" if setting.memory is not None else "soft")


def paper_schedulers() -> list[Scheduler]:
    """The schedulers of the five papers that fit one engine with a token budget and a KV
    memory, with what each needs to know. WAIT (Ao et al., Alg. 1) needs a finite set of
    known types and is left out of a workload of real lengths; Nested WAIT stands for it.
    RAD is left out too: its model has no KV memory, and on this engine it
    overflows ``M`` (the engine raises ``InfeasibleBatchError``), so it only runs with
    ``memory=None``.

    Returns
    -------
    list of Scheduler
        :data:`CLASSIC`, then Nested WAIT, MC-SF, A_max, A_min and SLAI.
    """
    from .policies import MCSF, SLAI, AMax, AMin

    return CLASSIC + [
        Scheduler("Nested WAIT", NestedWAITFactory(),
                  "output-length law (segments); no token budget"),
        Scheduler("MC-SF", Plain(MCSF), "exact output lengths; no token budget"),
        Scheduler("A_max", Plain(AMax), "intervals [lo, hi]; no token budget"),
        Scheduler("A_min", Plain(AMin, evict_key="dynamic"),
                  "intervals [lo, hi]; no token budget"),
        Scheduler("SLAI", Budgeted(SLAI), "none"),
    ]


def _as_scheduler(entry) -> Scheduler:
    if isinstance(entry, Scheduler):
        return entry
    if isinstance(entry, tuple) and len(entry) in (2, 3):
        return Scheduler(*entry)
    raise ValueError(f"scheduler {entry!r}: expected Scheduler or (name, factory, needs)")


def _default_lengths(max_total: int):
    from .data import sharegpt_lengths

    prompt, output = sharegpt_lengths(tokenizer="words")
    keep = prompt + output <= max_total
    return prompt[keep], output[keep]


@dataclass
class _Run:
    """One (scheduler, load, seed) simulation: picklable, so any executor can run it."""

    schedulers: list
    lengths: tuple
    time_model: TimeModel
    token_budget: int
    memory: int | None
    n_requests: int
    predictor: object
    trace: object = None

    def workload(self, load):
        return Workload.from_lengths(*self.lengths, load=load, time_model=self.time_model,
                                     token_budget=self.token_budget, predictor=self.predictor)

    def __call__(self, scheduler, load, seed):
        entry = next(s for s in self.schedulers if s.name == scheduler)
        wl = self.workload(load)
        setting = Setting(self.token_budget, self.memory, self.time_model, wl, load)
        # a trace keeps its own arrivals, rescaled to the load's mean rate (burstiness kept)
        runs_on = wl if self.trace is None else with_rate(self.trace, wl.total_rate)
        # the engine enforces a scheduler's own token budget; the round-based schedulers of
        # Ao et al., Jaillet et al. and Chen, Ye, Zhou have none and prefill whole prompts
        with warnings.catch_warnings():     # the table marks runs that left work unfinished
            warnings.simplefilter("ignore", CensoredRunWarning)
            res = simulate(runs_on, entry.factory(setting), self.time_model, memory=self.memory,
                           n_requests=self.n_requests, seed=seed)
        m = res.metrics
        return {**{k: m[k] for k in (*METRICS, "arrived", "completed", "unfinished",
                                     "iterations", "time")}, "backlog": _backlog(res)}


def _backlog(res) -> str:
    """How the run's backlog behaved over its arrivals' window (a drained run's drain
    always shrinks; :func:`~queuetheory.stability.growth_rate`): ``"grows"`` when both tests'
    lower bounds lie above the tolerance (it surely grows faster than 3 % of the offered
    work: the scheduler is unstable at this load; a stable queue's fill-up from empty
    rarely clears both), ``"steady"`` when the verdict is ``stable``, else ``"unclear"``
    (a longer run decides); ``"too-short"`` for too few iterations to test."""
    try:
        g = growth_rate(res)
    except ValueError:
        return "too-short"
    if g.verdict == "stable":
        return "steady"
    return "grows" if min(g.ci_low, g.trend_low) > g.tolerance else "unclear"


def _pooled_backlog(values) -> str:
    """One word for a point's seeds: ``grows`` when at least half of them grow, ``steady``
    when all are steady, else ``unclear`` (older records without one: ``""``)."""
    v = [x for x in values if isinstance(x, str)]
    if not v:
        return ""
    if 2 * v.count("grows") >= len(v):
        return "grows"
    return "steady" if all(x == "steady" for x in v) else "unclear"


@dataclass
class Comparison:
    """Per-run records (``runs``), the summary ``table`` and one figure per metric.

    Attributes
    ----------
    runs : pandas.DataFrame
        One row per (scheduler, load, seed): the metrics of :data:`METRICS`, ``arrived``,
        ``completed`` and the backlog's behaviour.
    needs : dict
        ``{scheduler: what it needs to know}``.
    level : float, default 0.95
        The intervals' confidence level.
    memory : int or None, default None
        The KV capacity ``M`` every scheduler ran with (tokens).
    """

    runs: pd.DataFrame
    needs: dict
    level: float = 0.95
    memory: int | None = None       # the KV capacity M every scheduler ran with (tokens)

    @property
    def table(self) -> pd.DataFrame:
        """Per scheduler and load: the mean over seeds of every metric with its interval
        ``{metric}_lo``, ``{metric}_hi`` at ``level``, and

        * ``completion``: completed / arrived requests, over all seeds; ``note`` marks a
          row whose runs left more than :data:`UNFINISHED_MARK` of them unfinished (its
          latency figures leave them out) and says when a point has no interval;
        * ``backlog``: ``grows``, ``steady`` or ``unclear``, how the seeds' backlogs
          behaved over the arrivals' window (:func:`_backlog`; ``grows`` when at least half
          the seeds' surely grow). Every run drains its requests, so an unstable scheduler
          completes them all, late: its latency grows with ``n_requests`` and is no steady
          state, which ``note`` says;
        * intervals only from :data:`MIN_SEEDS` seeds or more (else NaN, and ``note`` says
          so). Every metric here is non-negative, so the interval is Student's t on the log
          scale (delta method: ``mean · exp(± t·se/mean)``), which never crosses 0 and is
          the t-interval to first order; a metric that is 0 on every seed gets ``[0, 0]``.
        """
        g = self.runs.groupby(["scheduler", "load"], sort=False)
        out = g[list(METRICS)].mean()
        for m in METRICS:
            bounds = g[m].agg(lambda x: self._interval(np.asarray(x, float)))
            out[f"{m}_lo"] = [b[0] for b in bounds]
            out[f"{m}_hi"] = [b[1] for b in bounds]
        out = out[[c for m in METRICS for c in (m, f"{m}_lo", f"{m}_hi")]]
        seeds = g.size().to_numpy()
        arrived = g["arrived"].sum().to_numpy() if "arrived" in self.runs else None
        completed = g["completed"].sum().to_numpy()
        completion = completed / arrived if arrived is not None else np.full(len(out), np.nan)
        verdicts = (g["backlog"].agg(_pooled_backlog).to_numpy() if "backlog" in self.runs
                    else np.full(len(out), ""))
        notes = []
        for k, c, v in zip(seeds, completion, verdicts, strict=True):
            parts = []
            if v == "grows":
                parts.append("! unstable: the backlog grows over the arrivals; latency grows "
                             "with the run's length, no steady state")
            if c < 1 - UNFINISHED_MARK:
                parts.append(f"! {100 * (1 - c):.1f} % unfinished: latency over completed only")
            if k < MIN_SEEDS:
                parts.append(f"no interval: {k} seed{'' if k == 1 else 's'} (< {MIN_SEEDS})")
            notes.append("; ".join(parts))
        out.insert(0, "needs", [self.needs[s] for s, _ in out.index])
        out.insert(1, "seeds", seeds)
        out.insert(2, "completion", completion)
        out.insert(3, "backlog", verdicts)
        out.insert(4, "note", notes)
        return out

    def summary(self) -> pd.DataFrame:
        """The table as a reader wants it printed: per scheduler and load, the backlog,
        the completion, and every metric as ``mean [lo, hi]`` (the mean alone where there is
        no interval) under a header with its unit; the needs and notes last.

        Returns
        -------
        pandas.DataFrame
            Indexed by scheduler and load; strings, ready to print.
        """
        table = self.table
        out = table[["backlog", "completion"]].copy()
        out["completion"] = [f"{c:.3f}" for c in table["completion"]]
        for m, label in METRICS.items():
            out[label] = [_shown(*v) for v in zip(table[m], table[f"{m}_lo"],
                                                  table[f"{m}_hi"], strict=True)]
        out["needs"] = table["needs"]
        out["note"] = table["note"]
        return out

    def _interval(self, x: np.ndarray) -> tuple[float, float]:
        if x.size < MIN_SEEDS:
            return (np.nan, np.nan)
        mean = float(x.mean())
        if mean <= 0:
            return (0.0, 0.0)
        t = stats.t.ppf(0.5 + self.level / 2, x.size - 1)
        spread = np.exp(t * float(x.std(ddof=1)) / np.sqrt(x.size) / mean)
        return (mean / spread, mean * spread)

    def figures(self) -> dict:
        """One matplotlib figure per metric: a dot plot, the loads as groups and one dot per
        scheduler with its interval as a whisker (where there is one), a log axis where
        the values span more than 10×, the legend beside the axes, the KV capacity ``M`` as
        a reference line on the memory figure. A point whose runs were unstable (the
        table's ``backlog`` grows) is crossed out in red: its latency is no steady state; a
        scheduler whose runs left more than 1 % unfinished is named so in the legend.

        Returns
        -------
        dict
            ``{metric: matplotlib.figure.Figure}``, one per key of :data:`METRICS`.
        """
        import matplotlib.pyplot as plt

        from .plotting import dots

        table = self.table
        names = list(dict.fromkeys(table.index.get_level_values(0)))
        loads = list(dict.fromkeys(table.index.get_level_values(1)))
        figs = {}
        for metric, label in METRICS.items():
            fig, ax = plt.subplots(figsize=(8.4, 3.8), layout="constrained")
            series, flagged = {}, {}
            for name in names:
                part = table.loc[name].reindex(loads)
                tag = name if self.needs[name] == "none" else f"{name} (needs {self.needs[name]})"
                if bool((part["completion"] < 1 - UNFINISHED_MARK).any()):
                    tag += " — runs left work unfinished"
                series[tag] = (part[metric], part[f"{metric}_lo"], part[f"{metric}_hi"])
                flagged[tag] = (part["backlog"] == "grows").to_numpy()
            refs = ({f"KV capacity M = {self.memory:,} tokens": self.memory}
                    if metric == "peak_memory" and self.memory is not None else None)
            dots(ax, loads, series, flagged=flagged,
                 flag_label="unstable at this load: grows with the run, no steady state",
                 references=refs, title=f"{label.split(' (')[0]} by scheduler and load",
                 ylabel=label, xlabel="load (fraction of full-batch capacity)")
            figs[metric] = fig
        return figs


def _shown(mean, lo, hi) -> str:
    """``mean [lo, hi]`` in 4 significant digits, or the mean alone without an interval."""
    if not np.isfinite(mean):
        return "—"
    if np.isfinite(lo) and np.isfinite(hi):
        return f"{mean:.4g} [{lo:.4g}, {hi:.4g}]"
    return f"{mean:.4g}"


def compare(schedulers: Sequence | None = None, *, loads=(0.5, 0.7, 0.9), seeds=MIN_SEEDS,
            n_requests: int = 2000, lengths=None, max_total: int = 4096,
            time_model: TimeModel = ANCHOR_TIME, token_budget: int = 512,
            memory: int | None = 65536, predictor=None, executor=None, checkpoint=None,
            progress: bool = False, trace=None) -> Comparison:
    """Run every scheduler on the same ShareGPT workload across ``loads``.

    Parameters
    ----------
    schedulers : sequence, optional
        Entries ``(name, factory, needs)`` or :class:`Scheduler`; default :data:`CLASSIC`.
    loads : sequence of float, default (0.5, 0.7, 0.9)
        Offered loads, fractions of the full-batch capacity (``Workload.from_lengths``).
    seeds : int or sequence of int, default MIN_SEEDS
        Seeds per point (int k: ``range(k)``); intervals need at least ``MIN_SEEDS``.
    n_requests : int, default 2000
        Requests per run (all drained).
    lengths : tuple of array_like, optional
        Paired (prompt, output) samples; default ShareGPT words with
        ``prompt + output <= max_total`` (Bari et al. cap requests at 8,192 tokens).
    max_total : int, default 4096
        The cap on ``prompt + output`` of the default lengths.
    time_model : TimeModel, default ANCHOR_TIME
        The batch-time model of the one engine every scheduler runs on (seconds).
    token_budget : int, default 512
        Its token budget ``b``.
    memory : int or None, default 65536
        Its KV-cache capacity ``M`` in tokens (``None``: unlimited).
    predictor : object, optional
        The workload's output-length predictor (``lo``, ``hi``) for schedulers that need
        intervals; default exact.
    executor : concurrent.futures.Executor, optional
        Passed to :func:`queuetheory.sweep` (default: one thread; factories of a process
        pool must be picklable, as :class:`Budgeted` is).
    checkpoint : str or pathlib.Path, optional
        Passed to :func:`queuetheory.sweep`: a file to resume from.
    progress : bool, default False
        Show a progress bar.
    trace : Trace, optional
        A recorded :class:`~queuetheory.workload.Trace` (e.g.
        :func:`queuetheory.data.azure_trace`) replayed instead of Poisson arrivals: its
        lengths replace ``lengths`` and its arrival times are scaled to each load's rate
        (:func:`~queuetheory.workload.with_rate`); its first ``n_requests`` are run, and
        the seeds then vary only the schedulers' own random choices.

    Returns
    -------
    Comparison
        The per-run records, with the table and the figures.

    Raises
    ------
    ValueError
        If two schedulers share a name, both ``trace`` and ``lengths`` are given, or
        ``memory`` is smaller than the longest request.
    """
    entries = [_as_scheduler(s) for s in (CLASSIC if schedulers is None else schedulers)]
    names = [s.name for s in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"schedulers: names must be unique, got {names}")
    if trace is not None:
        if lengths is not None:
            raise ValueError("lengths: a trace gives its own lengths; give one of them")
        lengths = (trace.prompt, trace.output)
    if lengths is None:
        lengths = _default_lengths(max_total)
    if memory is not None:
        need = int(np.max(np.asarray(lengths[0]) + np.asarray(lengths[1])))
        if need > memory:
            raise ValueError(f"memory={memory}: smaller than the longest request ({need} "
                             "tokens); lower max_total or raise memory")
    run = _Run(entries, tuple(np.asarray(a) for a in lengths), time_model, int(token_budget),
               memory, int(n_requests), predictor, trace)
    runs = sweep(run, {"scheduler": names, "load": list(loads)}, seeds=seeds,
                 executor=executor or ThreadPoolExecutor(1), checkpoint=checkpoint,
                 progress=progress)
    return Comparison(runs, {s.name: s.needs for s in entries}, memory=memory)


def _cli_time_model(spec: str) -> TimeModel:
    """``--time``: the anchor fit, a fitted GPU model, or affine constants ``C,P,D`` (s)."""
    from .timing import TiledGPUTime

    return time_model_option(spec, {"anchor": lambda: ANCHOR_TIME,
                                    "a100": lambda: TiledGPUTime.fitted("a100"),
                                    "h100": lambda: TiledGPUTime.fitted("h100")},
                             AffineTokenTime, "C,P,D (seconds)")


def compare_main(argv=None) -> int:
    """``queuetheory compare``: print the table; ``--out DIR`` also writes CSV and PNGs.

    Parameters
    ----------
    argv : list of str, optional
        The command-line arguments; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status, 0.

    Raises
    ------
    ValueError
        If ``--seeds``, ``--requests``, ``--budget``, ``--memory`` or ``--workers`` is below 1.
    """
    ap = OneLineParser(
        prog="queuetheory compare",
        description="Run every scheduler on the same ShareGPT workload (or a trace) across "
                    "loads, and print per scheduler and load the mean of every metric over "
                    "the seeds with its 95 % interval. Times are in seconds. Every run drains "
                    "its requests; a scheduler whose backlog grows over the arrivals is "
                    "marked unstable (its latency then grows with --requests).")
    ap.add_argument("--loads", type=float, nargs="+",
                    help="offered loads, fractions of the full-batch capacity (default 0.5 "
                         "0.7 0.9)")
    ap.add_argument("--seeds", type=int, help=f"seeds per point (default {MIN_SEEDS}; "
                    f"intervals need {MIN_SEEDS})")
    ap.add_argument("--requests", type=int, help="requests per run, all drained (default 2000)")
    ap.add_argument("--budget", type=int, default=512,
                    help="token budget b of every engine (default 512)")
    ap.add_argument("--memory", type=int, default=65536,
                    help="KV-cache capacity M in tokens (default 65536)")
    ap.add_argument("--time", default="anchor", metavar="MODEL",
                    help="batch-time model, in seconds: 'anchor' (default: the affine fit "
                         "16.1 ms + 57.8 µs per prefill token + 39.5 µs per decode), 'a100' "
                         "or 'h100' (the tiled GPU model fitted to real timings), or "
                         "'C,P,D' (affine: C + P per prefill token + D per decode token)")
    ap.add_argument("--workers", type=int, default=1, help="processes (default: 1 thread)")
    ap.add_argument("--checkpoint", default=None, help="a .parquet or .csv file to resume")
    ap.add_argument("--out", default=None, help="directory for table.csv and figures")
    ap.add_argument("--quick", action="store_true",
                    help="2 loads, 2 seeds (no intervals), 300 requests, where not given")
    ap.add_argument("--classic", action="store_true",
                    help="only vLLM, Orca, Sarathi, FasterTransformer (default: every paper's)")
    ap.add_argument("--alpha", type=float, default=0.5,
                    help="prediction intervals [(1-α)o, (1+α)o] for A_max / A_min (default 0.5)")
    ap.add_argument("--trace", metavar="FILE", help="replay a production trace (.csv, .jsonl, "
                    ".parquet, or 'conv' / 'code' for the shipped Azure traces), its arrivals "
                    "rescaled to each load, instead of ShareGPT lengths with Poisson arrivals")
    ap.add_argument("--format", help="the trace's format: azure, burstgpt, mooncake (default: "
                    "detected)")
    args = ap.parse_args(argv)
    quick = ([0.5, 0.9], 2, 300) if args.quick else ([0.5, 0.7, 0.9], MIN_SEEDS, 2000)
    args.loads = args.loads if args.loads is not None else quick[0]
    args.seeds = args.seeds if args.seeds is not None else quick[1]
    args.requests = args.requests if args.requests is not None else quick[2]
    executor = None
    if args.workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        executor = ProcessPoolExecutor(args.workers)
    from .data import open_trace
    from .workload import RelativeInterval

    for name in ("seeds", "requests", "budget", "memory", "workers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} {getattr(args, name)}: must be >= 1")
    trace = None if args.trace is None else open_trace(args.trace, format=args.format)
    time_model = _cli_time_model(args.time)
    result = compare(CLASSIC if args.classic else paper_schedulers(), loads=args.loads,
                     predictor=RelativeInterval(args.alpha), seeds=args.seeds,
                     n_requests=args.requests,
                     token_budget=args.budget, memory=args.memory, executor=executor,
                     checkpoint=args.checkpoint, progress=True, trace=trace,
                     time_model=time_model)
    table = result.table
    print(f"time model: {time_model!r} (seconds); token budget {args.budget}, KV memory "
          f"{args.memory:,} tokens; {args.requests} requests per run, {args.seeds} seed(s)")
    with pd.option_context("display.width", 250, "display.max_columns", 40,
                           "display.max_colwidth", 120):
        print(result.summary().to_string())
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "compare_table.csv")
        result.runs.to_csv(out / "compare_runs.csv", index=False)
        for metric, fig in result.figures().items():
            fig.savefig(out / f"compare_{metric}.png", dpi=120)
        print(f"wrote {out}/compare_table.csv, compare_runs.csv and {len(METRICS)} figures")
    return 0
