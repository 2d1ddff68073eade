"""Batch time from a GPU's own operator profile: one iteration composed layer by layer.

A profile times each operator of one decoder layer on the GPU: the dense operators by the
number of tokens in the batch, attention by the batch's prefill chunk, that chunk's cached
history, the number of decodes and their KV lengths, the LM head and the sampler by the
number of sequences. :class:`ProfileTime` composes one iteration from them as the serving
engine runs it (LLMServingSim 2.0's composition, Cho et al., arXiv 2602.23036)::

    embedding + L × [2·layernorm + qkv_proj + rotary_emb + attention + o_proj
                     + gate_up_proj + act_fn + down_proj] + final_layernorm
    + lm_head(sequences) + sampler(sequences)

with ``L`` decoder layers. Decodes of unequal KV lengths are priced at their mean length and
moved towards the price at their longest by the profile's fitted skew factor ``α`` (its
``skew_fit`` table, by batch shape): ``t = t_mean + α (t_max − t_mean)``.

Two layouts are read:

- LLMServingSim 2.0's profiler bundle (``meta.yaml`` and ``tp<N>/{dense, attention,
  per_sequence, skew_fit}.csv``, times in µs): :meth:`OperatorProfile.from_llmservingsim`;
- Vidur's (``mlp.csv`` with ``time_stats.<op>.median`` in ms by ``num_tokens``, and, where
  the user has it, Vidur's ``attention.csv``): :meth:`OperatorProfile.from_vidur`.

Every table is interpolated linearly on each axis (scipy). Below a grid's smallest value the
lookup holds the smallest (launch-bound kernels); above its largest it extrapolates linearly
and warns :class:`ProfileRangeWarning` naming the axis and the value, or raises with
``outside="error"``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.interpolate import RegularGridInterpolator, make_interp_spline

from ..errors import QueueTheoryError
from .models import BatchLoad, TimeModel

__all__ = ["OperatorProfile", "ProfileTime", "ProfileRangeWarning", "ProfileError",
           "MODEL_LAYERS"]

#: decoder layers of the models whose profiles are read by name (a profile times one layer)
MODEL_LAYERS = {
    "meta-llama/Llama-3.1-8B": 32, "meta-llama/Meta-Llama-3-8B": 32,
    "meta-llama/Llama-2-7b-hf": 32, "meta-llama/Llama-3.1-70B": 80,
    "meta-llama/Llama-2-70b-hf": 80, "Qwen/Qwen3-32B": 64,
}
#: the operators of one decoder layer, with how many times a layer calls each
LAYER_OPS = {"layernorm": 2, "qkv_proj": 1, "rotary_emb": 1, "o_proj": 1, "gate_up_proj": 1,
             "act_fn": 1, "down_proj": 1}
MODEL_OPS = ("embedding", "final_layernorm")
SEQUENCE_OPS = ("lm_head", "sampler")
#: Vidur's operator names mapped onto the same composition (its ``add`` is the residual add,
#: twice a layer; it profiles no LM head, sampler or final norm)
VIDUR_LAYER_OPS = {"input_layernorm": 1, "post_attention_layernorm": 1, "attn_pre_proj": 1,
                   "attn_rope": 1, "attn_post_proj": 1, "mlp_up_proj": 1, "mlp_act": 1,
                   "mlp_down_proj": 1, "add": 2}
ATTENTION_COLUMNS = ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us")


class ProfileError(QueueTheoryError, ValueError):
    """A profile that cannot be read: a missing file, column or layer (named)."""


class ProfileRangeWarning(UserWarning):
    """A lookup outside a profiled grid, extrapolated linearly."""


def _read(path: Path, columns) -> pd.DataFrame:
    path = Path(path)
    if not path.exists() and Path(f"{path}.gz").exists():
        path = Path(f"{path}.gz")
    if not path.exists():
        raise ProfileError(f"profile file {path} not found")
    df = pd.read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ProfileError(f"{path.name}: missing column(s) {missing}; has {list(df.columns)}")
    return df


class _Range:
    """Where lookups leave a grid: clamp below, extrapolate (warn once) or refuse above."""

    def __init__(self, name: str, outside: str):
        if outside not in ("warn", "error", "allow"):
            raise ValueError(f"outside={outside!r}: must be 'warn', 'error' or 'allow'")
        self.name, self.outside, self._warned = name, outside, set()

    def check(self, axis: str, value: float, top: float) -> None:
        if value <= top or self.outside == "allow":
            return
        msg = (f"{self.name}: {axis}={value:g} is above the profiled grid (largest "
               f"{top:g}); the time is extrapolated linearly")
        if self.outside == "error":
            raise ProfileError(msg.replace("the time is extrapolated linearly",
                                           "outside='error' refuses to extrapolate"))
        if axis not in self._warned:
            self._warned.add(axis)
            warnings.warn(msg, ProfileRangeWarning, stacklevel=4)


@dataclass(frozen=True)
class _Curve:
    """One operator's time (µs) against one count, linear between the profiled points."""

    x: np.ndarray
    spline: object = field(repr=False)

    @classmethod
    def of(cls, x, y) -> _Curve:
        order = np.argsort(x)
        x, y = np.asarray(x, float)[order], np.asarray(y, float)[order]
        x, keep = np.unique(x, return_index=True)
        y = y[keep]
        if x.size < 2:
            raise ProfileError(f"a curve needs at least two profiled points, got {x.size}")
        return cls(x, make_interp_spline(x, y, k=1))

    def __call__(self, v: float) -> float:
        return float(self.spline(max(v, self.x[0])))

    @classmethod
    def total(cls, parts) -> _Curve:
        """``Σ w · curve`` of ``parts`` (pairs ``(w, curve)``) as one curve: on the union of
        their points a sum of linear interpolants is the interpolant of the sums, so one
        lookup gives what the lookups of every part add up to."""
        x = np.unique(np.concatenate([c.x for _, c in parts]))
        return cls.of(x, sum(w * c.spline(x) for w, c in parts))


