"""Real workloads, traces and GPU timings, and small shipped samples of them.

- :func:`sharegpt_lengths`: ShareGPT V3 (prompt, output) lengths (``SHAREGPT.md``);
- :func:`azure_trace`: the Azure LLM inference traces of 2023 with arrival times (CC-BY 4.0,
  Patel et al., "Splitwise", ISCA 2024; ``AZURE.md``);
- :func:`mooncake_trace`: the Mooncake traces of Kimi's service with prefix-block hashes
  (Apache-2.0, Qin et al., FAST 2025; ``mooncake/SOURCE.md``);
- :func:`bailian_sessions`: a user's copy of a Qwen-Bailian usage trace (Apache-2.0, Wang
  et al., ATC 2025; not shipped, the files are in Git LFS upstream) as sessions with
  16-token prefix blocks;
- ``vllm_runs/``: measured vLLM runs with their GPUs' operator profiles (MIT, LLMServingSim
  2.0), read by :mod:`queuetheory.validate`.
"""

from .azure import AZURE_TRACES, azure_trace, open_trace
from .bailian import BAILIAN_BLOCK, BAILIAN_FIELDS, bailian_sessions
from .mooncake import MOONCAKE_BLOCK, MOONCAKE_TRACES, mooncake_table, mooncake_trace
from .sharegpt import PAPER_LENGTH_STATISTICS, sharegpt_lengths, sharegpt_statistics

__all__ = ["sharegpt_lengths", "sharegpt_statistics", "PAPER_LENGTH_STATISTICS",
           "azure_trace", "AZURE_TRACES", "open_trace", "mooncake_trace", "mooncake_table",
           "MOONCAKE_TRACES", "MOONCAKE_BLOCK", "bailian_sessions", "BAILIAN_BLOCK",
           "BAILIAN_FIELDS"]
