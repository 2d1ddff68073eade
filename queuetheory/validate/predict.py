"""Replay a measured run on its settings and its GPU's profile, and score the prediction.

:func:`replay` builds vLLM's scheduler from the run's engine arguments
(:meth:`~queuetheory.policies.VLLMV1.from_engine_args`) and the batch time from the GPU's
operator profile (:class:`~queuetheory.timing.ProfileTime`, with the CUDA graph sizes the
engine arguments give, :func:`~queuetheory.policies.vllm.cudagraph_capture_sizes`), runs
the run's arrivals and lengths through the engine and returns a :class:`Validation`: the
prediction per request, and, where the folder holds measurements, the errors beside a peer
simulator's. Nothing is fitted to a measured run: the inputs are the profile, the engine
arguments and the workload.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..engine import Result, simulate
from ..policies.vllm import VLLMV1, cudagraph_capture_sizes
from ..timing.profile import OperatorProfile, ProfileTime
from .runs import MeasuredRun, load_run

__all__ = ["replay", "Validation", "error_table", "METRICS"]

#: the per-request metrics, as SOURCE.md defines them (ms): TTFT = first token − queued,
#: TPOT = (last − first) / (output − 1), E2E = last − queued
METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")
_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
_STATS = (("mean", np.mean), ("p50", np.median), ("p90", lambda v: np.percentile(v, 90)),
          ("p99", lambda v: np.percentile(v, 99)))


def replay(run, *, profile=None, outside: str = "warn", policy: VLLMV1 | None = None
           ) -> Validation:
    """Predict a measured run (a folder, a shipped run's name or a :class:`MeasuredRun`).

    Parameters
    ----------
    run : str, path-like or MeasuredRun
        The run folder (:func:`~queuetheory.validate.load_run`), ``"rtxpro6000"`` or
        ``"rtx4090"`` (shipped), or a loaded :class:`MeasuredRun`.
    profile : str or path-like, optional
        The GPU profile's folder, where the run folder does not lead to it.
    outside : {"warn", "error", "allow"}, default "warn"
        What a profile lookup above its grid does (:class:`~queuetheory.timing.ProfileTime`).
    policy : VLLMV1, optional
        A :class:`~queuetheory.policies.VLLMV1` to run instead of the one the run's engine
        arguments give (a what-if: another ``max_num_seqs``, KV cache, or the scheduling
        synchronous).

    Returns
    -------
    Validation
        The prediction, its run, the engine's records and the notes (engine arguments not
        modelled, profile extrapolations) raised while building and running it.

    Raises
    ------
    RunFolderError
        If ``run`` is a folder that :func:`~queuetheory.validate.load_run` cannot read.
    ValueError
        If ``policy`` is not a ``VLLMV1``, ``outside`` is not one of its values, or a
        request does not fit the model's context.
    ProfileError
        If the GPU profile cannot be read, or, with ``outside="error"``, a batch leaves its
        grid.

    Warns
    -----
    UserWarning
        Each note once, re-emitted after the run: engine arguments not modelled, and
        :class:`~queuetheory.timing.ProfileRangeWarning` for the profile's extrapolations.
    """
    if not isinstance(run, MeasuredRun):
        run = load_run(run, profile=profile)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if policy is None:
            args = {**run.engine_args, "max_model_len": run.max_model_len}
            policy = VLLMV1.from_engine_args(args)
        elif not isinstance(policy, VLLMV1):
            raise ValueError(f"policy={policy!r}: must be a VLLMV1 (vLLM's scheduler)")
        tp = int(run.engine_args.get("engine_kwargs", {}).get("tensor_parallel_size") or 1)
        prof = OperatorProfile.from_llmservingsim(run.profile_root, tp=tp, model=run.model)
        graphs = cudagraph_capture_sizes(run.engine_args, max_num_seqs=policy.max_num_seqs,
                                         max_num_batched_tokens=policy.token_budget)
        time_model = ProfileTime(prof, unit="s", outside=outside, graph_sizes=graphs)
        trace = run.trace(policy.block_size)
        start = time.process_time()
        result = simulate(trace, policy, time_model)
        cpu = time.process_time() - start
    notes = []
    for w in caught:
        text = str(w.message)
        if text not in notes:
            notes.append(text)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    predicted = _predicted(run, result, policy.queued)
    return Validation(run, predicted, result, policy, time_model, cpu, notes)


def _predicted(run: MeasuredRun, result: Result, queued: np.ndarray) -> pd.DataFrame:
    """Per request, as vLLM measures it: TTFT and E2E from when the engine queued the
    request (:attr:`VLLMV1.queued`), not from when the client sent it."""
    r = result.requests
    first, finish = (r[c].to_numpy() for c in ("first_token", "finish"))
    out = r["output"].to_numpy(float)
    return pd.DataFrame({
        "req_idx": run.workload["req_idx"].to_numpy(),
        "ttft_ms": 1e3 * (first - queued),
        "tpot_ms": np.where(out > 1, 1e3 * (finish - first) / np.maximum(out - 1, 1), np.nan),
        "e2e_ms": 1e3 * (finish - queued)})


def error_table(measured: pd.DataFrame, predicted: pd.DataFrame,
                peer: pd.DataFrame | None = None, *, name: str = "queuetheory",
                peer_name: str = "LLMServingSim") -> pd.DataFrame:
    """Errors of a per-request prediction against the measurement, matched on ``req_idx``.

    One row per metric and statistic: the signed error of the mean, p50, p90 and p99
    (``100 (predicted / measured − 1)``, in %), then the per-request median and p90 of the
    absolute error ``100 |predicted_i / measured_i − 1|``; the same for ``peer`` on the same
    requests. Requests missing from a prediction, or a metric undefined for them (TPOT of a
    one-token output), are left out of that metric, and the row's ``requests`` says how many
    were compared.

    Parameters
    ----------
    measured : pandas.DataFrame
        The measurement per request: ``req_idx`` and the :data:`METRICS` columns (ms).
    predicted : pandas.DataFrame
        The prediction to score, same columns.
    peer : pandas.DataFrame, optional
        A second prediction (a peer simulator's), same columns, scored on the same requests.
    name : str, default "queuetheory"
        The prediction's name in the column headers.
    peer_name : str, default "LLMServingSim"
        The peer's name in the column headers.

    Returns
    -------
    pandas.DataFrame
        Six rows per metric (TTFT, TPOT, E2E): columns ``metric``, ``statistic``,
        ``requests``, ``measured_ms`` and, for the prediction and the peer,
        ``<name>_ms`` and ``<name>_error_pct``. The two per-request rows have no ``_ms``
        values (NaN).
    """
    cols = ["req_idx", *METRICS]
    both = measured[cols].merge(predicted[cols], on="req_idx", suffixes=("", "_pred"))
    if peer is not None:
        both = both.merge(peer[cols].add_suffix("_peer").rename(
            columns={"req_idx_peer": "req_idx"}), on="req_idx")
    rows = []
    for m in METRICS:
        ok = np.isfinite(both[m]) & np.isfinite(both[f"{m}_pred"])
        if peer is not None:
            ok &= np.isfinite(both[f"{m}_peer"])
        sub = both[ok]
        meas = sub[m].to_numpy(float)
        preds = {name: sub[f"{m}_pred"].to_numpy(float)}
        if peer is not None:
            preds[peer_name] = sub[f"{m}_peer"].to_numpy(float)
        for stat, fn in _STATS:
            row = {"metric": _NAMES[m], "statistic": stat, "requests": len(sub),
                   "measured_ms": fn(meas)}
            for who, p in preds.items():
                row[f"{who}_ms"] = fn(p)
                row[f"{who}_error_pct"] = 100 * (fn(p) / fn(meas) - 1)
            rows.append(row)
        for stat, q in (("per-request median abs error", 50),
                        ("per-request p90 abs error", 90)):
            row = {"metric": _NAMES[m], "statistic": stat, "requests": len(sub),
                   "measured_ms": np.nan}
            for who, p in preds.items():
                row[f"{who}_ms"] = np.nan
                row[f"{who}_error_pct"] = float(np.percentile(100 * np.abs(p / meas - 1), q))
            rows.append(row)
    return pd.DataFrame(rows)


@dataclass
class Validation:
    """A replay's prediction of one run (:func:`replay`), with what it can be held against.

    ``predicted`` has one row per request: ``req_idx``, ``ttft_ms``, ``tpot_ms``,
    ``e2e_ms``; ``result`` the engine's records; ``policy`` the vLLM scheduler it ran (its
    ``queue_log``, ``peak_blocks``); ``cpu_seconds`` the replay's CPU time;
    ``notes`` what was not modelled or extrapolated.

    Attributes
    ----------
    run : MeasuredRun
        The run replayed.
    predicted : pandas.DataFrame
        The prediction per request (ms), as vLLM measures it: TTFT and E2E from when the
        engine queued the request.
    result : Result
        The engine's records of the replay (seconds).
    policy : VLLMV1
        The vLLM scheduler that ran, with its ``queue_log`` and ``peak_blocks``.
    time_model : ProfileTime
        The batch time composed from the GPU's operator profile.
    cpu_seconds : float
        The simulation's CPU time in seconds.
    notes : list of str
        The warnings raised while building and running the replay, each once.
    """

    run: MeasuredRun
    predicted: pd.DataFrame
    result: Result
    policy: VLLMV1
    time_model: ProfileTime
    cpu_seconds: float
    notes: list = field(default_factory=list)

    @property
    def has_measurements(self) -> bool:
        """Whether the run folder holds measurements to score the prediction against."""
        return self.run.measured is not None

    def errors(self) -> pd.DataFrame:
        """:func:`error_table` of the prediction (and the peer's, where the folder has it);
        raises ``ValueError`` for a run without measurements.

        Returns
        -------
        pandas.DataFrame
            The errors per metric and statistic (see :func:`error_table`).

        Raises
        ------
        ValueError
            If the run holds no measurements.
        """
        if not self.has_measurements:
            raise ValueError(f"run {self.run.name!r} holds no measurements: this replay is a "
                             "prediction, with nothing to score it against here")
        return error_table(self.run.measured, self.predicted, self.run.peer)

    def queue(self) -> pd.DataFrame:
        """Running and waiting requests at 1 s ticks: predicted (vLLM's queues after the last
        step started by the tick) and, where measured, the run's series.

        Returns
        -------
        pandas.DataFrame
            Columns ``t`` (s), ``predicted_running``, ``predicted_waiting`` and, where the
            run has the series, ``measured_running``, ``measured_waiting`` (outer-joined on
            ``t``).
        """
        log = self.policy.queue_log
        end = float(self.result.requests["finish"].max())
        ticks = np.arange(1.0, np.ceil(end) + 1.0)
        at = np.searchsorted(log["time"].to_numpy(), ticks, side="right") - 1
        df = pd.DataFrame({"t": ticks, "predicted_running": log["running"].to_numpy()[at],
                           "predicted_waiting": log["waiting"].to_numpy()[at]})
        df.loc[ticks > end, ["predicted_running", "predicted_waiting"]] = 0
        if self.run.timeseries is not None:
            ts = self.run.timeseries[["t", "running", "waiting"]].rename(
                columns={"running": "measured_running", "waiting": "measured_waiting"})
            df = df.merge(ts, on="t", how="outer").sort_values("t").reset_index(drop=True)
        return df

    def summary(self) -> dict:
        """The prediction's mean, p50, p90, p95 and p99 of each metric (ms), as the run's
        ``measured_summary.json`` gives them, and what the replay did.

        Returns
        -------
        dict
            ``run``, ``model``, ``hardware``, ``requests``, ``prediction_only``, ``policy``,
            ``time_model``, ``cpu_seconds``, ``unfinished``, ``preemptions``,
            ``prefix_cached_tokens``, ``peak_kv_blocks``, ``makespan_s`` (s), ``notes``, and
            per metric of :data:`METRICS` a dict of ``mean``, ``median``, ``p90``, ``p95``,
            ``p99`` (ms); JSON-serialisable.
        """
        out = {"run": self.run.name, "model": self.run.model, "hardware": self.run.hardware,
               "requests": len(self.predicted), "prediction_only": not self.has_measurements,
               "policy": repr(self.policy), "time_model": repr(self.time_model),
               "cpu_seconds": round(self.cpu_seconds, 3),
               "unfinished": int(self.result.requests["finish"].isna().sum()),
               "preemptions": int(self.result.requests["restarts"].sum()),
               "prefix_cached_tokens": int(self.result.requests["cached"].sum()),
               "peak_kv_blocks": int(self.policy.peak_blocks),
               "makespan_s": float(self.result.requests["finish"].max()),
               "notes": list(self.notes)}
        for m in METRICS:
            v = self.predicted[m].dropna().to_numpy(float)
            out[m] = {"mean": float(v.mean()), "median": float(np.median(v)),
                      **{f"p{q}": float(np.percentile(v, q)) for q in (90, 95, 99)}}
        return out

    def plot_requests(self, axes=None):
        """Predicted against measured per request, one panel per metric, log axes, with the
        diagonal (and the peer's prediction where the folder has it).

        Parameters
        ----------
        axes : sequence of matplotlib.axes.Axes, optional
            Three axes, for TTFT, TPOT and E2E; ``None`` makes a new 1 × 3 figure.

        Returns
        -------
        sequence of matplotlib.axes.Axes
            The three axes drawn on.

        Raises
        ------
        ValueError
            If the run holds no measurements.
        """
        import matplotlib.pyplot as plt

        from ..plotting import finish, series_style

        if not self.has_measurements:
            raise ValueError(f"run {self.run.name!r} holds no measurements to plot against")
        if axes is None:
            _, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained")
        preds = {"queuetheory": self.predicted}
        if self.run.peer is not None:
            preds["LLMServingSim"] = self.run.peer
        for ax, m in zip(axes, METRICS, strict=True):
            lo, hi = np.inf, 0.0
            for i, (who, p) in enumerate(preds.items()):
                both = self.run.measured[["req_idx", m]].merge(
                    p[["req_idx", m]], on="req_idx", suffixes=("", "_p")).dropna()
                style = {**series_style(i), "linestyle": "none"}
                ax.plot(both[m], both[f"{m}_p"], label=who, alpha=0.7, **style)
                lo = min(lo, both[m].min(), both[f"{m}_p"].min())
                hi = max(hi, both[m].max(), both[f"{m}_p"].max())
            ax.plot([lo, hi], [lo, hi], color="0.25", lw=0.8, ls="--", label="predicted = measured")
            finish(ax, title=f"{self.run.name}: {_NAMES[m]} per request",
                   xlabel=f"measured {_NAMES[m]} (ms)", ylabel=f"predicted {_NAMES[m]} (ms)",
                   logx=True, logy=True, legend=m == METRICS[-1])
        return axes

    def plot_queue(self, ax=None):
        """Running and waiting requests over time: predicted, and measured where the folder
        has the series.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            The axes to draw on; ``None`` makes a new figure.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        from ..plotting import finish, new_axes, series_style

        ax = new_axes(ax, figsize=(7.5, 4.0))
        q = self.queue()
        i = 0
        for what in ("running", "waiting"):
            for src in ("measured", "predicted"):
                col = f"{src}_{what}"
                if col in q.columns:
                    ax.plot(q["t"], q[col], label=f"{what}, {src}",
                            **{**series_style(i), "markersize": 3})
                    i += 1
        finish(ax, title=f"{self.run.name}: vLLM's queues over time", xlabel="time (s)",
               ylabel="requests", logy=False)
        return ax

    def write(self, out) -> dict:
        """Write ``predicted_per_request.csv`` (``req_idx,ttft_ms,tpot_ms,e2e_ms``),
        ``predicted_summary.json``, ``queue.csv`` and ``queue.png``, and, where the run has
        measurements, ``errors.csv``, ``errors.md`` and ``requests.png``; returns the paths.

        Parameters
        ----------
        out : str or path-like
            The output folder, created with its parents where missing.

        Returns
        -------
        dict
            ``pathlib.Path`` of each file written, by key: ``predicted``, ``summary``,
            ``queue``, ``queue_figure`` and, with measurements, ``errors``, ``errors_md``,
            ``requests_figure``.
        """
        import matplotlib.pyplot as plt

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"predicted": out / "predicted_per_request.csv",
                 "summary": out / "predicted_summary.json", "queue": out / "queue.csv",
                 "queue_figure": out / "queue.png"}
        self.predicted[["req_idx", *METRICS]].to_csv(paths["predicted"], index=False)
        paths["summary"].write_text(json.dumps(self.summary(), indent=2))
        self.queue().to_csv(paths["queue"], index=False)
        fig = self.plot_queue().figure
        fig.savefig(paths["queue_figure"], dpi=120)
        plt.close(fig)
        if self.has_measurements:
            table = self.errors()
            paths["errors"] = out / "errors.csv"
            paths["errors_md"] = out / "errors.md"
            table.to_csv(paths["errors"], index=False)
            paths["errors_md"].write_text(format_errors(table) + "\n")
            paths["requests_figure"] = out / "requests.png"
            fig = self.plot_requests()[0].figure
            fig.savefig(paths["requests_figure"], dpi=120)
            plt.close(fig)
        return paths


def format_errors(table: pd.DataFrame) -> str:
    """The error table as Markdown: one row per metric and statistic, errors in %.

    Parameters
    ----------
    table : pandas.DataFrame
        An :func:`error_table`.

    Returns
    -------
    str
        A Markdown table: metric, statistic, measured (ms), then each prediction's value
        (ms) and error (signed for the statistics, absolute for the per-request rows).
    """
    who = [c[: -len("_error_pct")] for c in table.columns if c.endswith("_error_pct")]
    head = "| metric | statistic | measured (ms) | " + " | ".join(
        f"{w} (ms) | {w} error" for w in who) + " |"
    lines = [head, "|" + "---|" * (3 + 2 * len(who))]
    for r in table.itertuples(index=False):
        r = r._asdict()
        cells = [r["metric"], r["statistic"], _ms(r["measured_ms"])]
        for w in who:
            cells += [_ms(r[f"{w}_ms"]), f"{r[f'{w}_error_pct']:+.1f} %"
                      if "abs error" not in r["statistic"] else f"{r[f'{w}_error_pct']:.1f} %"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ms(v) -> str:
    return "" if not np.isfinite(v) else f"{v:,.1f}"