def _complete_grid(df: pd.DataFrame, axes: tuple[str, ...]):
    """Every profiled point of ``df`` on the product of its axis values, the cells the
    profiler did not measure filled by linear interpolation along one axis.

    Profilers sweep a main grid and add off-grid points (LLMServingSim's 1.5× steps), so the
    union of the axis values is not fully measured. A missing cell is interpolated along the
    last axis first (a KV length: attention is close to linear in it), then the one before,
    between measured (or already filled) cells of its line; a cell still empty then takes
    its line's nearest value. Returns the axis values and the filled times, shaped by them.
    """
    df = df.drop_duplicates(subset=list(axes))
    values = tuple(np.sort(df[a].unique()).astype(float) for a in axes)
    grid = np.full([v.size for v in values], np.nan)
    index = tuple(np.searchsorted(v, df[a].to_numpy(float)) for v, a in zip(values, axes,
                                                                            strict=True))
    grid[index] = df["time_us"].to_numpy(float)
    for clamp in (False, True):
        for k in reversed(range(len(axes))):
            if not np.isnan(grid).any():
                break
            lines = np.moveaxis(grid, k, -1).reshape(-1, values[k].size)
            for i in np.flatnonzero(np.isnan(lines).any(axis=1)):
                line = lines[i]                      # a view: filled in place
                known = ~np.isnan(line)
                if known.sum() >= (1 if clamp else 2):
                    x = values[k]
                    fill = ~known if clamp else ~known & (x > x[known][0]) & (x < x[known][-1])
                    line[fill] = np.interp(x[fill], x[known], line[known])
            grid = np.moveaxis(lines.reshape(np.moveaxis(grid, k, -1).shape), -1, k)
    if np.isnan(grid).any():
        raise ProfileError(f"attention.csv: the rows over {axes} leave cells no line reaches")
    return values, grid


class _Grid:
    """A full product grid of attention times, interpolated linearly on every axis."""

    def __init__(self, df, axes):
        self.axes = axes
        self.values, times = _complete_grid(df, axes)
        self.lo = np.array([v[0] for v in self.values])
        self.hi = np.array([v[-1] for v in self.values])
        self.rgi = RegularGridInterpolator(self.values, times, bounds_error=False,
                                           fill_value=None)

    def __call__(self, points: np.ndarray, rng: _Range) -> np.ndarray:
        points = np.maximum(points, self.lo)
        top = points.max(axis=0)
        for k, axis in enumerate(self.axes):
            rng.check(axis, top[k], self.hi[k])
        return self.rgi(points)


