"""The tile-based GPU batch-time model of Bari, Hegde and de Veciana (Bari et al., Eq. 2–7).

A GPU has ``s`` streaming multiprocessors. A GeMM is cut into output tiles
``t_row × t_col`` with reduction tiles ``t_red`` (zero padded when a dimension is not a
multiple), and one tile-pair runs on one SM at speed ``μ(t_row, t_col, t_red)`` (Eq. 2); a
GeMV tile-pair runs at ``μ(t_row, t_col)`` (Eq. 3). The ceilings make the batch time a
staircase in the batch's token count.

Conventions written down once (choices of this toolkit where the paper is silent):

* ``GPUModel.mu_gemm`` holds per-SM speeds (tile-pairs per second) as in Eq. 2;
  ``GPUModel.mu_gemv`` holds *whole-GPU* speeds, because Eq. 5 has no ``1/s`` .
* ``ModelDims.d`` is the Q/K/V width of the paper's single-head abstraction, used by the
  linear layers and prefill attention; ``d_kv`` (default ``d``) is used by decode attention,
  which reads the K/V cache (GQA models have ``d_kv < d``; a toolkit option).
* A decode member whose KV cache holds ``k`` tokens computes position ``i = k + 1`` (Eq. 5);
  a prefill chunk of ``c`` tokens after ``k`` prefilled ones starts at ``i = k + 1`` and
  attends over ``i + c − 1 = k + c`` keys (Eq. 6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import lcm

import numpy as np

from ..errors import QueueTheoryError, check_positive
from .models import BatchLoad, TimeModel

__all__ = ["ModelDims", "GPUModel", "TiledGPUTime", "AssumptionError", "ceil_div"]


class AssumptionError(QueueTheoryError, ValueError):
    """A parameter set breaks one of the paper's Assumptions 1–4."""


