"""The packet-level backend: our ns-3 RoCE module (``native/``, ns-3 module layout), its loader and the DAG replay.

The only place in hetero_ns3 that imports ``ns`` / ``cppyy`` (through :func:`.ns3env.import_ns`, on first use).
"""
