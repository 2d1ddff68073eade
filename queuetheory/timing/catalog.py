"""Real GPUs and models by name: the shipped profiles as one engine — its batch time, its
KV-cache capacity from the GPU's memory, and what the fit is valid for.

Shipped: Llama-2-7B on A100 and H100 and Llama-3-8B on A100 (the Vidur profiles, MIT,
fitted to the tiled GPU model, :meth:`~queuetheory.timing.TiledGPUTime.fitted`), and
Llama-3.1-8B on an RTX PRO 6000 and an RTX 4090 (LLMServingSim's operator profiles of
``queuetheory/data/vllm_runs/profiles``, composed per batch by
:class:`~queuetheory.timing.ProfileTime`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from importlib import resources

__all__ = ["GPU_MEMORY_GIB", "MODEL_SHAPES", "SHIPPED_ENGINES", "GPUEngine", "gpu_engine",
           "kv_cache_tokens", "FitRangeWarning"]

#: Device memory per GPU in GiB (the 80 GB A100 and H100 that Vidur profiled).
GPU_MEMORY_GIB = {"a100": 80.0, "h100": 80.0, "rtxpro6000": 96.0, "rtx4090": 24.0}

#: Decoder layers, KV heads, head size and parameter count of the shipped models.
MODEL_SHAPES = {
    "llama-2-7b": {"layers": 32, "kv_heads": 32, "head_dim": 128, "params": 6.74e9},
    "llama-3-8b": {"layers": 32, "kv_heads": 8, "head_dim": 128, "params": 8.03e9},
    "llama-3.1-8b": {"layers": 32, "kv_heads": 8, "head_dim": 128, "params": 8.03e9},
}

#: (gpu, model) -> the source of its batch time and the tokens per batch it was measured at.
SHIPPED_ENGINES = {
    ("a100", "llama-2-7b"): ("vidur", 4096),
    ("h100", "llama-2-7b"): ("vidur", 4096),
    ("a100", "llama-3-8b"): ("vidur", 32768),
    ("rtxpro6000", "llama-3.1-8b"): ("RTXPRO6000", None),
    ("rtx4090", "llama-3.1-8b"): ("RTX4090", None),
}


class FitRangeWarning(UserWarning):
    """A fitted batch time applied outside the tokens per batch it was measured at."""


@dataclass(frozen=True, eq=False)
class GPUEngine:
    """One engine of a shipped (GPU, model, tensor parallel) setting.

    Attributes
    ----------
    gpu : str
        The GPU.
    model : str
        The model.
    tp : int
        The tensor parallel degree.
    time_model : TimeModel
        Its batch time (seconds).
    kv_tokens : int
        The KV cache in tokens (:func:`kv_cache_tokens`).
    source : str
        Where the batch time comes from.
    valid_for : dict
        What the fit is valid for: ``model``, ``gpu``, ``tp`` and ``tokens``, the tokens
        per batch measured (``None``: the operator profile's own grids, which
        :class:`~queuetheory.timing.ProfileTime` checks itself).
    """

    gpu: str
    model: str
    tp: int
    time_model: object
    kv_tokens: int
    source: str
    valid_for: dict

    def check(self, token_budget: int) -> None:
        """Warn (:class:`FitRangeWarning`) when batches of ``token_budget`` tokens lie
        beyond the tokens per batch the fit was measured at.

        Parameters
        ----------
        token_budget : int
            The engine's per-batch token budget.

        Warns
        -----
        FitRangeWarning
            If ``token_budget`` exceeds the tokens per batch measured.
        """
        top = self.valid_for["tokens"]
        if top is not None and token_budget > top:
            warnings.warn(f"token_budget={token_budget}: the {self.gpu} {self.model} fit was "
                          f"measured up to {top} tokens per batch; beyond, its times are "
                          "extrapolated", FitRangeWarning, stacklevel=2)


def kv_cache_tokens(gpu: str, model: str, tp: int = 1, *, utilization: float = 0.9,
                    dtype_bytes: int = 2) -> int:
    """The KV-cache tokens one engine holds, as vLLM sizes it.

    ``utilization`` of the ``tp`` GPUs' memory (vLLM's ``gpu_memory_utilization``, whose
    headroom holds activations and CUDA graphs), less the weights (``params ·
    dtype_bytes``), over the KV bytes per token ``2 · layers · kv_heads · head_dim ·
    dtype_bytes``.

    Parameters
    ----------
    gpu : str
        A key of :data:`GPU_MEMORY_GIB`.
    model : str
        A key of :data:`MODEL_SHAPES`.
    tp : int, default 1
        Tensor parallel degree (GPUs per engine).
    utilization : float, default 0.9
        The share of GPU memory vLLM may use, in (0, 1].
    dtype_bytes : int, default 2
        Bytes per weight and per KV element (2 for bf16/fp16).

    Returns
    -------
    int
        KV tokens.

    Raises
    ------
    ValueError
        An unknown GPU or model, a bad ``tp``/``utilization``, or weights that do not fit.
    """
    gpu, model = _known(gpu, model)
    if not (isinstance(tp, int) and tp >= 1):
        raise ValueError(f"tp={tp!r}: must be a positive integer")
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization={utilization!r}: must lie in (0, 1]")
    shape = MODEL_SHAPES[model]
    free = utilization * GPU_MEMORY_GIB[gpu] * 2**30 * tp - shape["params"] * dtype_bytes
    per_token = 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * dtype_bytes
    if free <= per_token:
        raise ValueError(f"gpu={gpu!r}, model={model!r}, tp={tp}: the weights "
                         f"({shape['params'] * dtype_bytes / 2**30:.1f} GiB) leave no room "
                         f"for a KV cache in {utilization:.0%} of {tp} × "
                         f"{GPU_MEMORY_GIB[gpu]:g} GiB")
    return int(math.floor(free / per_token))


def gpu_engine(gpu: str, model: str, tp: int = 1, *, utilization: float = 0.9) -> GPUEngine:
    """The shipped engine of ``model`` on ``gpu`` (:data:`SHIPPED_ENGINES`).

    Parameters
    ----------
    gpu : str
        ``"a100"``, ``"h100"``, ``"rtxpro6000"`` or ``"rtx4090"``.
    model : str
        ``"llama-2-7b"``, ``"llama-3-8b"`` or ``"llama-3.1-8b"``.
    tp : int, default 1
        Tensor parallel degree (the Vidur fits: 1, 2, 4 or 8; the operator profiles: 1).
    utilization : float, default 0.9
        vLLM's ``gpu_memory_utilization`` for the KV cache.

    Returns
    -------
    GPUEngine
        Its batch time, KV cache and what the fit is valid for.

    Raises
    ------
    ValueError
        A setting with no shipped profile, naming the ones there are; an unknown GPU or
        model; a ``tp`` the profile does not cover.
    """
    gpu, model = _known(gpu, model)
    if (gpu, model) not in SHIPPED_ENGINES:
        raise ValueError(f"gpu={gpu!r}, model={model!r}: no shipped profile; the shipped "
                         f"settings are {sorted(SHIPPED_ENGINES)}")
    source, tokens = SHIPPED_ENGINES[(gpu, model)]
    if source == "vidur":
        from .gpu import TiledGPUTime

        tm = TiledGPUTime.fitted(gpu, model, tp)
        where = f"Vidur profile of {model} on {gpu} (tp {tp}), tiled fit"
    else:
        if tp != 1:
            raise ValueError(f"tp={tp}: the {gpu} profile of {model} is for tp 1 only")
        from .profile import OperatorProfile, ProfileTime

        root = resources.files("queuetheory.data").joinpath(
            "vllm_runs", "profiles", source, "meta-llama", "Llama-3.1-8B", "bf16")
        with resources.as_file(root) as path:
            tm = ProfileTime(OperatorProfile.from_llmservingsim(path, tp=1))
        where = f"LLMServingSim operator profile of {model} on {gpu} (tp 1)"
    return GPUEngine(gpu, model, tp, tm, kv_cache_tokens(gpu, model, tp,
                                                         utilization=utilization),
                     where, {"model": model, "gpu": gpu, "tp": tp, "tokens": tokens})


def _known(gpu, model) -> tuple[str, str]:
    g, m = str(gpu).lower().replace(" ", "").replace("-", ""), str(model).lower()
    if g not in GPU_MEMORY_GIB:
        raise ValueError(f"gpu={gpu!r}: unknown; the shipped GPUs are {sorted(GPU_MEMORY_GIB)}")
    if m not in MODEL_SHAPES:
        raise ValueError(f"model={model!r}: unknown; the shipped models are "
                         f"{sorted(MODEL_SHAPES)}")
    return g, m