def ceil_div(a, b):
    """``ceil(a / b)`` for non-negative integers (scalars or numpy arrays), exactly.

    Parameters
    ----------
    a : int or numpy.ndarray
        The dividend(s), ``>= 0``.
    b : int
        The divisor, ``> 0``.

    Returns
    -------
    int or numpy.ndarray
        ``ceil(a / b)``, elementwise for an array.
    """
    return -(-np.asarray(a) // b) if isinstance(a, np.ndarray) else -(-int(a) // int(b))


@dataclass(frozen=True)
class ModelDims:
    """Transformer dimensions of the paper's abstraction.

    N layers, input width ``d_x``, Q/K/V width ``d``, FFN width ``d_ff``, vocabulary
    ``d_out``; ``d_kv`` is the K/V width read by decode attention (default ``d``);
    ``n_ffn_mats`` = 2 (paper) or 3 (SwiGLU, an extension).

    Attributes
    ----------
    N : int
        Layers.
    d_x : int
        Input (hidden) width.
    d : int
        Q/K/V width of the single-head abstraction.
    d_ff : int
        FFN width.
    d_out : int
        Vocabulary size.
    d_kv : int, optional
        The K/V width read by decode attention (default ``d``).
    n_ffn_mats : int, default 2
        FFN matrices: 2 (paper) or 3 (SwiGLU).

    Raises
    ------
    ValueError
        If a width is not a positive integer or ``n_ffn_mats`` is neither 2 nor 3.
    """

    N: int
    d_x: int
    d: int
    d_ff: int
    d_out: int
    d_kv: int | None = None
    n_ffn_mats: int = 2

    def __post_init__(self):
        for name in ("N", "d_x", "d", "d_ff", "d_out"):
            check_positive(name, getattr(self, name), integer=True)
        if self.d_kv is not None:
            check_positive("d_kv", self.d_kv, integer=True)
        if self.n_ffn_mats not in (2, 3):
            raise ValueError(f"n_ffn_mats={self.n_ffn_mats}: must be 2 (paper) or 3 (SwiGLU)")

    @property
    def kv_width(self) -> int:
        """The K/V width decode attention reads: ``d_kv``, or ``d`` when unset."""
        return self.d if self.d_kv is None else self.d_kv

    @property
    def K_lin(self) -> int:
        """Weights of all linear ops: ``3N d_x d + N d d_ff + N d_ff d_x + d_x d_out``
        (plus ``N d_x d_ff`` for a third SwiGLU matrix)."""
        N = self.N
        extra = (self.n_ffn_mats - 2) * N * self.d_x * self.d_ff
        return (3 * N * self.d_x * self.d + N * self.d * self.d_ff + N * self.d_ff * self.d_x
                + extra + self.d_x * self.d_out)

    @classmethod
    def mistral_like(cls) -> ModelDims:
        """Mistral-7B-like sizes in the paper's abstraction (illustrative).

        Returns
        -------
        ModelDims
            ``N=32, d_x=4096, d=4096, d_ff=14336, d_out=32000, d_kv=1024``.
        """
        return cls(N=32, d_x=4096, d=4096, d_ff=14336, d_out=32000, d_kv=1024)


@dataclass(frozen=True)
class GPUModel:
    """GPU of Eq. 2–3: ``s`` SMs, per-SM GeMM tile-pair speeds ``mu_gemm[(t_row, t_col,
    t_red)]``, whole-GPU GeMV tile-pair speeds ``mu_gemv[(t_row, t_col)]``, seconds per token
    of all non-linear ops ``inv_mu_nlin``, and an optional per-batch overhead ``c0`` (an
    extension; 0 in the paper).

    Attributes
    ----------
    s : int
        Streaming multiprocessors.
    mu_gemm : dict
        ``{(t_row, t_col, t_red): tile-pairs per second per SM}`` (Eq. 2).
    mu_gemv : dict
        ``{(t_row, t_col): tile-pairs per second of the whole GPU}`` (Eq. 3).
    inv_mu_nlin : float, default 0.0
        Seconds per token of all non-linear ops ``1/μ_nLin``.
    c0 : float, default 0.0
        Per-batch overhead in seconds (an extension; 0 in the paper).

    Raises
    ------
    ValueError
        If ``s`` is not a positive integer, a speed or time is negative or not finite, a tile
        key is malformed, or a table is empty.
    """

    s: int
    mu_gemm: dict = field(hash=False)
    mu_gemv: dict = field(hash=False)
    inv_mu_nlin: float = 0.0
    c0: float = 0.0

    def __post_init__(self):
        check_positive("s", self.s, integer=True)
        check_positive("inv_mu_nlin", self.inv_mu_nlin, allow_zero=True)
        check_positive("c0", self.c0, allow_zero=True)
        if not self.mu_gemm or not self.mu_gemv:
            raise ValueError("mu_gemm, mu_gemv: need at least one tile configuration each")
        for t, mu in self.mu_gemm.items():
            if len(t) != 3 or min(t) < 1:
                raise ValueError(f"mu_gemm key {t!r}: must be (t_row, t_col, t_red) >= 1")
            check_positive(f"mu_gemm[{t}]", mu)
        for t, mu in self.mu_gemv.items():
            if len(t) != 2 or min(t) < 1:
                raise ValueError(f"mu_gemv key {t!r}: must be (t_row, t_col) >= 1")
            check_positive(f"mu_gemv[{t}]", mu)

    @classmethod
    def from_efficiency(cls, *, s: int = 142, peak_flops: float = 150e12,
                        efficiency: dict | None = None, gemv_tile=(64, 64),
                        gemv_bandwidth: float = 960e9, inv_mu_nlin: float = 2e-6,
                        c0: float = 0.0) -> GPUModel:
        """Speeds from a useful-FLOP efficiency per tile: ``2 s μ(t) t_row t_col t_red =
        efficiency(t) · peak_flops``; the GeMV tile is memory bound (fp16 tile read at
        ``gemv_bandwidth``). Defaults: the illustrative set of spec §9 (NOT from the paper).

        Parameters
        ----------
        s : int, default 142
            Streaming multiprocessors.
        peak_flops : float, default 150e12
            Peak FLOP/s of the GPU.
        efficiency : dict, optional
            ``{(t_row, t_col, t_red): useful fraction of peak}``; default ``{(128, 256, 32): 1.0}``.
        gemv_tile : tuple of int, default (64, 64)
            The GeMV tile ``(t_row, t_col)``.
        gemv_bandwidth : float, default 960e9
            Bytes per second at which a GeMV reads its fp16 tiles.
        inv_mu_nlin : float, default 2e-6
            Seconds per token of the non-linear ops.
        c0 : float, default 0.0
            Per-batch overhead in seconds.

        Returns
        -------
        GPUModel
            The GPU.

        Raises
        ------
        ValueError
            If a count, rate or efficiency is not positive, or a tile is malformed.
        """
        efficiency = {(128, 256, 32): 1.0} if efficiency is None else dict(efficiency)
        check_positive("s", s, integer=True)
        check_positive("peak_flops", peak_flops)
        for t, e in efficiency.items():
            if len(t) != 3 or min(t) < 1:
                raise ValueError(f"efficiency key {t!r}: must be (t_row, t_col, t_red) >= 1")
            check_positive(f"efficiency[{t}]", e)
        if len(gemv_tile) != 2 or min(gemv_tile) < 1:
            raise ValueError(f"gemv_tile={gemv_tile!r}: must be (t_row, t_col) >= 1")
        check_positive("gemv_bandwidth", gemv_bandwidth)
        mu = {t: e * peak_flops / (2 * s * t[0] * t[1] * t[2]) for t, e in efficiency.items()}
        tr, tc = gemv_tile
        return cls(s, mu, {(tr, tc): gemv_bandwidth / (2 * tr * tc)}, inv_mu_nlin, c0)

    # ---- tile choices (Assumption 1) ----------------------------------------------------
    def flop_rate(self, t) -> float:
        """Useful tile-pair volume per second per SM, ``μ(t) t_row t_col t_red``.

        Parameters
        ----------
        t : tuple of int
            The GeMM tile ``(t_row, t_col, t_red)``, a key of ``mu_gemm``.

        Returns
        -------
        float
            ``μ(t) t_row t_col t_red``.
        """
        return self.mu_gemm[t] * t[0] * t[1] * t[2]

    @property
    def t_star(self) -> tuple:
        """``t* = argmax_t μ(t) t_row t_col t_red``; ties prefer ``t_lcm = t_col`` (I-1),
        then the larger ``t_col``."""
        best = max(self.flop_rate(t) for t in self.mu_gemm)
        ties = [t for t in self.mu_gemm if self.flop_rate(t) >= best * (1 - 1e-12)]
        return max(ties, key=lambda t: (lcm(*t) == t[1], t[1], t))

    @property
    def gemv_tile(self) -> tuple:
        """The GeMV tile used for decode attention: the fastest per matrix element."""
        return max(self.mu_gemv, key=lambda t: (self.mu_gemv[t] * t[0] * t[1], t))

    def check_assumption1(self, t=None) -> None:
        """Assumption 1 in its implementable form: ``t`` (default ``t*``) has the
        largest useful rate ``μ(t) t_row t_col t_red`` of all configurations.

        Parameters
        ----------
        t : tuple of int, optional
            The tile; default ``t*``.

        Raises
        ------
        AssumptionError
            If ``t`` is not in ``mu_gemm`` or another tile has a larger useful rate.
        """
        t = self.t_star if t is None else tuple(t)
        if t not in self.mu_gemm:
            raise AssumptionError(f"tile={t}: not in mu_gemm")
        worse = [u for u in self.mu_gemm if self.flop_rate(u) > self.flop_rate(t) * (1 + 1e-12)]
        if worse:
            raise AssumptionError(f"Assumption 1 fails: tile {worse[0]} has useful rate "
                                  f"{self.flop_rate(worse[0]):.6g} > {self.flop_rate(t):.6g} "
                                  f"of t={t}")

    def t_gemm(self, d_row, d_col, d_red, t) -> float:
        """Eq. 2.

        Parameters
        ----------
        d_row, d_col, d_red : int
            The GeMM's output rows, output columns and reduction dimension.
        t : tuple of int
            The GeMM tile ``(t_row, t_col, t_red)``, a key of ``mu_gemm``.

        Returns
        -------
        float
            Its time in seconds.
        """
        tr, tc, tk = t
        return (ceil_div(d_row, tr) * ceil_div(d_col, tc) * ceil_div(d_red, tk)
                / (self.s * self.mu_gemm[t]))

    def t_gemv(self, d_row, d_col, t=None) -> float:
        """Eq. 3 with the whole-GPU GeMV speed .

        Parameters
        ----------
        d_row, d_col : int or numpy.ndarray
            The GeMV's matrix dimensions.
        t : tuple of int, optional
            The GeMV tile ``(t_row, t_col)``; default :attr:`gemv_tile`.

        Returns
        -------
        float or numpy.ndarray
            Its time in seconds.
        """
        t = self.gemv_tile if t is None else t
        return ceil_div(d_row, t[0]) * ceil_div(d_col, t[1]) / self.mu_gemv[t]

    def check_assumption2(self, d_row: int, d_red: int, max_cols: int = 512, t=None) -> None:
        """Assumption 2: ``d_col`` GeMVs take longer than one GeMM, ``2 ≤ d_col ≤
        max_cols``.

        Parameters
        ----------
        d_row : int
            The weight's rows.
        d_red : int
            Its reduction dimension.
        max_cols : int, default 512
            The largest ``d_col`` checked.
        t : tuple of int, optional
            The GeMM tile; default ``t*``.

        Raises
        ------
        AssumptionError
            If some ``d_col`` GeMVs take no longer than one GeMM.
        """
        t = self.t_star if t is None else tuple(t)
        for d_col in range(2, max_cols + 1):
            gemv, gemm = d_col * self.t_gemv(d_row, d_red), self.t_gemm(d_row, d_col, d_red, t)
            if not gemv > gemm:
                raise AssumptionError(f"Assumption 2 fails at d_col={d_col}: {d_col} GeMVs "
                                      f"take {gemv:.6g} s <= one GeMM {gemm:.6g} s")


class TiledGPUTime(TimeModel):
    """Eq. 7: ``T_B = ceil(τ/t_col)/μ_Lin(t) + τ/μ_nLin + N Σ_decodes T^{D,SA}(i)
    + Σ_chunks Eq.6``, with ``τ`` the batch's token count and one tile ``t`` (default ``t*``)
    for all linear ops. Model dimensions must be multiples of the tile sizes; the
    constructor checks Assumptions 1 and 2 and raises :class:`AssumptionError`.

    Parameters
    ----------
    model : ModelDims
        The transformer's dimensions.
    gpu : GPUModel
        The GPU.
    tile : tuple of int, optional
        The GeMM tile of every linear op; default ``t*``.
    check : bool, default True
        Check Assumptions 1 and 2.
    slot : float, optional
        Round durations up to whole slots (see :class:`TimeModel`).

    Raises
    ------
    ValueError
        If the tile is not among the GPU's, or a model dimension is not a multiple of the
        tile sizes.
    AssumptionError
        If ``check`` and Assumption 1 or 2 fails.
    """

    unit = "second"

    def __init__(self, model: ModelDims, gpu: GPUModel, tile=None, *, check: bool = True,
                 slot: float | None = None):
        super().__init__(slot)
        self.model, self.gpu = model, gpu
        self.tile = gpu.t_star if tile is None else tuple(tile)
        if self.tile not in gpu.mu_gemm:
            raise ValueError(f"tile={self.tile}: not among the GPU's tiles {sorted(gpu.mu_gemm)}")
        tr, tc, tk = self.tile
        for name in ("d_x", "d", "d_ff", "d_out"):
            v = getattr(model, name)
            if v % tr or v % tk:
                raise ValueError(f"{name}={v}: must be a multiple of t_row={tr} and t_red={tk}")
        vr, vc = gpu.gemv_tile
        if model.kv_width % vr or model.kv_width % vc:
            raise ValueError(f"d_kv={model.kv_width}: must be a multiple of the GeMV tile "
                             f"{gpu.gemv_tile}")
        if check:
            gpu.check_assumption1(self.tile)
            gpu.check_assumption2(model.d, model.d_x, t=self.tile)
        # the constants of Eq. 5, 6 and 7, read by :meth:`_gemv_tiles`, :meth:`_bracket` and
        # :meth:`_terms` (the model, the GPU and the tile are frozen: not assigned after this)
        w, d = model.kv_width, model.d
        self._eq5 = (vr, vc, w // vc, w // vr)
        self._eq6 = (tr, tc, tk, d // tk, d // tr)
        self._eq7 = (tc, self.inv_mu_lin, gpu.inv_mu_nlin, gpu.c0, model.N,
                     gpu.mu_gemv[(vr, vc)], self.attn_unit)

    @classmethod
    def illustrative(cls, **gpu_kw) -> TiledGPUTime:
        """Spec §9's parameter set — a toolkit assumption, NOT from the paper.

        Parameters
        ----------
        **gpu_kw
            Passed to :meth:`GPUModel.from_efficiency`.

        Returns
        -------
        TiledGPUTime
            The Mistral-like model on the illustrative GPU.
        """
        return cls(ModelDims.mistral_like(), GPUModel.from_efficiency(**gpu_kw))

    @classmethod
    def fitted(cls, gpu: str = "a100", model: str = "llama-2-7b", tp: int = 1) -> TiledGPUTime:
        """Parameters fitted to real GPU timings: the Vidur profiles of ``model`` on ``gpu``
        (linear and non-linear layers; the fit and what it leaves out are in
        :func:`queuetheory.timing.vidur.fit_tiled`, which also returns the intervals).
        Fitted once per process; the model is shared, do not modify it.

        Parameters
        ----------
        gpu : str, default "a100"
            ``"a100"`` or ``"h100"``.
        model : str, default "llama-2-7b"
            A model with a shipped Vidur profile.
        tp : int, default 1
            Tensor-parallel degree.

        Returns
        -------
        TiledGPUTime
            The fitted model, in seconds.
        """
        from .vidur import fitted_model

        return fitted_model(gpu, model, tp)

    # ---- the pieces of Eq. 7 --------------------------------------------------------------
    @property
    def t_lcm(self) -> int:
        """``lcm(t_row, t_col, t_red)`` of the tile (Bari et al., Assumption I-1)."""
        return lcm(*self.tile)

    @property
    def inv_mu_lin(self) -> float:
        """Eq. 4: seconds per column tile of tokens, ``K_lin / (s μ(t) t_row t_red)``."""
        tr, _, tk = self.tile
        return self.model.K_lin / (self.gpu.s * self.gpu.mu_gemm[self.tile] * tr * tk)

    @property
    def attn_unit(self) -> float:
        """``N / (s μ(t))``: seconds per tile-pair of prefill attention over all layers."""
        return self.model.N / (self.gpu.s * self.gpu.mu_gemm[self.tile])

    def linear_time(self, tokens):
        """Eq. 4, the staircase ``ceil(τ/t_col)/μ_Lin(t)``.

        Parameters
        ----------
        tokens : int or numpy.ndarray
            The batch's token count ``τ``.

        Returns
        -------
        float or numpy.ndarray
            Seconds.
        """
        return ceil_div(tokens, self.tile[1]) * self.inv_mu_lin

    def decode_attention(self, i):
        """Eq. 5, one layer, at token position ``i`` (vectorised).

        Parameters
        ----------
        i : int or array_like
            Token position(s) ``i`` (a KV cache of ``k`` tokens computes ``i = k + 1``).

        Returns
        -------
        numpy.ndarray
            Seconds per layer, one per position.
        """
        return (self._gemv_tiles(np.asarray(i, dtype=np.int64) - 1)
                / self.gpu.mu_gemv[self.gpu.gemv_tile])

    def _gemv_tiles(self, k):
        """Eq. 5's GeMV tile-pairs (one layer) of a decode whose KV cache holds ``k`` tokens,
        at position ``i = k + 1`` (``⌈i/v⌉ = ⌊k/v⌋ + 1``): an integer, or an array of them."""
        vr, vc, per_row, per_col = self._eq5
        if vr == vc:                                      # (a square tile: one division)
            return (k // vr + 1) * (per_row + per_col)
        return per_row * (k // vr + 1) + (k // vc + 1) * per_col

    def prefill_bracket(self, i, c):
        """The integer bracket of Eq. 6 (tile-pairs per layer) for chunk ``PI(R, i, c)``.

        Parameters
        ----------
        i : int or array_like
            The chunk's first position(s).
        c : int or array_like
            The chunk's length(s).

        Returns
        -------
        numpy.ndarray
            Tile-pairs per layer.
        """
        c = np.asarray(c, dtype=np.int64)
        return self._bracket(np.asarray(i, dtype=np.int64) + c - 1, c)

    def _bracket(self, ends, c):
        """:meth:`prefill_bracket` of a chunk of ``c`` tokens ending at position
        ``ends = i + c − 1``: an integer, or an array of them."""
        tr, tc, tk, d_tk, d_tr = self._eq6
        cols = -(-c // tc)
        return -(-ends // tr) * cols * d_tk + d_tr * cols * -(-ends // tk)

    def prefill_attention(self, i, c):
        """Eq. 6: all-layer attention time of ``PI(R, i, c)``.

        Parameters
        ----------
        i : int or array_like
            The chunk's first position(s).
        c : int or array_like
            The chunk's length(s).

        Returns
        -------
        numpy.ndarray
            Seconds over all layers.
        """
        return self.attn_unit * self.prefill_bracket(i, c)

    def components(self, load: BatchLoad) -> dict:
        """The four terms of Eq. 7 (plus the overhead ``c0``) for one batch.

        Parameters
        ----------
        load : BatchLoad
            The batch.

        Returns
        -------
        dict
            Seconds of ``linear``, ``nonlinear``, ``decode_attention``, ``prefill_attention`` and
            ``overhead``.
        """
        return dict(zip(("linear", "nonlinear", "decode_attention", "prefill_attention",
                         "overhead"), self._terms(load), strict=True))

    def _terms(self, load: BatchLoad) -> tuple:
        """:meth:`components`' values, in its order: :meth:`linear_time`, the non-linear
        time, :meth:`decode_attention` summed over the decode members (``i = k + 1``:
        ``⌈i/v⌉ = ⌊k/v⌋ + 1``) — their tile-pairs added as integers, then divided once, so
        that the sum is the same in any order of the members (the engine steps a stretch
        with its members in id order, the policy may order them otherwise) — and
        :meth:`prefill_attention` over the chunks, in the same integer brackets and
        floating-point operations as that method (a single chunk in plain integers: its one
        product is the sum), and the overhead."""
        tc, lin, nlin, c0, N, mu_v, unit = self._eq7
        chunk, context = load.chunk, load.decode_context
        decode = prefill = 0.0
        if context.size:
            tiles = self._gemv_tiles(np.asarray(context, dtype=np.int64))
            decode = N * (int(tiles.sum()) / mu_v)
        if chunk.size == 1:
            c = int(chunk[0])
            prefill = unit * self._bracket(int(load.chunk_start[0]) + c, c)
            tau = c + context.size
        else:
            tau = load.token_load
            if chunk.size:
                prefill = float(self.prefill_attention(
                    np.asarray(load.chunk_start, dtype=np.int64) + 1, chunk).sum())
        return (-(-tau // tc) * lin, tau * nlin, decode, prefill, c0 if tau else 0.0)

    def _raw(self, load: BatchLoad) -> float:
        return sum(self._terms(load))

    def batch_time(self, decode_positions=(), chunks=()) -> float:
        """Eq. 7 from the paper's arguments: decode positions ``i_j`` and chunks ``(i_j, c_j)``.

        Parameters
        ----------
        decode_positions : array_like of int, default ()
            The decode members' positions ``i_j``.
        chunks : array_like of (int, int), default ()
            The prefill chunks ``(i_j, c_j)``: first position and length.

        Returns
        -------
        float
            ``T_B`` in seconds.
        """
        pos = np.asarray(decode_positions, dtype=np.int64)
        ch = np.asarray(chunks, dtype=np.int64).reshape(-1, 2)
        return self.duration(BatchLoad(ch[:, 1], ch[:, 0] - 1, pos - 1))

    def __repr__(self):
        return f"TiledGPUTime(tile={self.tile}, s={self.gpu.s}, N={self.model.N})"
