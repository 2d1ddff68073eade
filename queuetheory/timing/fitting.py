"""Time models fitted to measured batch durations.

:func:`fit` takes one row per measured batch — ``prefill_tokens`` (Σ δ^p), ``decode_tokens``
(Σ δ^d, one per decode member), ``kv_tokens`` (the members' KV tokens after the batch,
:attr:`BatchLoad.kv_tokens`) and ``duration`` — and returns a :class:`FitReport` holding a
fitted model of the package's classes, the parameters with 95 % intervals, the held-out
error and a residual plot. The families, with ``B = prefill_tokens + decode_tokens``:

============== =========================================== ==============================
model          duration                                    fitted class
============== =========================================== ==============================
affine         ``c + p·prefill + q·decode``                :class:`AffineTokenTime`
piecewise      ``c + a·max(0, B − b0)`` (Li, Dai, Peng 2.3) :class:`PiecewiseLinearTime`
linear_memory  ``d0 + d1·kv_tokens`` (Ao et al., eq. 1)    :class:`LinearMemoryTime`
tiled          ``c0 + α·⌈B / t_col⌉ + β·B`` (Bari, Hegde,  :class:`TiledGPUTime`
               de Veciana, Eq. 4 and 7, linear part)
============== =========================================== ==============================

Conventions: least squares on **relative** residuals ``(fit − y) / y`` by default (batch
times span orders of magnitude; an absolute fit would ignore the small batches), or on
absolute ones with ``relative=False``. The intervals (``intervals="jacobian"``, the default)
are ``θ ± t_{0.975} · se`` with the covariance ``s² (JᵀJ)⁻¹`` of the Jacobian ``J`` at the
optimum (for ``tiled``, given the chosen tile width ``t_col``, picked from multiples of 8 up
to 512 by least squares), clipped at 0 where the parameter cannot be negative. They are
local: they ignore the choice of ``t_col`` and the kink ``b0`` of ``piecewise`` moving with
the data. ``intervals="bootstrap"`` refits the family on resampled rows (pairs bootstrap,
:func:`scipy.stats.bootstrap`, percentile intervals, the standard errors the resamples'
spread), which carries those choices, at ``resamples`` refits' cost. The **held-out error**
is the root mean square relative error of ``k``-fold cross-validation (every fold refits
the family, ``t_col`` and ``b0`` included; fixed seed); ``model="best"`` picks the family
with the smallest one.

The tiled family fits the linear-layer staircase of Eq. 4 plus a per-token term (Eq. 7's
``τ/μ_nLin``) and the overhead ``c0``. Turning it into a :class:`TiledGPUTime` needs the
model's shape (``dims``) and the GPU's SM count and memory bandwidth (``gpu_spec``): the
GeMM speed is set so that Eq. 4 gives the fitted step ``α``; attention is not fitted
(per-batch totals cannot separate it), its GeMV speed comes from the bandwidth
(:meth:`GPUModel.from_efficiency`'s rule), which the report says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from math import gcd

import numpy as np
import pandas as pd
from scipy import optimize, stats

from ..errors import check_seed
from .gpu import AssumptionError, GPUModel, ModelDims, TiledGPUTime
from .models import AffineTokenTime, LinearMemoryTime, PiecewiseLinearTime, TimeModel

__all__ = ["fit", "FitReport", "FAMILIES", "COLUMNS", "GPU_SPECS"]

FAMILIES = ("affine", "piecewise", "linear_memory", "tiled")
COLUMNS = ("prefill_tokens", "decode_tokens", "kv_tokens", "duration")
TILE_WIDTHS = tuple(range(8, 513, 8))

#: SM counts and HBM bandwidths (bytes/s) from the vendors' data sheets (A100 80 GB SXM,
#: H100 80 GB SXM): not measured, used only for the attention GeMV speed of a tiled fit
GPU_SPECS = {"a100": {"sms": 108, "bandwidth": 2.039e12},
             "h100": {"sms": 132, "bandwidth": 3.35e12}}


@dataclass
class FitReport:
    """A fitted time model and how well it fits.

    ``params``/``intervals``/``stderr`` are in the duration's unit (per token where the
    parameter is a per-token cost); ``heldout_error`` is the cross-validated RMS relative
    error (0.05 = 5 %); ``comparison`` (for ``model="best"``) has every family's.

    Attributes
    ----------
    family : str
        The family fitted (``"affine"``, ``"piecewise"``, ``"linear_memory"``, ``"tiled"``).
    model : TimeModel
        The fitted model, in the measurements' time unit.
    params : dict
        ``{parameter: estimate}``.
    stderr : dict
        ``{parameter: standard error}``.
    intervals : dict
        ``{parameter: (lo, hi)}``, the 95 % intervals.
    heldout_error : float
        The cross-validated RMS relative error.
    folds : int
        The folds of the cross-validation.
    residuals : pandas.DataFrame
        The measurements with the fit's predictions and relative residuals.
    comparison : pandas.DataFrame or None, default None
        Every family's held-out error (``model="best"``).
    notes : list of str
        What the fit assumed or left out.
    """

    family: str
    model: TimeModel
    params: dict
    stderr: dict
    intervals: dict
    heldout_error: float
    folds: int
    residuals: pd.DataFrame = field(repr=False)
    comparison: pd.DataFrame | None = field(default=None, repr=False)
    notes: list = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        """One row per parameter: estimate, standard error, 95 % interval.

        Returns
        -------
        pandas.DataFrame
            Indexed by parameter: ``estimate``, ``stderr``, ``lo95``, ``hi95``.
        """
        return pd.DataFrame({"estimate": self.params, "stderr": self.stderr,
                             "lo95": {k: v[0] for k, v in self.intervals.items()},
                             "hi95": {k: v[1] for k, v in self.intervals.items()}})

    def plot_residuals(self, ax=None, *, unit: str = "s"):
        """Relative residuals ``(fit − measured) / measured`` against the token load.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            The Axes to draw on; default a new figure.
        unit : str, default "s"
            The measurements' time unit, for the labels.

        Returns
        -------
        matplotlib.axes.Axes
            The Axes drawn on.
        """
        from ..plotting import finish, new_axes, reference, series_style

        ax = new_axes(ax)
        r = self.residuals
        style = series_style(0)
        style.update(linestyle="none")
        ax.plot(r["tokens"], 100 * r["relative"], label=f"{self.family} fit", **style)
        reference(ax, 0.0, "perfect fit")
        return finish(ax, title=f"{self.family} fit: residuals (held-out RMS error "
                      f"{100 * self.heldout_error:.2g} %)",
                      xlabel="batch token load B = prefill + decode (tokens)",
                      ylabel="(fit − measured) / measured (%)", x=r["tokens"], logy=False)


# ---- the families: fixed design, least squares, Jacobian --------------------------------------

@dataclass
class _Fitted:
    names: tuple
    theta: np.ndarray
    jac: np.ndarray                     # Jacobian of the weighted residuals at theta
    predict: object                     # X -> durations
    extra: dict = field(default_factory=dict)


def _weights(y, relative):
    return 1.0 / y if relative else np.ones_like(y)


def _linear(features: np.ndarray, y, w, names) -> _Fitted:
    """Least squares with every coefficient >= 0 on the weighted design."""
    A = features * w[:, None]
    sol = optimize.lsq_linear(A, y * w, bounds=(0, np.inf), method="bvls")
    theta = sol.x
    return _Fitted(names, theta, A, None)


def _fit_affine(X, y, w):
    B = X["prefill_tokens"] + X["decode_tokens"]
    tied = not (X["prefill_tokens"].any() and X["decode_tokens"].any())
    if tied:
        f = _linear(np.column_stack([np.ones_like(y), B]), y, w, ("c", "per_token"))
        f.predict = lambda Z, t=f.theta: t[0] + t[1] * (Z["prefill_tokens"] + Z["decode_tokens"])
    else:
        f = _linear(np.column_stack([np.ones_like(y), X["prefill_tokens"], X["decode_tokens"]]),
                    y, w, ("c", "per_prefill", "per_decode"))
        f.predict = lambda Z, t=f.theta: (t[0] + t[1] * Z["prefill_tokens"]
                                          + t[2] * Z["decode_tokens"])
    f.extra["tied"] = tied
    return f


def _fit_linear_memory(X, y, w):
    f = _linear(np.column_stack([np.ones_like(y), X["kv_tokens"]]), y, w, ("d0", "d1"))
    f.predict = lambda Z, t=f.theta: t[0] + t[1] * Z["kv_tokens"]
    return f


def _piecewise(theta, B):
    c, a, b0 = theta
    return c + a * np.maximum(0.0, B - b0)


def _fit_piecewise(X, y, w):
    B = (X["prefill_tokens"] + X["decode_tokens"]).astype(float)
    best = None
    for b0 in np.unique(np.quantile(B, np.linspace(0, 0.9, 46))):
        g = _linear(np.column_stack([np.ones_like(y), np.maximum(0.0, B - b0)]), y, w, ())
        cost = np.sum((g.jac @ g.theta - y * w) ** 2)
        if best is None or cost < best[0]:
            best = (cost, np.array([*g.theta, b0]))
    x0 = best[1]
    scale = max(float(B.max()), 1.0)
    sol = optimize.least_squares(lambda t: (_piecewise(t, B) - y) * w, x0,
                                 bounds=([0, 0, 0], [np.inf, np.inf, scale]),
                                 x_scale=[max(abs(x0[0]), 1e-12), max(abs(x0[1]), 1e-12),
                                          scale / 10])
    theta = sol.x if sol.cost <= 0.5 * best[0] else x0
    c, a, b0 = theta
    jac = np.column_stack([np.ones_like(y), np.maximum(0.0, B - b0), -a * (B > b0)]) * w[:, None]
    return _Fitted(("c", "a", "b0"), theta, jac,
                   lambda Z, t=theta: _piecewise(t, Z["prefill_tokens"] + Z["decode_tokens"]))


def _fit_tiled(X, y, w, widths=TILE_WIDTHS):
    B = (X["prefill_tokens"] + X["decode_tokens"]).to_numpy(np.int64)
    best = None
    for t_col in widths:
        g = _linear(np.column_stack([np.ones_like(y), -(-B // t_col), B]), y, w,
                    ("c0", "alpha", "beta"))
        cost = float(np.sum((g.jac @ g.theta - y * w) ** 2))
        if best is None or cost < best[0]:
            best = (cost, t_col, g)
    _, t_col, g = best

    def predict(Z, t=g.theta, tc=t_col):
        b = (Z["prefill_tokens"] + Z["decode_tokens"]).to_numpy(np.int64)
        return t[0] + t[1] * -(-b // tc) + t[2] * b

    g.predict, g.extra["t_col"] = predict, t_col
    return g


_FITTERS = {"affine": _fit_affine, "piecewise": _fit_piecewise,
            "linear_memory": _fit_linear_memory, "tiled": _fit_tiled}
_BOUNDED_BELOW = {"c", "per_token", "per_prefill", "per_decode", "d0", "d1", "a", "b0", "c0",
                  "alpha", "beta"}


def _intervals(f: _Fitted, residual: np.ndarray, level=0.95):
    n, p = f.jac.shape
    dof = max(n - p, 1)
    s2 = float(residual @ residual) / dof
    norm = np.linalg.norm(f.jac, axis=0)
    norm[norm == 0] = 1.0
    scaled = f.jac / norm                   # equilibrated columns: parameters of any scale
    cov = s2 * np.linalg.pinv(scaled.T @ scaled) / np.outer(norm, norm)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    q = stats.t.ppf(0.5 + level / 2, dof)
    out = {}
    for name, v, s in zip(f.names, f.theta, se, strict=True):
        lo, hi = v - q * s, v + q * s
        out[name] = (max(lo, 0.0) if name in _BOUNDED_BELOW else lo, hi)
    return dict(zip(f.names, map(float, f.theta), strict=True)), dict(
        zip(f.names, map(float, se), strict=True)), out


def _bootstrap(X, y, w, family, f: _Fitted, resamples: int, seed: int, level=0.95):
    """Pairs bootstrap: refit ``family`` (its ``t_col`` or ``b0`` search included) on
    ``resamples`` resamples of the rows; percentile intervals and the resamples' standard
    deviations (:func:`scipy.stats.bootstrap`). Returns ``(stderr, intervals, failed)``;
    ``failed`` counts the resamples whose fit raised (their estimates are left out)."""
    p = len(f.names)
    failed = 0

    def refit(rows):
        nonlocal failed
        rows = rows.astype(np.int64)
        try:
            g = _FITTERS[family](X.iloc[rows], y[rows], w[rows])
        except (ValueError, np.linalg.LinAlgError):
            failed += 1
            return np.full(p, np.nan)
        theta = np.asarray(g.theta, float)
        return theta if theta.size == p else np.full(p, np.nan)   # affine tied in a resample

    res = stats.bootstrap((np.arange(y.size),), refit, vectorized=False,
                          n_resamples=int(resamples), confidence_level=level,
                          method="percentile", rng=np.random.default_rng(seed))
    lo, hi = res.confidence_interval
    intervals = {name: (float(a), float(b)) for name, a, b in zip(f.names, lo, hi, strict=True)}
    stderr = dict(zip(f.names, map(float, res.standard_error), strict=True))
    return stderr, intervals, failed


def _heldout(X, y, family, relative, folds, seed):
    n = y.size
    perm = np.random.default_rng(seed).permutation(n)
    errors = np.empty(n)
    for k in range(folds):
        test = perm[k::folds]
        train = np.setdiff1d(perm, test)
        f = _FITTERS[family](X.iloc[train], y[train], _weights(y[train], relative))
        errors[test] = (np.asarray(f.predict(X.iloc[test]), float) - y[test]) / y[test]
    return float(np.sqrt(np.mean(errors ** 2)))


def _tile_sides(dims: ModelDims, cap: int = 128) -> int:
    g = 0
    for v in (dims.d_x, dims.d, dims.d_ff, dims.d_out):
        g = gcd(g, v)
    side = 1
    while side * 2 <= cap and g % (side * 2) == 0:
        side *= 2
    return side


def _tiled_model(theta, t_col, dims: ModelDims, gpu_spec: dict, notes: list) -> TiledGPUTime:
    """A TiledGPUTime whose Eq. 4 step is ``alpha``: ``μ = K_lin / (s α t_row t_red)``."""
    c0, alpha, beta = theta
    if alpha <= 0:
        raise ValueError("tiled: the fitted staircase step alpha is 0 (no staircase in the "
                         "data); use the affine or piecewise fit")
    side = _tile_sides(dims)
    tile = (side, int(t_col), side)
    s = int(gpu_spec["sms"])
    mu = dims.K_lin / (s * alpha * side * side)
    vr = vc = 64 if dims.kv_width % 64 == 0 else _tile_sides(dims)
    gpu = GPUModel(s, {tile: mu}, {(vr, vc): float(gpu_spec["bandwidth"]) / (2 * vr * vc)},
                   inv_mu_nlin=float(beta), c0=float(c0))
    model = TiledGPUTime(dims, gpu, tile, check=False)
    notes.append(f"tiled: tile (t_row, t_col, t_red) = {tile} with t_row = t_red = {side} "
                 "(the largest power of two <= 128 dividing the model's widths; only t_col "
                 f"is fitted); SMs = {s}; attention not fitted: decode GeMV speed from the "
                 f"bandwidth {gpu_spec['bandwidth']:.4g} B/s (data sheet)")
    try:
        gpu.check_assumption2(dims.d, dims.d_x, t=tile)
    except AssumptionError as err:
        notes.append(f"tiled: Assumption 2 of Bari, Hegde, de Veciana fails for the fitted "
                     f"speeds ({err})")
    return model


def _build(family, f: _Fitted, dims, gpu_spec, notes) -> TimeModel:
    t = f.theta
    if family == "affine":
        per_p, per_d = (t[1], t[1]) if f.extra["tied"] else (t[1], t[2])
        if f.extra["tied"]:
            notes.append("affine: prefill_tokens or decode_tokens is 0 in every row, so the "
                         "two per-token costs cannot be told apart; one cost per token is "
                         "fitted and used for both")
        return AffineTokenTime(max(t[0], 1e-300), per_p, per_d)
    if family == "piecewise":
        return PiecewiseLinearTime(max(t[0], 1e-300), t[1], t[2])
    if family == "linear_memory":
        return LinearMemoryTime(t[0], t[1])
    return _tiled_model(t, f.extra["t_col"], dims, gpu_spec, notes)


def _measurements(data) -> tuple[pd.DataFrame, np.ndarray]:
    if not isinstance(data, pd.DataFrame):
        raise ValueError(f"measurements: expected a pandas DataFrame with columns {COLUMNS}, "
                         f"got {type(data).__name__}")
    missing = [c for c in COLUMNS if c not in data.columns]
    if missing:
        raise ValueError(f"measurements: missing column(s) {missing}; need {COLUMNS}")
    X = data[list(COLUMNS[:3])].reset_index(drop=True)
    y = pd.to_numeric(data["duration"], errors="coerce").to_numpy(dtype=float)
    for c in COLUMNS[:3]:
        v = pd.to_numeric(X[c], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(v) | (v < 0) | (v != np.floor(v)) | (v > 2**53))
        if bad.size:
            raise ValueError(f"measurements: row {bad[0]}, column {c!r}: {X[c].iloc[bad[0]]!r} "
                             "must be a non-negative integer token count (at most 2**53)")
        X[c] = v
    bad = np.flatnonzero(~np.isfinite(y) | (y <= 0))
    if bad.size:
        raise ValueError(f"measurements: row {bad[0]}, column 'duration': "
                         f"{data['duration'].iloc[bad[0]]!r} must be a finite duration > 0")
    return X.astype(np.int64), y


def _integer_at_least(value, low: int) -> bool:
    """Whether ``value`` is a finite integer (an int or a whole float, not a string)
    ``>= low``."""
    if isinstance(value, str | bytes):
        return False
    try:
        v = float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool) and math.isfinite(v) and v == int(v) and v >= low


def fit(measurements, model: str = "best", *, relative: bool = True, folds: int = 5,
        seed: int = 0, dims: ModelDims | None = None, gpu_spec: dict | str | None = None,
        intervals: str = "jacobian", resamples: int = 200) -> FitReport:
    """Fit a batch-time model to measured batches (see the module docstring).

    Parameters
    ----------
    measurements : pandas.DataFrame
        Columns ``prefill_tokens``, ``decode_tokens``, ``kv_tokens`` and ``duration`` (any
        time unit; the fitted model is in the same unit).
    model : str, default "best"
        ``"affine"``, ``"piecewise"``, ``"linear_memory"``, ``"tiled"`` or ``"best"`` (the
        family with the smallest held-out error; ``tiled`` competes only with ``dims``).
    relative : bool, default True
        Least squares on relative residuals, else on absolute ones.
    folds : int, default 5
        The k of the k-fold cross-validation of the held-out error (at least 2).
    seed : int, default 0
        The seed of the folds and of the bootstrap.
    dims : ModelDims, optional
        The model's shape, needed to turn a tiled fit into a :class:`TiledGPUTime`.
    gpu_spec : str or dict, optional
        ``"a100"``, ``"h100"`` or ``{"sms": ..., "bandwidth": ...}`` (tiled only; default
        ``"a100"``).
    intervals : str, default "jacobian"
        ``"jacobian"`` or ``"bootstrap"`` (``resamples`` refits of the chosen family on
        resampled rows, seeded by ``seed``); see the module docstring.
    resamples : int, default 200
        The bootstrap's refits (at least 20).

    Returns
    -------
    FitReport
        The fitted model, its parameters with intervals and its held-out error.

    Raises
    ------
    ValueError
        If ``measurements`` is not a DataFrame with the columns above, holds a negative or
        non-finite count or a non-positive duration, has fewer than ``2 * folds`` rows, or
        an option is not one of those listed (``model="tiled"`` without ``dims``
        included); a tiled fit with no staircase.
    """
    if model not in (*FAMILIES, "best"):
        raise ValueError(f"model={model!r}: must be one of {(*FAMILIES, 'best')}")
    if not _integer_at_least(folds, 2):
        raise ValueError(f"folds={folds!r}: must be an integer >= 2")
    check_seed(seed)
    if intervals not in ("jacobian", "bootstrap"):
        raise ValueError(f"intervals={intervals!r}: must be 'jacobian' or 'bootstrap'")
    if intervals == "bootstrap" and not _integer_at_least(resamples, 20):
        raise ValueError(f"resamples={resamples!r}: must be an integer >= 20")
    X, y = _measurements(measurements)
    if y.size < 2 * folds:
        raise ValueError(f"measurements: {y.size} rows; need at least {2 * folds} for "
                         f"{folds}-fold cross-validation")
    if model == "tiled" and dims is None:
        raise ValueError("model='tiled': give dims=ModelDims(...) (the model's shape)")
    spec = GPU_SPECS.get(gpu_spec or "a100") if not isinstance(gpu_spec, dict) else gpu_spec
    if spec is None:
        raise ValueError(f"gpu_spec={gpu_spec!r}: must be one of {tuple(GPU_SPECS)} or a dict")
    families = [model] if model != "best" else [f for f in FAMILIES
                                                if f != "tiled" or dims is not None]
    errors = {f: _heldout(X, y, f, relative, int(folds), seed) for f in families}
    chosen = min(errors, key=errors.get)
    w = _weights(y, relative)
    f = _FITTERS[chosen](X, y, w)
    fitted = np.asarray(f.predict(X), float)
    params, se, bands = _intervals(f, (fitted - y) * w)
    notes = [] if model != "best" or dims is not None else [
        "best: the tiled family was not tried (no dims given)"]
    if intervals == "bootstrap":
        se, bands, failed = _bootstrap(X, y, w, chosen, f, resamples, seed)
        notes.append(f"intervals: pairs bootstrap, {int(resamples)} resamples, percentile"
                     + (f"; {failed} resamples failed to fit and were left out" if failed
                        else ""))
    if "t_col" in f.extra:
        params["t_col"] = float(f.extra["t_col"])
    built = _build(chosen, f, dims, spec, notes)
    tokens = X["prefill_tokens"] + X["decode_tokens"]
    residuals = pd.DataFrame({"tokens": tokens, "measured": y, "fitted": fitted,
                              "relative": (fitted - y) / y})
    comparison = None
    if model == "best":
        comparison = pd.DataFrame({"heldout_error": errors}).sort_values("heldout_error")
    return FitReport(chosen, built, params, se, bands, errors[chosen], int(folds),
                     residuals, comparison, notes)
