"""The ``hetero-ns3`` command line."""
