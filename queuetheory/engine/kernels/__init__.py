"""Decision rules run in bulk, without asking the policy at every iteration.

A policy whose every decision follows a rule here hands ``simulate`` a runner that calls
the rule's kernel with plain parameters (:meth:`~queuetheory.policies.Policy.bulk`); the
kernel runs the rule in a loop of plain integer and float arithmetic, one pass per
iteration, and writes the request stamps, batch log and TBT histogram in bulk at the end.
The records are those of the step-by-step engine to the last bit (``tests/test_kernels.py``).
Nothing here knows a scheduler's class: the engine names no policy.

``"decode_first_fill"`` (Sarathi-Serve with FCFS order, Li, Dai, Peng §3): every request whose
prompt is prefilled decodes one token, and the rest of the token budget ``b`` goes to prompt
tokens in arrival order, the last prompt chunked. Prefills therefore finish in arrival order,
and a request whose prompt finishes in iteration ``q`` emits its ``o`` output tokens in
iterations ``q+1 … q+o``, one per iteration, under ``first_token="decode"``, and in
iterations ``q … q+o−1`` under ``first_token="prefill"`` (the prefill iteration emits the
first token): its time stamps follow from the iterations' end times. Every batch is
feasible by construction: each prompt that finishes took at least one token of the room
``b − d`` the ``d`` decodes left, so at most ``b`` requests ever decode and the token load
never exceeds ``b``. With a KV-memory limit (vLLM's accounting and recompute preemption,
:func:`~queuetheory.policies.base.fit_memory`) or a batch-size limit ``max_reqs`` the rule
runs as :func:`~.decode_first_fill.decode_first_fill_memory`, which follows residencies
instead of prompts. Without a token budget (``b`` unbounded) it is FCFSRestart of Ao et al.
without a memory limit: every request runs each iteration, prompts whole.

``"prefill_batches"`` (vanilla vLLM with FCFS order, Li, Dai, Peng §3): a prefill-only batch
whenever a prompt can start, else a decode-only batch of the oldest requests in decode
(:func:`~.prefill_batches.prefill_batches_kernel`).

``"future_peak_admission"`` (MC-SF of Jaillet et al., A_max, A_min, H-SF and A_random of Chen,
Ye, Zhou): every running request decodes, and waiting ones are admitted in the policy's
order while the future-peak check holds (:mod:`.future_peak_admission`).

``"slo_slack"`` (SLAI of Bari, Hegde and de Veciana, §6, without a KV-memory limit): critical
decodes by last schedulable time, then prefills, then the other decodes by slack; the
decodes fall into a few groups served together (:func:`~.slo_slack.slo_slack`).

``"cohorts"`` (WAIT and Nested WAIT of Ao et al., Algorithms 1–2, without a KV-memory limit):
types or segments run all or nothing once their thresholds are met
(:func:`~.cohorts.cohorts`).

``"class_priority_fill"`` (static priority between classes under FCFS, Li, Dai, Peng §4.2):
for each class in priority order its decodes, then its prompt tokens in arrival order, while
the budget lasts; with one class, FCFS Sarathi's rule (:mod:`.class_priority_fill`).
KFCFS around FCFS Sarathi with windows of at least the budget decides as Sarathi and runs
as ``decode_first_fill``.
``"prefill_first_fill"`` (Orca with FCFS order) and ``"decode_priority"`` (iteration-level
FasterTransformer with FCFS order): the requests that decode in an iteration are
the oldest requests in decode, so each emits its tokens in runs of consecutive iterations
(:mod:`~.decode_prefix`: :func:`~.decode_prefix.prefill_first_fill`,
:func:`~.decode_prefix.decode_priority`).

The rules run with a token-count time model, prompts and outputs of at least one token, under
either first-token convention, and with recompute preemption where memory is limited (the
papers' restart for ``future_peak_admission``); elsewhere the engine steps. Each rule lives
in a module of its own, but for Orca's and FasterTransformer's, which are two decisions of
:mod:`.decode_prefix`; :func:`bulk_ready` holds the conditions every rule shares.
"""

from __future__ import annotations

from .class_priority_fill import class_priority_kernel
from .cohorts import cohorts
from .decode_first_fill import decode_first_fill, decode_first_fill_memory
from .decode_prefix import decode_priority, prefill_first_fill
from .future_peak_admission import future_peak_admission
from .prefill_batches import prefill_batches_kernel
from .slo_slack import slo_slack

__all__ = ["bulk_ready", "bulk_runner", "decode_first_fill", "decode_first_fill_memory",
           "prefill_batches_kernel", "future_peak_admission", "slo_slack", "cohorts",
           "class_priority_kernel", "prefill_first_fill", "decode_priority"]


def bulk_ready(engine) -> bool:
    """May a bulk rule start on ``engine``? Every rule needs a fresh engine (no iteration
    run, nothing live), a token-count time model, the policy's own token budget and
    prompts and outputs of at least one token; the policy's
    :meth:`~queuetheory.policies.Policy.bulk` decides the rest (memory, preemption, its
    options)."""
    tab = engine.table
    return not (not engine.time_model.counts_only
                or engine.token_budget != getattr(engine.policy, "token_budget", None)
                or engine.iteration or engine.live.size
                or (tab.n and min(tab.column("prompt").min(), tab.column("output").min()) < 1))


def bulk_runner(engine, policy):
    """``policy``'s bulk runner on ``engine`` (:meth:`~queuetheory.policies.Policy.bulk`)
    where :func:`bulk_ready` holds, else ``None``: what ``simulate`` runs before it steps."""
    bulk = getattr(policy, "bulk", None)
    return bulk(engine) if bulk is not None and bulk_ready(engine) else None
