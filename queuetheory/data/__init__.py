"""Real workloads and small shipped samples."""

from .sharegpt import PAPER_LENGTH_STATISTICS, sharegpt_lengths, sharegpt_statistics

__all__ = ["sharegpt_lengths", "sharegpt_statistics", "PAPER_LENGTH_STATISTICS"]