class _Skew:
    """The profile's fitted skew factor α by batch shape (LLMServingSim's ``skew_fit``)."""

    def __init__(self, table: pd.DataFrame, axes: dict, default: float):
        self.default = float(default)
        self.bins = {k: np.asarray(axes[f"{k}_bins"], float)
                     for k in ("n", "skew_rate", "kv_big", "kp")}
        self.labels = {k: list(axes[f"{k}_labels"]) for k in ("n", "skew_rate", "kv_big", "kp")}
        self.alpha = {(int(r.pc), r.n_label, r.skew_rate_label, r.kv_big_label, r.kp_label):
                      float(r.alpha) for r in table.itertuples()}

    def _label(self, axis, v):
        i = int(np.searchsorted(self.bins[axis], v, side="left")) - 1
        return self.labels[axis][min(max(i, 0), len(self.labels[axis]) - 1)]

    def __call__(self, pc, n, skew_rate, kv_big, kp) -> float:
        """α of the batch's bucket where the profile fitted one (its chunk ``pc`` a profiled
        one), else the profile's pooled α.

        This is the profile producer's own rule (LLMServingSim's ``_skew_alpha``). Each
        bucket's α is fitted on 1–8 skewed batches, the pooled one on about 13,000; a batch
        whose chunk was not profiled gets the pooled fit rather than a neighbouring
        bucket's. Borrowing the nearest profiled chunk's bucket, or interpolating between
        the two nearest, was tried on the RTX PRO 6000 run and predicted it worse (docs,
        *Accuracy against real engines*)."""
        key = (int(pc), self._label("n", n), self._label("skew_rate", skew_rate),
               self._label("kv_big", kv_big), self._label("kp", kp))
        return self.alpha.get(key, self.default)


class _GridAttention:
    """Attention from LLMServingSim's 4-axis grid: decode-only, prefill-only and mixed
    calls each from their own product grid. A mixed call with more decodes than its grid
    holds adds the decode-only grid's cost of the extra decodes."""

    def __init__(self, df: pd.DataFrame, skew: _Skew | None):
        pc, nd = df["prefill_chunk"], df["n_decode"]
        parts = {"decode": ((pc == 0) & (df["kv_prefill"] == 0), ("n_decode", "kv_decode")),
                 "prefill": ((nd == 0) & (df["kv_decode"] == 0), ("prefill_chunk", "kv_prefill")),
                 "mixed": ((pc > 0) & (nd > 0), ("prefill_chunk", "kv_prefill", "n_decode",
                                                  "kv_decode"))}
        self.grids = {}
        for name, (rows, axes) in parts.items():
            if not rows.any():
                raise ProfileError(f"attention.csv: no {name} rows (needs {axes})")
            self.grids[name] = _Grid(df[rows], axes)
        self.skew = skew

    def _uniform(self, pc, kp, nd, kv, rng) -> np.ndarray:
        """Attention (µs) at each KV length of ``kv``, every decode at that length."""
        kv = np.asarray(kv, float)
        if nd == 0:
            return self.grids["prefill"](np.array([[pc, kp]]), rng).repeat(kv.size)
        dec = self.grids["decode"]
        if pc == 0:
            return dec(np.column_stack([np.full(kv.size, nd), kv]), rng)
        mixed = self.grids["mixed"]
        top = mixed.hi[2]
        at = np.column_stack([np.full(kv.size, pc), np.full(kv.size, kp),
                              np.full(kv.size, min(nd, top)), kv])
        t = mixed(at, rng)
        if nd > top:        # the extra decodes priced by the decode-only grid
            t = t + dec(np.column_stack([np.full(kv.size, nd), kv]), rng) \
                - dec(np.column_stack([np.full(kv.size, top), kv]), rng)
        return t

    def __call__(self, pc, kp, decode_kv, rng) -> float:
        nd = decode_kv.size
        if nd == 0:
            return float(self._uniform(pc, kp, 0, [0.0], rng)[0])
        mean, top, low = float(decode_kv.mean()), float(decode_kv.max()), float(decode_kv.min())
        if nd == 1 or top == mean or self.skew is None:
            return float(self._uniform(pc, kp, nd, [mean], rng)[0])
        t_mean, t_max = self._uniform(pc, kp, nd, [mean, top], rng)
        alpha = self.skew(pc, nd, (mean - low) / (top - low), top, kp)
        return float(t_mean + alpha * max(t_max - t_mean, 0.0))


