"""Against the world: replay a measured serving run and score the prediction per request.

- :mod:`.runs`: :func:`load_run` reads a run folder (vLLM's engine arguments, the workload,
  the GPU's operator profile, the measurements and a peer's prediction where present), or a
  shipped run by name (:data:`SHIPPED_RUNS`);
- :mod:`.predict`: :func:`replay` predicts it (:class:`~queuetheory.policies.VLLMV1` on
  :class:`~queuetheory.timing.ProfileTime`) and returns a :class:`Validation` — the
  prediction, its errors beside the peer's, figures, and ``write(out)``.

``queuetheory validate RUN_DIR --out DIR`` is the command-line twin.
"""

from .predict import METRICS, Validation, error_table, format_errors, replay
from .runs import MODEL_CONTEXT, SHIPPED_RUNS, MeasuredRun, RunFolderError, load_run

__all__ = ["replay", "Validation", "error_table", "format_errors", "METRICS", "load_run",
           "MeasuredRun", "RunFolderError", "SHIPPED_RUNS", "MODEL_CONTEXT"]
