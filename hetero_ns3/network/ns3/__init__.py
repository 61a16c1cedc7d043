"""The packet-level backend: our ns-3 RoCE module (``native/``, ns-3 module layout), its loader and the DAG replay.

Simulations run through the module's C ABI (:mod:`.capi`, ctypes: no ``import ns``). This package is
also the only place in hetero_ns3 that imports ``ns`` / ``cppyy`` (:func:`.ns3env.import_ns`, on first use),
for the cppyy path (:mod:`.cppyy_engine`, ``doctor``, interactive use of the C++ classes).
"""
