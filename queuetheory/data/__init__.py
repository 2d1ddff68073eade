"""Real workloads and small shipped samples."""

__all__: list[str] = []
