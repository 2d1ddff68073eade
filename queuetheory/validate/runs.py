"""A measured serving run, read from its folder: the engine's arguments, the workload, the
GPU's profile and, where the folder has them, the measurements and a peer's prediction.

The layout is the one of LLMServingSim 2.0's bench runs (``queuetheory/data/vllm_runs``
ships two, MIT; ``SOURCE.md`` there gives every column):

- ``vllm_meta.json``: vLLM's engine arguments (``engine_kwargs``, ``kv_cache``,
  ``resolved_config``) — required;
- ``workload.csv`` (here or in the parent folder): ``arrival_time_ns``, ``input_toks``,
  ``output_toks``, optionally ``req_idx`` and the prompts' prefix blocks as
  ``prefix_block_ids`` (space-separated ids, one per full block) or only their shared
  length, ``block_aligned_shared_prefix_toks`` — required;
- the GPU's operator profile (:class:`~queuetheory.timing.OperatorProfile`): ``profile/``
  here, or ``../profiles/<hardware>/<model>/<variant>/`` with the hardware named by
  ``llmservingsim_cluster_config.json`` or by ``vllm_meta.json``'s device name;
- measurements, optional: ``measured_per_request.csv`` (``req_idx``, ``ttft_ms``,
  ``tpot_ms``, ``e2e_ms``) or vLLM's own ``vllm_requests.jsonl`` (derived the same way),
  ``vllm_timeseries.csv`` (1 s ticks of ``running`` and ``waiting``), and a peer
  simulator's prediction, ``llmservingsim_predicted_per_request.csv``.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from ..workload import Trace

__all__ = ["MeasuredRun", "load_run", "SHIPPED_RUNS", "MODEL_CONTEXT"]

#: the runs shipped with the package, by name (LLMServingSim 2.0's vLLM 0.19 runs, MIT)
SHIPPED_RUNS = ("rtxpro6000", "rtx4090")
#: the longest sequence of each model (its ``max_position_embeddings``), used where the
#: engine arguments set no ``max_model_len``
MODEL_CONTEXT = {"meta-llama/Llama-3.1-8B": 131072, "meta-llama/Llama-3.1-70B": 131072,
                 "meta-llama/Meta-Llama-3-8B": 8192, "meta-llama/Llama-2-7b-hf": 4096}
_WORKLOAD = ("arrival_time_ns", "input_toks", "output_toks")
_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")
_VARIANTS = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32"}


class RunFolderError(ValueError):
    """A run folder without what a replay needs; the message names the missing item."""


def _shipped_root() -> Path:
    return Path(str(resources.files("queuetheory.data").joinpath("vllm_runs")))


def _find(folder: Path, name: str, parents: bool = False) -> Path | None:
    for d in (folder, folder.parent) if parents else (folder,):
        for candidate in (d / name, d / f"{name}.gz"):
            if candidate.exists():
                return candidate
    return None


@dataclass(frozen=True)
class MeasuredRun:
    """One measured serving run (module docstring). ``measured``, ``peer`` and
    ``timeseries`` are ``None`` where the folder holds no measurement (a prediction).

    Attributes
    ----------
    name : str
        The run folder's name.
    folder : pathlib.Path
        The run folder.
    engine_args : dict
        ``vllm_meta.json`` as read: vLLM's ``engine_kwargs``, ``kv_cache`` and
        ``resolved_config``.
    model : str
        The model's name (e.g. ``"meta-llama/Llama-3.1-8B"``).
    hardware : str or None
        The GPU's name, from ``llmservingsim_cluster_config.json`` or the engine arguments'
        device name; ``None`` where neither gives it.
    profile_root : pathlib.Path
        The GPU operator profile's folder (with ``meta.yaml``).
    workload : pandas.DataFrame
        The requests in arrival order: ``req_idx``, ``arrival_time_ns``, ``input_toks``,
        ``output_toks`` and the prefix columns where present.
    measured : pandas.DataFrame or None
        Measured ``req_idx``, ``ttft_ms``, ``tpot_ms``, ``e2e_ms`` per request.
    peer : pandas.DataFrame or None
        The peer simulator's (LLMServingSim's) prediction, same columns.
    timeseries : pandas.DataFrame or None
        vLLM's ``running`` and ``waiting`` requests at 1 s ticks ``t``.
    """

    name: str
    folder: Path
    engine_args: dict
    model: str
    hardware: str | None
    profile_root: Path
    workload: pd.DataFrame
    measured: pd.DataFrame | None
    peer: pd.DataFrame | None
    timeseries: pd.DataFrame | None

    @property
    def max_model_len(self) -> int | None:
        """The model's context in tokens, ``max_model_len`` as the engine arguments set it, or
        the model's own (:data:`MODEL_CONTEXT`); ``None`` where neither is known."""
        args = self.engine_args
        value = args.get("engine_kwargs", {}).get("max_model_len") or args.get(
            "max_model_len") or args.get("resolved_config", {}).get("model_config", {}).get(
            "max_model_len")
        return int(value) if value else MODEL_CONTEXT.get(self.model)

    def trace(self, block_size: int = 16) -> Trace:
        """The workload as a :class:`~queuetheory.workload.Trace` (seconds), in arrival
        order, each request with its prompt's prefix blocks of ``block_size`` tokens.

        Parameters
        ----------
        block_size : int, default 16
            Tokens per KV block (vLLM's ``block_size``).

        Returns
        -------
        Trace
            Arrivals in seconds (``arrival_time_ns / 1e9``), the prompt and output lengths,
            one class, and ``blocks``: the ``prefix_block_ids`` where the workload has them,
            one common shared prefix where it has only
            ``block_aligned_shared_prefix_toks``, else none.

        Warns
        -----
        UserWarning
            When the blocks are built from ``block_aligned_shared_prefix_toks`` alone (an
            approximation).
        """
        wl = self.workload
        n = len(wl)
        prompt = wl["input_toks"].to_numpy(np.int64)
        output = wl["output_toks"].to_numpy(np.int64)
        zeros = np.zeros(n, np.int64)
        return Trace(wl["arrival_time_ns"].to_numpy(float) / 1e9, prompt, output, zeros,
                     output.copy(), output.copy(), zeros, blocks=self._blocks(block_size),
                     block_size=block_size)

    def _blocks(self, block_size):
        wl = self.workload
        blocks = np.empty(len(wl), dtype=object)
        if "prefix_block_ids" in wl.columns:
            for i, ids in enumerate(wl["prefix_block_ids"].fillna("").astype(str)):
                blocks[i] = np.array(ids.split(), dtype=np.int64)
            return blocks
        if "block_aligned_shared_prefix_toks" not in wl.columns:
            return None
        warnings.warn("workload: no prefix_block_ids, only block_aligned_shared_prefix_toks; "
                      "the shared blocks are taken as one common prefix (an approximation: "
                      "which earlier request a prompt shares with is unknown)", UserWarning,
                      stacklevel=3)
        shared = wl["block_aligned_shared_prefix_toks"].to_numpy(np.int64) // block_size
        full = wl["input_toks"].to_numpy(np.int64) // block_size
        for i in range(len(wl)):
            own = np.arange(shared[i], full[i]) + (i + 1) * 1_000_000
            blocks[i] = np.concatenate([-np.arange(1, shared[i] + 1), own])
        return blocks


