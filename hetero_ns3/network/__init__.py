"""The network stage: one :class:`~hetero_ns3.network.backend.Backend` interface, two backends.

* :mod:`.backend`: the ``Backend`` protocol, :class:`~.backend.BackendRun` and the registry (``get_backend``).
* :mod:`.ns3`: packet level, our C++ RoCE module inside ns-3 (the only package that imports ns-3).
* :mod:`.analytic`: flow level, max-min fair sharing with a C event loop.
* :mod:`.config`: ``[network]`` settings shared by both (congestion control, PFC, ECN, buffers, NIC framing).

Importing this package is cheap and imports no ns-3.
"""
