"""The rule ``prefill_first_fill``: Orca with FCFS order (see :mod:`..kernels`)."""

from __future__ import annotations

from .decode_prefix import ORCA, run_decode_prefix

__all__ = ["prefill_first_fill"]


def prefill_first_fill(engine, t, stop, limit, *, chunk=True, max_reqs=None):
    """Orca under FCFS (Li, Dai, Peng §3): prompt tokens first, in arrival order up to the
    token budget ``b`` (the last one chunked; with ``chunk=False`` only whole prompts, a first
    one longer than the budget chunked alone), then one decode token for each of the oldest
    requests in decode that the rest of the budget and ``max_reqs`` allow. A decoder skips
    an iteration only when the prompts leave fewer tokens than there are decoders, and the
    decoders that decode are the oldest (:mod:`.decode_prefix`). With a KV-memory limit, new
    prompts start only while their whole prefills fit beside one token for every decoder,
    and the youngest residents are preempted (recompute) when the decodes do not fit
    (:func:`~queuetheory.policies.base.admissible`, :func:`~queuetheory.policies.base.
    fit_memory`)."""
    return run_decode_prefix(engine, t, stop, limit, ORCA, chunk=chunk, max_reqs=max_reqs)
