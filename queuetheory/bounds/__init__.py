"""Capacities, competitive ratios, Lyapunov drift, hindsight optima and adversarial instances."""

__all__: list[str] = []
