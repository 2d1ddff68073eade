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
"""

from __future__ import annotations

__all__ = ["FIRST_TOKEN", "check_first_token"]

FIRST_TOKEN = ("prefill", "decode")


def check_first_token(first_token) -> str:
    """``first_token`` itself, or a ``ValueError`` naming the valid values."""
    if first_token not in FIRST_TOKEN:
        raise ValueError(f"first_token={first_token!r}: must be 'prefill' (the prefill "
                         "iteration emits the first output token, as vLLM does) or 'decode' "
                         "(every output token takes a decode iteration)")
    return first_token