class _VidurAttention:
    """Attention from Vidur's ``attention.csv``: each prefill chunk by its size and cached
    history, the decodes by their number and mean KV length (Vidur's own composition)."""

    def __init__(self, df: pd.DataFrame, tp: int):
        need = ("num_tensor_parallel_workers", "batch_size", "prefill_chunk_size",
                "kv_cache_size", "is_prefill", "time_stats.attn_prefill.median",
                "time_stats.attn_decode.median")
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise ProfileError(f"Vidur attention.csv: missing column(s) {missing}")
        df = df[df["num_tensor_parallel_workers"] == tp]
        pre = df[df["is_prefill"].astype(bool)].assign(
            prefill_chunk=lambda d: d["prefill_chunk_size"], kv_prefill=lambda d: d[
                "kv_cache_size"], time_us=lambda d: 1e3 * d["time_stats.attn_prefill.median"])
        dec = df[~df["is_prefill"].astype(bool)].assign(
            n_decode=lambda d: d["batch_size"], kv_decode=lambda d: d["kv_cache_size"],
            time_us=lambda d: 1e3 * d["time_stats.attn_decode.median"])
        if pre.empty or dec.empty:
            raise ProfileError(f"Vidur attention.csv: no prefill or no decode rows at tp={tp}")
        self.prefill = _Grid(pre, ("prefill_chunk", "kv_prefill"))
        self.decode = _Grid(dec, ("n_decode", "kv_decode"))

    def __call__(self, chunks, starts, decode_kv, rng) -> float:
        t = 0.0
        if chunks.size:
            t += float(self.prefill(np.column_stack([chunks, starts]).astype(float), rng).sum())
        if decode_kv.size:
            t += float(self.decode(np.array([[decode_kv.size, decode_kv.mean()]]), rng)[0])
        return t