def load_run(run, *, profile=None) -> MeasuredRun:
    """Read a run folder (module docstring), or a shipped run by name
    (:data:`SHIPPED_RUNS`: ``"rtxpro6000"``, ``"rtx4090"``).

    Parameters
    ----------
    run : str or path-like
        The folder, or a shipped run's name.
    profile : str or path-like, optional
        The GPU profile's folder, where the run folder does not lead to it.

    Returns
    -------
    MeasuredRun
        The run, its workload in arrival order (a ``req_idx`` column added where the file
        has none).

    Raises
    ------
    RunFolderError
        No such folder, no ``vllm_meta.json`` or no model in it, no workload or a workload
        without its columns, a measurement file without its columns, no profile; each names
        what is missing and where it was looked for.
    ValueError
        A request with 0 prompt or output tokens, or longer than the model's context
        (``max_model_len``), named.
    """
    if isinstance(run, str) and run in SHIPPED_RUNS:
        folder = _shipped_root() / run
    else:
        folder = Path(run)
        if not folder.is_dir():
            raise RunFolderError(f"run={str(run)!r}: not a folder nor a shipped run "
                                 f"({', '.join(SHIPPED_RUNS)})")
    meta_path = folder / "vllm_meta.json"
    if not meta_path.exists():
        raise RunFolderError(f"{folder}: no vllm_meta.json (vLLM's engine arguments)")
    args = json.loads(meta_path.read_text())
    model = args.get("model") or args.get("engine_kwargs", {}).get("model")
    if not model:
        raise RunFolderError(f"{meta_path}: names no model")
    wl_path = _find(folder, "workload.csv", parents=True)
    if wl_path is None:
        raise RunFolderError(f"{folder}: no workload.csv here or in its parent folder (the "
                             "requests' arrival_time_ns, input_toks, output_toks)")
    workload = pd.read_csv(wl_path)
    missing = [c for c in _WORKLOAD if c not in workload.columns]
    if missing:
        raise RunFolderError(f"{wl_path}: missing column(s) {missing}")
    if "req_idx" not in workload.columns:
        workload.insert(0, "req_idx", np.arange(len(workload)))
    workload = workload.sort_values("arrival_time_ns", kind="stable").reset_index(drop=True)
    hardware = _hardware(folder, args)
    root = _profile_root(folder, args, model, hardware, profile)
    run_ = MeasuredRun(folder.name, folder, args, model, hardware, root, workload,
                       _measured(folder), _optional(folder, "llmservingsim_predicted_per_"
                                                    "request.csv", ("req_idx",) + _METRICS),
                       _optional(folder, "vllm_timeseries.csv", ("t", "running", "waiting")))
    _check_lengths(run_)
    return run_


