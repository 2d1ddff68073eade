"""The Mooncake traces (Moonshot AI's Kimi service): arrivals, lengths and prefix blocks.

Released with Qin et al., "Mooncake: Trading More Storage for Less Computation — A
KVCache-centric Architecture for Serving LLM Chatbot", USENIX FAST 2025 (Appendix A), in the
public repository kvcache-ai/Mooncake (``FAST25-release/traces/``), Apache License 2.0
(``mooncake/LICENSE.txt``, attribution in ``mooncake/SOURCE.md``); shipped gzip-compressed.

=================== ======== ===========================================================
trace               requests what
=================== ======== ===========================================================
``"conversation"``  12,031   one hour of Kimi's chat service; arrivals on ~3 s ticks
``"synthetic"``     3,993    ShareGPT, L-Eval and LooGLE 1:1:1, Poisson arrivals
=================== ======== ===========================================================

Each request carries ``hash_ids``: one id per 512-token block of its prompt, equal ids
meaning equal prompts up to the end of that block; the last id covers a partial block when
the prompt is not a multiple of 512 tokens.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from importlib import resources

import pandas as pd

from ..workload.traces import FORMATS, read_trace

__all__ = ["mooncake_trace", "mooncake_table", "MOONCAKE_TRACES", "MOONCAKE_BLOCK"]

MOONCAKE_TRACES = {"conversation": "conversation_trace.jsonl.gz",
                   "synthetic": "synthetic_trace.jsonl.gz"}
#: tokens per hash id of the Mooncake traces (the ``mooncake`` format of
#: :func:`~queuetheory.workload.traces.read_trace`)
MOONCAKE_BLOCK = FORMATS["mooncake"].block_size


@cache
def _rows(name: str) -> tuple:
    if name not in MOONCAKE_TRACES:
        raise ValueError(f"name={name!r}: must be one of {tuple(MOONCAKE_TRACES)}")
    path = resources.files(__package__).joinpath("mooncake", MOONCAKE_TRACES[name])
    with path.open("rb") as raw, gzip.open(raw, "rt") as f:
        return tuple(json.loads(line) for line in f if line.strip())


def mooncake_table(name: str = "conversation") -> pd.DataFrame:
    """The trace as released: ``timestamp`` (ms), ``input_length``, ``output_length`` and
    ``hash_ids`` (a list per request, the partial last block included).

    Parameters
    ----------
    name : {"conversation", "synthetic"}, default "conversation"
        Which shipped trace (a key of :data:`MOONCAKE_TRACES`).

    Returns
    -------
    pandas.DataFrame
        One row per request in file order, the released fields as columns.

    Raises
    ------
    ValueError
        If ``name`` is not a shipped trace.
    """
    return pd.DataFrame(list(_rows(name)))


def mooncake_trace(name: str = "conversation", **options):
    """The Mooncake ``"conversation"`` or ``"synthetic"`` trace as a
    :class:`~queuetheory.workload.Trace` with its prefix blocks.

    Arrivals from the first request; output lengths count the first token; ``blocks``
    holds each prompt's **full** 512-token blocks (``block_size=512``): the id of a partial
    last block is dropped, as a prefix cache keeps full blocks only. A scheduler with smaller
    KV blocks (vLLM's 16) keys each of its blocks by the 512-token block it lies in
    (:class:`~queuetheory.policies.VLLMV1`).

    Parameters
    ----------
    name : {"conversation", "synthetic"}, default "conversation"
        Which shipped trace of Qin et al. (Mooncake; a key of :data:`MOONCAKE_TRACES`).
    **options
        Keywords of :func:`~queuetheory.workload.traces.read_trace`: ``time_unit`` (``"s"``,
        the default, or ``"ms"``), ``window``, ``speedup``, ``rate``.

    Returns
    -------
    Trace
        The requests in arrival order, the first one at 0, one class, with ``blocks`` and
        ``block_size=512``.

    Raises
    ------
    ValueError
        If ``name`` is not a shipped trace, or ``read_trace`` refuses an option (a
        ``time_unit`` other than ``"s"`` or ``"ms"``, …).
    """
    return read_trace(mooncake_table(name), format="mooncake", **options)
