"""Symbolic and numeric fluid models: KV-memory equilibria and thresholds (seed 000), the
token-budget engine's fluid model (seed 004)."""

__all__: list[str] = []