def _check_lengths(run: MeasuredRun) -> None:
    wl = run.workload
    bad = wl[(wl["input_toks"] < 1) | (wl["output_toks"] < 1)]
    if len(bad):
        raise ValueError(f"workload: request {int(bad['req_idx'].iloc[0])} has "
                         f"{int(bad['input_toks'].iloc[0])} prompt and "
                         f"{int(bad['output_toks'].iloc[0])} output tokens; both must be >= 1")
    limit = run.max_model_len
    if limit is not None:
        total = wl["input_toks"] + wl["output_toks"]
        over = wl[total > limit]
        if len(over):
            r = over.iloc[0]
            raise ValueError(f"workload: request {int(r['req_idx'])} has {int(r['input_toks'])}"
                             f" + {int(r['output_toks'])} tokens, over the model's context "
                             f"max_model_len={limit} ({run.model})")


def _hardware(folder: Path, args: dict) -> str | None:
    cluster = folder / "llmservingsim_cluster_config.json"
    if cluster.exists():
        nodes = json.loads(cluster.read_text()).get("nodes", [])
        for node in nodes:
            for inst in node.get("instances", []):
                if inst.get("hardware"):
                    return inst["hardware"]
    return args.get("hardware", {}).get("device_name")


def _profile_root(folder, args, model, hardware, profile) -> Path:
    if profile is not None:
        root = Path(profile)
        if not (root / "meta.yaml").exists():
            raise RunFolderError(f"profile={str(profile)!r}: no meta.yaml there (an "
                                 "LLMServingSim profile bundle)")
        return root
    if (folder / "profile" / "meta.yaml").exists():
        return folder / "profile"
    dtype = args.get("engine_kwargs", {}).get("dtype", "bfloat16")
    variant = _VARIANTS.get(str(dtype), str(dtype))
    base = folder.parent / "profiles"
    tried = []
    if hardware is not None:
        candidate = base / hardware / model / variant
        tried.append(str(candidate))
        if (candidate / "meta.yaml").exists():
            return candidate
        import yaml

        for meta in sorted(base.glob(f"*/{model}/{variant}/meta.yaml")):
            if (yaml.safe_load(meta.read_text()) or {}).get("gpu") == hardware:
                return meta.parent
    raise RunFolderError(f"{folder}: no GPU profile found (looked in {folder / 'profile'}"
                         f"{', ' + ', '.join(tried) if tried else ''}); pass profile=")


def _optional(folder, name, columns) -> pd.DataFrame | None:
    path = _find(folder, name)
    if path is None:
        return None
    df = pd.read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise RunFolderError(f"{path}: missing column(s) {missing}")
    return df


def _measured(folder: Path) -> pd.DataFrame | None:
    """Per-request TTFT, TPOT and E2E (ms): ``measured_per_request.csv``, or derived from
    vLLM's ``vllm_requests.jsonl`` as SOURCE.md defines them (anchor: ``queued_ts``)."""
    table = _optional(folder, "measured_per_request.csv", ("req_idx",) + _METRICS)
    if table is not None:
        return table
    path = folder / "vllm_requests.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    df = pd.DataFrame(rows)
    need = ("request_id", "output_toks", "queued_ts", "first_token_ts", "last_token_ts")
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise RunFolderError(f"{path}: missing field(s) {missing}")
    idx = df["request_id"].astype(str).str.rsplit("-", n=1).str[-1].astype(int)
    out = df["output_toks"].to_numpy(float)
    queued, first, last = (df[c].to_numpy(float) for c in need[2:])
    return pd.DataFrame({"req_idx": idx, "ttft_ms": 1e3 * (first - queued),
                         "tpot_ms": np.where(out > 1, 1e3 * (last - first) / np.maximum(
                             out - 1, 1), np.nan),
                         "e2e_ms": 1e3 * (last - queued)})