@dataclass(frozen=True)
class OperatorProfile:
    """One GPU's operator times for one model (µs per call of one layer).

    Build one with :meth:`from_llmservingsim` or :meth:`from_vidur`; :class:`ProfileTime`
    composes iterations from it. ``valid`` says what the profile is for (model, GPU,
    tensor parallel degree, the token and sequence ranges profiled).

    Attributes
    ----------
    name : str
        ``<hardware>/<model>/tp<N>`` (``… (Vidur)`` for a Vidur profile).
    n_layers : int
        ``L``, the model's decoder layers.
    layer_ops : dict
        ``{operator: (calls per layer, curve)}`` for the per-token operators of one layer
        (time in µs against the batch's token count).
    model_ops : dict
        ``{operator: (calls, curve)}`` for the per-token operators run once per iteration
        (embedding, final norm).
    sequence_ops : dict
        ``{operator: (calls, curve)}`` for the LM head and the sampler (µs against the
        batch's number of sequences); empty for a Vidur profile.
    attention : object
        One layer's attention time (µs) from the batch's prefill chunk, its cached history
        and the decodes' KV lengths.
    valid : dict
        What the profile is for: ``model``, ``gpu``, ``tp``, the ``tokens`` and
        ``sequences`` ranges profiled (``(min, max)``) and the largest ``kv`` length.
    missing : tuple of str, default ()
        The operators the profile lacks, left out of the iteration time.
    """

    name: str
    n_layers: int
    layer_ops: dict
    model_ops: dict
    sequence_ops: dict
    attention: object
    valid: dict
    missing: tuple = ()

    @classmethod
    def from_llmservingsim(cls, root, *, tp: int = 1, n_layers: int | None = None,
                           model: str | None = None) -> OperatorProfile:
        """Read LLMServingSim 2.0's profiler bundle.

        Parameters
        ----------
        root : str or path-like
            The bundle's folder (``<hardware>/<model>/<variant>``, with ``meta.yaml`` and
            ``tp<N>/``).
        tp : int, default 1
            Tensor parallel degree of the ``tp<N>`` folder to read.
        n_layers : int, optional
            Decoder layers ``L`` of the model (default: :data:`MODEL_LAYERS` by the bundle's
            model name).
        model : str, optional
            The model's name when ``meta.yaml`` does not give it (it overrides
            ``meta.yaml``'s where given).

        Returns
        -------
        OperatorProfile
            The bundle's dense, per-sequence and attention times (µs), with the fitted skew
            factor ``α`` where ``meta.yaml`` enables it.

        Raises
        ------
        ProfileError
            A missing file, column or layer, or a model whose layer count is unknown.
        ValueError
            If ``n_layers`` is given and not a positive integer.
        """
        import yaml

        root = Path(root)
        meta_path = root / "meta.yaml"
        if not meta_path.exists():
            raise ProfileError(f"{meta_path} not found: not an LLMServingSim profile bundle")
        meta = yaml.safe_load(meta_path.read_text()) or {}
        model = model or meta.get("model")
        n_layers = _layers(model, n_layers)
        folder = root / f"tp{tp}"
        dense = _read(folder / "dense.csv", ("layer", "tokens", "time_us"))
        seqs = _read(folder / "per_sequence.csv", ("layer", "sequences", "time_us"))
        attn = _read(folder / "attention.csv", ATTENTION_COLUMNS)
        layer_ops = _curves(dense, "tokens", LAYER_OPS, "dense.csv")
        model_ops = _curves(dense, "tokens", dict.fromkeys(MODEL_OPS, 1), "dense.csv")
        sequence_ops = _curves(seqs, "sequences", dict.fromkeys(SEQUENCE_OPS, 1),
                               "per_sequence.csv")
        skew = None
        fit = meta.get("skew_fit") or {}
        skew_csv = folder / "skew_fit.csv"
        if fit.get("enabled") and (skew_csv.exists() or Path(f"{skew_csv}.gz").exists()):
            per_tp = (fit.get("per_tp") or {}).get(tp) or {}
            table = _read(folder / "skew_fit.csv", ("pc", "n_label", "skew_rate_label",
                                                     "kv_big_label", "kp_label", "alpha"))
            skew = _Skew(table, fit["bucket_axes"], per_tp.get("alpha_default", 0.0))
        valid = {"model": model, "gpu": meta.get("gpu", meta.get("hardware")), "tp": tp,
                 "tokens": (int(dense["tokens"].min()), int(dense["tokens"].max())),
                 "sequences": (int(seqs["sequences"].min()), int(seqs["sequences"].max())),
                 "kv": int(max(attn["kv_prefill"].max(), attn["kv_decode"].max()))}
        return cls(f"{meta.get('hardware', root.name)}/{model}/tp{tp}", n_layers, layer_ops,
                   model_ops, sequence_ops, _GridAttention(attn, skew), valid)

    @classmethod
    def from_vidur(cls, mlp, attention=None, *, model: str, tp: int = 1,
                   n_layers: int | None = None, gpu: str | None = None) -> OperatorProfile:
        """Read Vidur's profiles: its ``mlp.csv`` (``num_tokens``,
        ``num_tensor_parallel_workers`` and each operator's median in ms, as
        ``time_stats.<op>.median`` or, in the package's aggregated copy
        (:func:`~queuetheory.timing.vidur_profile`'s source), ``<op>.median``) and its
        ``attention.csv`` (``batch_size``, ``prefill_chunk_size``, ``kv_cache_size``,
        ``is_prefill``, ``time_stats.attn_prefill.median``, ``time_stats.attn_decode.median``).

        Vidur profiles no LM head, sampler or final norm: they are left out (named in
        ``missing`` and in a :class:`ProfileRangeWarning`). Without ``attention`` the profile
        is refused: attention is most of a long-context decode.

        Parameters
        ----------
        mlp : str, path-like or pandas.DataFrame
            Vidur's ``mlp.csv`` (medians in ms by ``num_tokens``), or the table itself.
        attention : str, path-like or pandas.DataFrame
            Vidur's ``attention.csv`` for the same GPU and model, or the table itself;
            required (``None`` raises).
        model : str
            The model's name, for its layer count and the profile's name.
        tp : int, default 1
            The tensor parallel degree whose rows are read.
        n_layers : int, optional
            Decoder layers ``L`` (default: :data:`MODEL_LAYERS` by ``model``).
        gpu : str, optional
            The GPU's name, recorded in ``valid`` and the profile's name.

        Returns
        -------
        OperatorProfile
            The per-token operators and attention in µs; no sequence operators.

        Raises
        ------
        ProfileError
            A missing file, column, operator or tensor parallel degree, no ``attention``, or
            a model whose layer count is unknown.
        ValueError
            If ``n_layers`` is given and not a positive integer.

        Warns
        -----
        ProfileRangeWarning
            Always: the LM head, sampler and final norm are left out.
        """
        n_layers = _layers(model, n_layers)
        if attention is None:
            raise ProfileError("attention: Vidur's mlp.csv has no attention kernels; pass "
                               "Vidur's attention.csv for the same GPU and model")
        df = mlp if isinstance(mlp, pd.DataFrame) else _read(Path(mlp), ("num_tokens",))
        if "num_tensor_parallel_workers" in df.columns:
            df = df[df["num_tensor_parallel_workers"] == tp]
        elif "tp" in df.columns:
            df = df[df["tp"] == tp]
        if df.empty:
            raise ProfileError(f"mlp.csv: no rows at tp={tp}")

        def column(op):
            for name in (f"time_stats.{op}.median", f"{op}.median"):
                if name in df.columns:
                    return 1e3 * df[name].to_numpy(float)
            return None

        long = pd.concat([pd.DataFrame({"layer": op, "tokens": df["num_tokens"].to_numpy(),
                                        "time_us": column(op)})
                          for op in VIDUR_LAYER_OPS if column(op) is not None])
        layer_ops = _curves(long, "tokens", VIDUR_LAYER_OPS, "mlp.csv (<op>.median)")
        model_ops = {}
        if column("emb") is not None:
            model_ops["emb"] = (1, _Curve.of(df["num_tokens"], column("emb")))
        att = attention if isinstance(attention, pd.DataFrame) else _read(
            Path(attention), ("kv_cache_size",))
        missing = ("lm_head", "sampler", "final_layernorm")
        warnings.warn(f"the Vidur profile of {model} has no {', '.join(missing)}: "
                      "they are left out of the iteration time", ProfileRangeWarning,
                      stacklevel=2)
        valid = {"model": model, "gpu": gpu, "tp": tp,
                 "tokens": (int(df["num_tokens"].min()), int(df["num_tokens"].max())),
                 "sequences": None, "kv": int(att["kv_cache_size"].max())}
        return cls(f"{gpu}/{model}/tp{tp} (Vidur)", n_layers, layer_ops, model_ops, {},
                   _VidurAttention(att, tp), valid, missing)


