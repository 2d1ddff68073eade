"""Networks of LLM agents on networkx (seed 004 §4)."""

__all__: list[str] = []
