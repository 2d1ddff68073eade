"""The papers' wing: one module per paper for its instances, constants and experiments.

The toolkit's rooms answer questions (``capacity``, ``networks``, ``bounds``, ...); what
belongs to one paper — the instance a proposition is stated on, the workloads of its
experiments, the runs its figures come from — lives here, one module per paper, so that the
ledger (:mod:`queuetheory.claims`) holds only claims (statement → check → verdict) and the
notebooks, tests and benchmarks import these from one place.

- :mod:`.ao2025` — Ao, Luo, Simchi-Levi, Wang: the Props. 4–5 instance, the §6 workloads and
  the §6.1 scheduler sweep;
- :mod:`.bari2025` — Bari, Hegde, de Veciana: the illustrative tiled time model, the exact
  pmf of the theory runs, the work price and random routing of Theorem 2;
- :mod:`.jaillet2025` — Jaillet, Jiang, Podimata, Zhou: the regret, admission-work and
  Section 7 experiments;
- :mod:`.li2025` — Li, Dai, Peng: the scaled Llama-3-70B fit, the classic schedulers at a
  budget, the bounded workload of the drift certificates.
"""

from . import ao2025, bari2025, jaillet2025, li2025

__all__ = ["ao2025", "bari2025", "jaillet2025", "li2025"]
