"""Claims of Li, Dai, Peng (seed 004)."""
