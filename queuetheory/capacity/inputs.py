"""What the searches share: the settings a policy refuses and a bar of probes (the token
budget is the engine's rule, :func:`~queuetheory.engine.server.token_budget_for`)."""

from __future__ import annotations

from ..engine.server import as_server


def _checked_settings(who: str, policy, time_model, token_budget, memory, first_token):
    """The settings of a capacity question — a :class:`~queuetheory.engine.Server` given as
    ``time_model``, or a time model and the loose settings (``first_token=None``:
    ``"prefill"``) — validated once and refused, before any bound or probe, where ``policy``
    cannot run (:meth:`~queuetheory.engine.Server.check`): ``(time_model, token_budget,
    memory, first_token)``."""
    server = as_server(time_model, token_budget=token_budget, memory=memory,
                       first_token=first_token)
    server.check(policy, where=f"qt.capacity.{who}")
    return server.time_model, server.token_budget, server.memory, server.first_token


class _ProbeBar:
    """A tqdm bar of a search's probes (``on``), each shown with its rate and outcome;
    nothing when off."""

    def __init__(self, on: bool, desc: str):
        self.bar = None
        if on:
            from tqdm.auto import tqdm

            self.bar = tqdm(desc=desc, unit="probe")

    def update(self, rate: float, outcome: str, seconds: float) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"rate {rate:.4g}: {outcome} ({seconds:.1f} s)",
                                     refresh=False)
            self.bar.update()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
