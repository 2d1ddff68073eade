"""The Azure LLM inference traces of 2023: production arrival times and token counts.

Two one-hour samples of LLM inference services in Azure (2023-11-16), from the public
repository Azure/AzurePublicDataset, shipped unchanged but gzip-compressed as
``azure_llm_2023_{code,conv}.csv.gz`` under the CC-BY 4.0 license (``AZURE_LICENSE.txt``;
attribution in ``AZURE.md``). Cite: Patel, Choukse, Zhang, Shah, Goiri, Maleki, Bianchini,
"Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024.

=========== ======== ==================================================================
trace       requests columns
=========== ======== ==================================================================
``"code"``  8,819    TIMESTAMP (invocation time), ContextTokens, GeneratedTokens
``"conv"``  19,366   same
=========== ======== ==================================================================
"""

from __future__ import annotations

from importlib import resources

__all__ = ["azure_trace", "AZURE_TRACES", "open_trace"]

AZURE_TRACES = {"code": "azure_llm_2023_code.csv.gz", "conv": "azure_llm_2023_conv.csv.gz"}


def azure_trace(name: str = "conv", **options):
    """The Azure LLM 2023 ``"conv"`` (conversation) or ``"code"`` trace as a
    :class:`~queuetheory.workload.Trace`.

    ``options`` go to :func:`queuetheory.workload.traces.read_trace`: ``time_unit``
    (``"s"`` default, or ``"ms"``), ``window``, ``speedup``, ``rate``. Prompt =
    ``ContextTokens``, output = ``GeneratedTokens`` (counting the first token, the real
    engines' convention); the first request arrives at 0. Data: CC-BY 4.0, Patel et al.,
    "Splitwise", ISCA 2024.

    Parameters
    ----------
    name : {"conv", "code"}, default "conv"
        Which shipped trace (a key of :data:`AZURE_TRACES`): the conversation service's
        19,366 requests or the coding service's 8,819, one hour each.
    **options
        Keyword arguments of :func:`~queuetheory.workload.traces.read_trace` (not
        ``format``, which is ``"azure"``).

    Returns
    -------
    Trace
        The requests in arrival order, arrivals in ``time_unit`` from the first request,
        one class.

    Raises
    ------
    ValueError
        If ``name`` is not a shipped trace, or an option is invalid (see
        :func:`~queuetheory.workload.traces.read_trace`).

    Warns
    -----
    UserWarning
        When requests with 0 prompt or output tokens are dropped or clipped (``read_trace``'s
        ``zero_tokens``).
    """
    from ..workload.traces import read_trace

    if not isinstance(name, str) or name not in AZURE_TRACES:
        raise ValueError(f"name={name!r}: must be one of {tuple(AZURE_TRACES)}")
    with resources.as_file(resources.files(__package__).joinpath(AZURE_TRACES[name])) as path:
        return read_trace(path, format="azure", **options)


def open_trace(source, *, format=None, **options):
    """A trace from a file (:func:`~queuetheory.workload.traces.read_trace`), or a shipped
    trace by name where no file of that name exists — Azure's ``"conv"`` or ``"code"``, a
    Mooncake trace ``"mooncake:conversation"`` or ``"mooncake:synthetic"`` (with its prefix
    blocks): what the command line's ``--trace`` accepts.

    Parameters
    ----------
    source : str, path-like or pandas.DataFrame
        A trace file or DataFrame (see :func:`~queuetheory.workload.traces.read_trace`),
        ``"conv"`` / ``"code"`` for a shipped Azure trace (:func:`azure_trace`), or
        ``"mooncake:NAME"`` for a shipped Mooncake trace (:func:`mooncake_trace`).
    format : str, optional
        The trace layout (``read_trace``'s ``format``); for a shipped trace only ``None`` or
        ``"azure"``.
    **options
        Keyword arguments of :func:`~queuetheory.workload.traces.read_trace`.

    Returns
    -------
    Trace
        The requests in arrival order, the first one arriving at 0.

    Raises
    ------
    ValueError
        If ``format`` is given and not the shipped trace's (``"azure"``, ``"mooncake"``), the
        Mooncake name is not a shipped trace, or ``read_trace`` rejects the file or an
        option.
    """
    from pathlib import Path

    from ..workload.traces import read_trace

    if isinstance(source, str) and source in AZURE_TRACES and not Path(source).exists():
        if format not in (None, "azure"):
            raise ValueError(f"format={format!r}: the shipped trace {source!r} is Azure's")
        return azure_trace(source, **options)
    if isinstance(source, str) and source.startswith("mooncake:") and not Path(source).exists():
        from .mooncake import mooncake_trace

        if format not in (None, "mooncake"):
            raise ValueError(f"format={format!r}: the shipped trace {source!r} is Mooncake's")
        return mooncake_trace(source.partition(":")[2], **options)
    return read_trace(source, format=format, **options)
