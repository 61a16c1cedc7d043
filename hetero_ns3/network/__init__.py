"""The ns-3 boundary: the only package of hetero_ns3 that imports ``ns`` / ``cppyy``.

Importing this package is cheap; ns-3 itself is imported on first use through
:func:`hetero_ns3.network.ns3env.import_ns` (about 12 s, once per process).
"""