def _layers(model, n_layers) -> int:
    if n_layers is None:
        if model not in MODEL_LAYERS:
            raise ProfileError(f"model={model!r}: its number of decoder layers is unknown "
                               f"(known: {sorted(MODEL_LAYERS)}); pass n_layers")
        return MODEL_LAYERS[model]
    if not (isinstance(n_layers, int) and n_layers >= 1):
        raise ValueError(f"n_layers={n_layers!r}: must be a positive integer")
    return n_layers


def _graph_sizes(sizes) -> np.ndarray | None:
    """CUDA graph sizes as sorted unique positive integers (``None`` or empty: eager)."""
    if sizes is None:
        return None
    if isinstance(sizes, str | bytes) or not hasattr(sizes, "__iter__"):
        raise ValueError(f"graph_sizes={sizes!r}: must be a sequence of positive integers "
                         "or None")
    vals = list(sizes)
    if not vals:
        return None
    if not all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 1
               for v in vals):
        raise ValueError(f"graph_sizes={sizes!r}: must be positive integers")
    return np.unique(np.asarray(vals, dtype=np.int64))


def _curves(df, key, ops: dict, source: str) -> dict:
    """``{op: (calls, curve)}`` for every operator of ``ops``; a missing one is named."""
    missing = [op for op in ops if op not in set(df["layer"])]
    if missing:
        raise ProfileError(f"{source}: missing layer(s) {missing}")
    return {op: (calls, _Curve.of(g[key], g["time_us"]))
            for op, calls in ops.items() for g in [df[df["layer"] == op]]}


