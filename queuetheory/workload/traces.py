"""Production traces in: arrival times and token counts from a user's own log.

:func:`read_trace` (also ``Workload.from_trace``) reads a CSV, JSONL or Parquet file, or a
DataFrame, into a :class:`~queuetheory.workload.Trace` that ``simulate`` replays.

Conventions, written down once:

* **Time.** Arrival times are measured from the first kept request (which arrives at 0) in
  ``time_unit``: seconds by default, ``"ms"`` for the millisecond time models (the
  Llama-3-70B fit of Li, Dai, Peng is in ms). ``window``, ``rate`` and the returned arrivals
  are all in that unit.
* **Output length** is the number of generated tokens *including the first one*: the real
  engines' convention (``first_token="prefill"``: the prefill iteration emits the first
  token and the output length counts it). The Azure ``GeneratedTokens``, BurstGPT
  ``Response tokens`` and Mooncake ``output_length`` columns count exactly that.
* **Zero tokens.** A request with 0 prompt or 0 generated tokens (a failed or refused call)
  has no place in the engine's model, which needs both lengths >= 1: by default it is
  dropped and a warning says how many (``zero_tokens="drop"``); ``zero_tokens="clip"``
  counts it as 1 token instead.
* **Bad rows** (a missing column is always an error): an unparsable or missing timestamp,
  a missing, non-integer or negative length, a timestamp earlier than one above it.
  The first one raises ``ValueError`` naming its row (0-based data row, the header not
  counted) and column; with ``drop_bad=True`` they are dropped and a warning gives the count.
* **Rescaling.** ``speedup=k`` divides every arrival time by ``k``; ``rate=r`` scales them
  so that the mean rate ``(n − 1) / (t_last − t_first)`` is ``r``. Both scale every
  inter-arrival time by one factor, so the burstiness (coefficient of variation, index of
  dispersion at a proportionally scaled window) is kept.

Presets (``format=``; ``None`` detects the preset from the columns):

========== ============================================= ===================================
format     columns (arrival, prompt, output)             timestamps
========== ============================================= ===================================
azure      TIMESTAMP, ContextTokens, GeneratedTokens     date-time strings (Azure LLM 2023)
burstgpt   Timestamp, Request tokens, Response tokens    seconds; ``Model`` gives the class
mooncake   timestamp, input_length, output_length        milliseconds; ``hash_ids`` (one id
                                                         per 512-token block) kept as the
                                                         trace's prefix blocks
========== ============================================= ===================================

**Prefix blocks.** A column of per-request id lists (``hash_ids`` in the Mooncake format, or
``columns={"blocks": ...}`` with ``block_size=``) becomes :attr:`Trace.blocks`: the ids of
each prompt's **full** blocks of ``block_size`` tokens (an id of a partial last block is
dropped, as a prefix cache keys full blocks only), kept through every row dropped, the window
and the rescaling. Lists are read as JSON arrays where a CSV holds them as text.

Any other table is read with ``columns={"arrival": ..., "prompt": ..., "output": ...}``
(and optionally ``"class"``) and ``timestamp_unit`` (``"s"``, ``"ms"``, ``"us"``, ``"ns"``
or ``"datetime"``; default: date-times for text, seconds for numbers).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import check_positive
from .core import MAX_LENGTH, Trace

__all__ = ["read_trace", "mean_rate", "with_rate", "TraceFormat", "FORMATS", "TIME_UNITS"]

#: seconds per unit of the returned arrival times
TIME_UNITS = {"s": 1.0, "ms": 1e-3}
_TIMESTAMP_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "datetime": None}
ROLES = ("arrival", "prompt", "output", "class", "blocks")


@dataclass(frozen=True)
class TraceFormat:
    """A public trace layout: which column plays which role, and the timestamps' unit;
    ``blocks`` names a column of prefix-block ids read where the table has it, of
    ``block_size`` tokens each."""

    name: str
    columns: dict
    timestamp_unit: str
    blocks: str | None = None
    block_size: int | None = None

    def detect(self, present) -> bool:
        need = [self.columns[r] for r in ("arrival", "prompt", "output")]
        return all(c in present for c in need)


FORMATS = {
    "azure": TraceFormat("azure", {"arrival": "TIMESTAMP", "prompt": "ContextTokens",
                                   "output": "GeneratedTokens"}, "datetime"),
    "burstgpt": TraceFormat("burstgpt", {"arrival": "Timestamp", "prompt": "Request tokens",
                                         "output": "Response tokens", "class": "Model"}, "s"),
    "mooncake": TraceFormat("mooncake", {"arrival": "timestamp", "prompt": "input_length",
                                         "output": "output_length"}, "ms",
                           blocks="hash_ids", block_size=512),
}


def _read_table(source) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    if not isinstance(source, str | Path):
        raise ValueError(f"source={source!r}: expected a file path or a pandas DataFrame")
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"source={str(path)!r}: no such file")
    suffixes = [s.lower() for s in path.suffixes if s.lower() not in (".gz", ".bz2", ".zst",
                                                                       ".xz", ".zip")]
    kind = suffixes[-1] if suffixes else ""
    if kind in (".csv", ".txt"):
        return pd.read_csv(path)
    if kind in (".jsonl", ".json", ".ndjson"):
        return pd.read_json(path, lines=kind != ".json")
    if kind in (".parquet", ".pq"):
        return pd.read_parquet(path)
    raise ValueError(f"source={str(path)!r}: unknown file type {kind or '(none)'!r}; "
                     "expected .csv, .jsonl or .parquet (optionally compressed)")


def _resolve_format(df, format, columns, timestamp_unit):
    present = list(df.columns)
    if format is None:
        found = [f for f in FORMATS.values() if f.detect(present)]
        if found:
            fmt = found[0]
        elif columns is not None:
            fmt = TraceFormat("custom", {}, "")
        else:
            raise ValueError(f"format=None: the columns {present} match no preset "
                             f"({', '.join(FORMATS)}); give format= or columns=")
    elif format in FORMATS:
        fmt = FORMATS[format]
    elif format == "custom":
        fmt = TraceFormat("custom", {}, "")
    else:
        raise ValueError(f"format={format!r}: must be one of {(*FORMATS, 'custom')} or None")
    mapping = dict(fmt.columns)
    if fmt.blocks is not None and fmt.blocks in df.columns:
        mapping["blocks"] = fmt.blocks
    if columns is not None:
        unknown = set(columns) - set(ROLES)
        if unknown:
            raise ValueError(f"columns={columns!r}: unknown roles {sorted(unknown)}; the roles "
                             f"are {ROLES}")
        mapping.update(columns)
    for role in ("arrival", "prompt", "output"):
        if role not in mapping:
            raise ValueError(f"columns: no column for the role {role!r}; give "
                             f"columns={{{role!r}: <column name>, ...}}")
    for role, col in mapping.items():
        if col not in df.columns:
            raise ValueError(f"column {col!r} (the {role} of format {fmt.name!r}) is missing; "
                             f"the table has {present}")
        if present.count(col) > 1:
            raise ValueError(f"column {col!r} (the {role} of format {fmt.name!r}) appears "
                             f"{present.count(col)} times in the table; rename or drop the "
                             "copies")
    unit = timestamp_unit or fmt.timestamp_unit or None
    if unit is not None and unit not in _TIMESTAMP_UNITS:
        raise ValueError(f"timestamp_unit={unit!r}: must be one of {tuple(_TIMESTAMP_UNITS)}")
    return fmt, mapping, unit


def _timestamps(col: pd.Series, unit: str | None) -> np.ndarray:
    """Seconds (from an arbitrary origin) per row; NaN where unparsable or missing."""
    if unit is None:
        unit = "s" if pd.api.types.is_numeric_dtype(col) else "datetime"
    if unit == "datetime":      # offsets honoured, mixed ones too; naive times read as UTC
        ts = pd.to_datetime(col, errors="coerce", utc=True).dt.tz_localize(None)
        ns = ts.to_numpy(dtype="datetime64[ns]")
        ok = ~np.isnat(ns)
        out = np.full(ns.size, np.nan)
        if ok.any():
            base = ns[ok][0]
            out[ok] = (ns[ok] - base).astype(np.int64) * 1e-9
        return out
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=float) * _TIMESTAMP_UNITS[unit]


def _lengths(col: pd.Series) -> np.ndarray:
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)


def _bad_rows(t, lengths: dict, mapping) -> tuple[np.ndarray, list]:
    """A mask of the bad rows and ``(row, column, value, rule)`` of each bad row's first
    broken rule, in row order."""
    n = t.size
    bad = np.zeros(n, bool)
    reason = np.full(n, -1)
    rules = []

    def mark(mask, column, rule):
        new = mask & ~bad
        reason[new] = len(rules)
        rules.append((column, rule))
        bad[:] |= mask

    mark(~np.isfinite(t), mapping["arrival"], "is missing or not a timestamp")
    for role, v in lengths.items():
        col = mapping[role]
        mark(~np.isfinite(v), col, "is missing or not a number")
        mark(np.isfinite(v) & (v != np.floor(v)), col, "is not an integer token count")
        mark(np.isfinite(v) & (v < 0), col, "is negative (token counts must be >= 0)")
        mark(np.isfinite(v) & (v > MAX_LENGTH), col, f"exceeds MAX_LENGTH = {MAX_LENGTH} tokens")
    good_t = np.where(bad, -np.inf, t)
    before = np.concatenate(([-np.inf], np.maximum.accumulate(good_t)[:-1]))
    mark(~bad & (t < before), mapping["arrival"],
         "is earlier than a timestamp above it (arrivals must be in time order)")
    rows = np.flatnonzero(bad)
    return bad, [(int(i), *rules[reason[i]]) for i in rows]


def _prefix_blocks(col, rows, prompt, block_size: int, name: str) -> np.ndarray:
    """Per request, its full blocks' ids (int64) from the column ``name`` (lists, arrays or
    JSON text; missing: none), data rows ``rows``."""
    import json

    out = np.empty(len(col), dtype=object)
    for i, (ids, p) in enumerate(zip(col, prompt.tolist(), strict=True)):
        try:
            if isinstance(ids, str):
                ids = json.loads(ids)
            elif ids is None or (isinstance(ids, float) and np.isnan(ids)):
                ids = []
            arr = np.asarray(ids)
            if arr.ndim != 1 or (arr.size and (arr.dtype.kind not in "iuf"
                                               or not np.all(arr == np.floor(arr)))):
                raise ValueError
        except (ValueError, TypeError):
            raise ValueError(f"row {int(rows[i])} (0-based data row), column {name!r}: "
                             f"{ids!r} is not a list of integer block ids") from None
        out[i] = arr[: p // block_size].astype(np.int64)
    return out


def read_trace(source, *, format=None, columns=None, timestamp_unit=None, time_unit="s",
               window=None, speedup=None, rate=None, drop_bad=False,
               zero_tokens="drop", block_size=None) -> Trace:
    """Read a production trace (arrival times, prompt and output tokens) into a Trace.

    See the module docstring for the conventions (output tokens include the first one).

    Parameters
    ----------
    source : str, path-like or pandas.DataFrame
        Path of a ``.csv``, ``.jsonl`` or ``.parquet`` file (optionally compressed, e.g.
        ``.csv.gz``), or a pandas DataFrame.
    format : {"azure", "burstgpt", "mooncake", "custom"}, optional
        The preset; None detects the preset from the columns.
    columns : dict, optional
        ``{"arrival": ..., "prompt": ..., "output": ..., "class": ..., "blocks": ...}``, the
        column of each role (overrides the preset's); ``"class"`` (optional) becomes the
        class index, numbered in sorted order of its values; ``"blocks"`` (optional) the
        prefix-block ids of each prompt (module docstring), with ``block_size``.
    timestamp_unit : {"s", "ms", "us", "ns", "datetime"}, optional
        Unit of the arrival column (default: the preset's; for a custom table, date-times
        for text and seconds for numbers).
    time_unit : {"s", "ms"}, default "s"
        The unit of the returned arrival times, of ``window`` and of ``rate``; use the unit
        of the time model you simulate with.
    window : (float, float), optional
        ``(start, end)``: keep the requests arriving in ``[start, end)`` after the first
        request, then measure time from ``start``.
    speedup : float, optional
        Compress time by this factor (arrival times divided by it).
    rate : float, optional
        Rescale the inter-arrival times so that the mean rate is ``rate`` per time unit.
    drop_bad : bool, default False
        Drop the bad rows (with a warning giving the count) instead of raising.
    zero_tokens : {"drop", "clip"}, default "drop"
        ``"drop"`` or ``"clip"`` (to 1) requests with 0 prompt or output tokens; either way
        a warning gives the count.
    block_size : int, optional
        Tokens per prefix-block id (default: the preset's, 512 for Mooncake); needed with a
        ``"blocks"`` column of a custom table.

    Returns
    -------
    Trace
        The kept requests in arrival order, the first at 0 (or at its offset from
        ``window``'s start), one class unless a ``"class"`` column is given, exact output
        intervals.

    Raises
    ------
    ValueError
        If ``time_unit``, ``zero_tokens``, ``format`` or ``timestamp_unit`` is unknown, both
        ``speedup`` and ``rate`` are given, ``source`` is not a readable file of a known
        type or a DataFrame, a role has no column (or a column is missing or repeated), a
        row is bad (without ``drop_bad``: the first is named by row and column), no request
        is left, ``window`` holds none or is not ``0 ≤ start < end``, ``speedup`` or ``rate``
        is not positive, the rescaled arrivals pass :data:`MAX_ARRIVAL`, a ``"blocks"``
        column comes without a block size or holds a value that is not a list of integers.

    Warns
    -----
    UserWarning
        When bad rows are dropped (``drop_bad=True``) or zero-token requests are dropped or
        clipped, with the count.
    """
    if time_unit not in TIME_UNITS:
        raise ValueError(f"time_unit={time_unit!r}: must be one of {tuple(TIME_UNITS)}")
    if zero_tokens not in ("drop", "clip"):
        raise ValueError(f"zero_tokens={zero_tokens!r}: must be 'drop' or 'clip'")
    if speedup is not None and rate is not None:
        raise ValueError(f"speedup={speedup!r}, rate={rate!r}: give at most one of them")
    df = _read_table(source)
    fmt, mapping, unit = _resolve_format(df, format, columns, timestamp_unit)

    t = _timestamps(df[mapping["arrival"]], unit)
    lengths = {role: _lengths(df[mapping[role]]) for role in ("prompt", "output")}
    bad, where = _bad_rows(t, lengths, mapping)
    keep = ~bad
    if where:
        row, column, rule = where[0]
        value = df[column].iloc[row]
        if not drop_bad:
            raise ValueError(f"row {row} (0-based data row), column {column!r}: {value!r} "
                             f"{rule}; {len(where)} bad row(s) in all (drop_bad=True drops "
                             "them)")
        warnings.warn(f"read_trace: dropped {len(where)} bad row(s) of {t.size} (first: row "
                      f"{row}, column {column!r}: {value!r} {rule})", stacklevel=2)
    prompt = lengths["prompt"][keep].astype(np.int64)
    output = lengths["output"][keep].astype(np.int64)
    t = t[keep]
    cls = np.zeros(t.size, np.int64)
    if "class" in mapping:
        cls = pd.factorize(df[mapping["class"]].to_numpy()[keep], sort=True)[0]
        cls = np.maximum(cls, 0).astype(np.int64)
    blocks, size = None, None
    if "blocks" in mapping:
        size = block_size if block_size is not None else fmt.block_size
        if size is None:
            raise ValueError(f"columns: the blocks column {mapping['blocks']!r} needs "
                             "block_size= (tokens per id)")
        check_positive("block_size", size, integer=True)
        blocks = _prefix_blocks(df[mapping["blocks"]].to_numpy()[keep], np.flatnonzero(keep),
                                prompt, int(size), mapping["blocks"])

    zero = (prompt == 0) | (output == 0)
    if zero.any():
        count = int(zero.sum())
        if zero_tokens == "drop":
            prompt, output, t, cls = prompt[~zero], output[~zero], t[~zero], cls[~zero]
            blocks = None if blocks is None else blocks[~zero]
            what = "dropped"
        else:
            prompt, output = np.maximum(prompt, 1), np.maximum(output, 1)
            what = "counted as 1 token"
        warnings.warn(f"read_trace: {count} request(s) with 0 prompt or 0 output tokens "
                      f"{what} (zero_tokens={zero_tokens!r})", stacklevel=2)
    if t.size == 0:
        raise ValueError(f"source: no request left to replay from {len(df)} row(s)")

    arrival = (t - t[0]) / TIME_UNITS[time_unit]
    if window is not None:
        start, end = _window(window)
        sel = (arrival >= start) & (arrival < end)
        if not sel.any():
            raise ValueError(f"window={window!r}: no request arrives in it (the trace spans "
                             f"[0, {arrival[-1]:.6g}] {time_unit})")
        arrival, prompt, output, cls = (a[sel] for a in (arrival, prompt, output, cls))
        blocks = None if blocks is None else blocks[sel]
        arrival = arrival - start
    if speedup is not None:
        check_positive("speedup", speedup)
        arrival = _scaled(arrival, 1 / float(speedup), "speedup", speedup)
    zeros = np.zeros(arrival.size, np.int64)
    trace = Trace(arrival, prompt, output, cls, output.copy(), output.copy(), zeros,
                  blocks=blocks, block_size=None if blocks is None else int(size))
    return trace if rate is None else with_rate(trace, rate)


def mean_rate(trace: Trace) -> float:
    """``(n − 1) / (t_last − t_first)``: arrivals per time unit of a recorded trace.

    Parameters
    ----------
    trace : Trace
        The recorded requests.

    Returns
    -------
    float
        The mean rate, requests per time unit of the trace's arrivals.

    Raises
    ------
    ValueError
        If the trace has fewer than two requests or they all arrive at once.
    """
    t = trace.arrival
    span = float(t[-1] - t[0]) if t.size else 0.0
    if t.size < 2 or span <= 0:
        raise ValueError(f"trace: {t.size} request(s) over a span of {span}; a rate needs "
                         "two distinct arrival times")
    return (t.size - 1) / span


def with_rate(trace: Trace, rate: float) -> Trace:
    """``trace`` with every arrival time scaled by one factor so that its mean rate is
    ``rate``: the burstiness (CV, index of dispersion at a scaled window) is kept.

    Parameters
    ----------
    trace : Trace
        The recorded requests.
    rate : float
        The target mean rate, requests per time unit (> 0).

    Returns
    -------
    Trace
        A copy with rescaled arrivals; lengths, classes and blocks unchanged.

    Raises
    ------
    ValueError
        If ``rate`` is not positive, :func:`mean_rate` is undefined for ``trace``, or the
        rescaled arrivals pass :data:`MAX_ARRIVAL`.
    """
    check_positive("rate", rate)
    factor = mean_rate(trace) / float(rate)
    return replace(trace, arrival=_scaled(trace.arrival, factor, "rate", rate))


#: The latest arrival time a rescaled trace may have: past 2**53 time units, adding a batch's
#: duration to the clock is lost in floating-point rounding.
MAX_ARRIVAL = float(2**53)


def _scaled(arrival: np.ndarray, factor: float, name: str, value) -> np.ndarray:
    """``arrival × factor``, or a ValueError naming ``name`` when the times leave the range a
    simulation can step through (``MAX_ARRIVAL``)."""
    with np.errstate(all="ignore"):
        out = arrival * factor
        last = float(out[-1]) if out.size else 0.0
    if not (np.isfinite(factor) and np.isfinite(last) and last <= MAX_ARRIVAL):
        raise ValueError(f"{name}={value!r}: the rescaled arrivals reach {last:.3g} time units, "
                         f"past {MAX_ARRIVAL:.3g} (2**53), where a batch's duration is lost in "
                         "floating-point rounding")
    return out


def _window(window) -> tuple[float, float]:
    try:
        start, end = (float(x) for x in window)
    except (TypeError, ValueError):
        raise ValueError(f"window={window!r}: expected (start, end)") from None
    if not (np.isfinite(start) and start >= 0 and end > start):
        raise ValueError(f"window={window!r}: need 0 <= start < end")
    return start, end
