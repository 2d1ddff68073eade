"""The rule ``decode_priority``: FasterTransformer with FCFS order (see :mod:`..kernels`)."""

from __future__ import annotations

from .decode_prefix import FT_ITERATION, FT_REQUEST, run_decode_prefix

__all__ = ["decode_priority"]


def decode_priority(engine, t, stop, limit, *, mode="iteration", max_reqs=None, budget=None):
    """FasterTransformer under FCFS (Li, Dai, Peng §3). ``mode="iteration"``: a decode-only
    batch of the oldest requests in decode (up to the budget and ``max_reqs``) whenever one
    decodes, else a prefill-only batch of prompts in arrival order up to the budget, the last
    one chunked (with a KV-memory limit: new prompts while their whole prefills fit, and the
    youngest residents preempted, recompute, when the decodes do not). ``mode="request"``: a
    cohort of the ``max_reqs`` oldest waiting requests is prefilled, then decoded (the oldest
    ``b`` members at a time) until every member finishes, while arrivals wait. ``budget``:
    the token budget ``b`` of the batches (default: the engine's); one that no batch reaches
    stands for none (Bari et al.'s request-level batching prefills a cohort whole and decodes
    all its members)."""
    kind = FT_REQUEST if mode == "request" else FT_ITERATION
    return run_decode_prefix(engine, t, stop, limit, kind, max_reqs=max_reqs, budget=budget)