class ProfileTime(TimeModel):
    """One iteration's duration composed from an :class:`OperatorProfile` (module docstring).

    The engine hands it each batch's prefill chunks with their cached history and every
    decode's own KV length (:class:`~queuetheory.timing.BatchLoad`); the dense operators
    see the batch's token count, the LM head and sampler its number of sequences.

    Parameters
    ----------
    profile : OperatorProfile
        The GPU's operator profile.
    unit : {"s", "ms", "us"}, default "s"
        The unit of the durations.
    outside : {"warn", "error", "allow"}, default "warn"
        What a lookup above a profiled grid does: ``"warn"`` (extrapolate linearly and warn
        :class:`ProfileRangeWarning` once per axis), ``"error"`` (raise
        :class:`ProfileError`) or ``"allow"`` (extrapolate silently).
    graph_sizes : sequence of int, optional
        The token counts the engine captured CUDA graphs at (vLLM's
        ``cudagraph_capture_sizes``; :func:`~queuetheory.policies.vllm.cudagraph_capture_sizes`
        reads them from a run's engine arguments), or ``None`` (default): the engine runs
        eagerly. A batch of at most the largest size is run by the graph of the next size
        up, its input rows padded: the per-token operators (every layer's dense operators,
        the embedding and the final norm) are priced at the padded count. Attention, the LM
        head and the sampler keep the real batch: the padded rows are empty requests, and
        the logits are taken at the real rows only. The launch time a graph saves is not
        modelled (the profiles time eager kernels).

    Raises
    ------
    ValueError
        If ``profile`` is not an :class:`OperatorProfile`, ``unit`` or ``outside`` is not
        one of its values, or ``graph_sizes`` is not a sequence of positive integers.
    """

    counts_only = False
    _SCALE = {"s": 1e-6, "ms": 1e-3, "us": 1.0}

    def __init__(self, profile: OperatorProfile, unit: str = "s", outside: str = "warn",
                 graph_sizes=None):
        super().__init__(None)
        if not isinstance(profile, OperatorProfile):
            raise ValueError(f"profile={profile!r}: must be an OperatorProfile")
        if unit not in self._SCALE:
            raise ValueError(f"unit={unit!r}: must be one of {tuple(self._SCALE)}")
        self.profile, self.unit = profile, unit
        self.graph_sizes = _graph_sizes(graph_sizes)
        self._range = _Range(f"ProfileTime({profile.name})", outside)
        layers = [(profile.n_layers * calls, c) for calls, c in profile.layer_ops.values()]
        self._dense = _Curve.total(layers + list(profile.model_ops.values()))
        self._sequence = (_Curve.total(list(profile.sequence_ops.values()))
                          if profile.sequence_ops else None)

    def __repr__(self) -> str:
        graphs = ("" if self.graph_sizes is None else
                  f", graph_sizes=<{self.graph_sizes.size} up to {int(self.graph_sizes[-1])}>")
        return f"ProfileTime({self.profile.name!r}, unit={self.unit!r}{graphs})"

    def padded(self, tokens: int) -> int:
        """The token count the dense operators run at: ``tokens`` rounded up to the next
        CUDA graph size, or ``tokens`` itself (eager: no graph sizes, or a batch larger
        than the largest).

        Parameters
        ----------
        tokens : int
            The batch's token count (prefill chunks plus one per decode).

        Returns
        -------
        int
            The padded token count.
        """
        g = self.graph_sizes
        if g is None or tokens <= 0 or tokens > g[-1]:
            return tokens
        return int(g[np.searchsorted(g, tokens)])

    def breakdown(self, load: BatchLoad) -> dict:
        """The iteration's time (µs) by part: ``dense`` (per-token operators, all layers),
        ``attention`` (all layers), ``sequence`` (LM head and sampler).

        Parameters
        ----------
        load : BatchLoad
            The batch: its prefill chunks with their cached history (``chunk``,
            ``chunk_start``) and each decode's KV length (``decode_context``).

        Returns
        -------
        dict
            ``{"dense": float, "attention": float, "sequence": float}`` in µs, whatever
            ``unit`` is; their sum times the unit's scale is the iteration's duration.

        Raises
        ------
        ProfileError
            With ``outside="error"``, when the batch lies above a profiled grid.

        Warns
        -----
        ProfileRangeWarning
            With ``outside="warn"``, once per axis, when the batch lies above a profiled
            grid (the time is extrapolated linearly).
        """
        p, rng = self.profile, self._range
        tokens = int(load.chunk.sum()) + int(load.decode_context.size)
        seqs = int(load.chunk.size + load.decode_context.size)
        rng.check("tokens", tokens, self._dense.x[-1])
        seq = 0.0
        if self._sequence is not None:
            rng.check("sequences", seqs, self._sequence.x[-1])
            seq = self._sequence(seqs)
        kv = load.decode_context.astype(float)
        if isinstance(p.attention, _VidurAttention):
            attn = p.attention(load.chunk, load.chunk_start, kv, rng)
        else:
            attn = p.attention(float(load.chunk.sum()), float(load.chunk_start.sum()), kv, rng)
        return {"dense": self._dense(self.padded(tokens)), "attention": p.n_layers * attn,
                "sequence": seq}

    def _raw(self, load: BatchLoad) -> float:
        return sum(self.breakdown(load).values()) * self._SCALE[self.unit]
