"""The engine's conventions, written down once.

**First token** (``first_token=``, on :func:`~queuetheory.simulate` and
:class:`~queuetheory.engine.Engine`):

- ``"prefill"`` (the default): the real engines' convention (vLLM, Sarathi-Serve, Vidur,
  pyserq). The iteration that finishes a request's prompt also emits its first output token;
  the output length ``o`` counts that token, so the request then runs ``o − 1`` decode
  iterations. Its KV cache holds the prefilled prompt tokens plus the output tokens written
  back (the first token's KV is written by the decode iteration that consumes it): at most
  ``prompt + output − 1`` tokens. TTFT ends with the prefill iteration.
- ``"decode"``: the model of Li, Dai, Peng (every output token takes a decode iteration of its
  own) and of Ao, Luo, Simchi-Levi, Wang; the prefill iteration emits nothing, the request
  runs ``o`` decode iterations and holds at most ``prompt + output`` KV tokens. TTFT ends with
  the first decode iteration.

The round models of Jaillet et al. (App. B.1) and Chen et al. and the SLAI model of Bari et
al. use ``"prefill"``; each paper's module states its own and passes it explicitly.

**Preemption** (``preemption=``, a policy's attribute, read by the engine): what happens to a
request whose KV cache a batch evicts (``Batch.evict``). Either way the request loses its KV
cache, leaves the decode phase and counts one more ``restarts``; it starts again only when the
policy admits it anew.

- ``"recompute"``: vLLM's recompute preemption (the default of the classic schedulers of
  :mod:`~queuetheory.policies.classic`). The request keeps the ``k`` output tokens it has
  generated (``recomputed = k``); its next prefill is ``prompt + k`` tokens long, chunked
  like any prompt and costing what a prompt of that length costs in the time model (its
  tokens are prefill tokens). The classic schedulers admit it, like a new request, only once
  its whole prefill fits in memory, and, as vLLM's block manager, count a started prefill as
  holding KV for its whole length (:func:`~queuetheory.policies.base.fit_memory`; the
  engine's ``memory`` column counts the tokens written). Tokens are not emitted twice: under
  ``"prefill"`` the iteration that ends the recompute emits token ``k + 1`` (as vLLM samples
  the next token from the recomputed logits) and its KV then holds ``prompt + k`` tokens; under
  ``"decode"`` it emits nothing and the next decode iteration emits token ``k + 1``. Either
  way TTFT is unchanged and the one new token closes a single gap, from token ``k`` (the
  stall of the preemption included), so the TBT histogram and ``tbt_max`` see the stall once.
- ``"restart"``: the papers' model (Jaillet et al.'s and Chen et al.'s eviction, Ao et al.'s
  FCFS baseline, Bari et al.'s schedulers): the generated tokens are discarded
  (``discarded``) and generated again, one decode iteration each, after the whole prompt is
  prefilled again; TTFT stays that of the first emission, and the regenerated tokens close
  gaps of their own.

Where the engine differs from vLLM on purpose: memory is counted in tokens, not blocks; which
request is preempted is the policy's choice (the classic schedulers evict the most recently
arrived resident requests, vLLM the lowest-priority running one — the same under FCFS;
``StaticPriority`` evicts as vLLM's priority scheduling, the least important class first); a
preempted request rejoins the waiting requests in the policy's order (under FCFS, in arrival
order, which puts it first among the waiting ones as vLLM's ``appendleft`` does); vLLM's swap
preemption is not modelled. The classic schedulers' records, preemptions included, are
those of pyserq, an independent simulator, to the last bit (``tests/test_oracle_pyserq.py``).
"""

from __future__ import annotations

__all__ = ["FIRST_TOKEN", "PREEMPTION", "check_first_token", "check_preemption"]

FIRST_TOKEN = ("prefill", "decode")
PREEMPTION = ("recompute", "restart")


def check_first_token(first_token) -> str:
    """``first_token`` itself, or a ``ValueError`` naming the valid values.

    Parameters
    ----------
    first_token : str
        The convention asked for.

    Returns
    -------
    str
        ``first_token``, one of :data:`FIRST_TOKEN`.

    Raises
    ------
    ValueError
        When it is neither ``"prefill"`` nor ``"decode"``.
    """
    if first_token not in FIRST_TOKEN:
        raise ValueError(f"first_token={first_token!r}: must be 'prefill' (the prefill "
                         "iteration emits the first output token, as vLLM does) or 'decode' "
                         "(every output token takes a decode iteration)")
    return first_token


def check_preemption(preemption) -> str:
    """``preemption`` itself, or a ``ValueError`` naming the valid values.

    Parameters
    ----------
    preemption : str
        The rule asked for.

    Returns
    -------
    str
        ``preemption``, one of :data:`PREEMPTION`.

    Raises
    ------
    ValueError
        When it is neither ``"recompute"`` nor ``"restart"``.
    """
    if preemption not in PREEMPTION:
        raise ValueError(f"preemption={preemption!r}: must be 'recompute' (vLLM: a preempted "
                         "request keeps its output tokens and prefills them again with its "
                         "prompt) or 'restart' (the papers' model: they are discarded and "
                         "generated again)")
    return preemption
