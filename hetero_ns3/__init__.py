"""hetero_ns3: packet-level simulation of distributed LLM training on heterogeneous GPU clusters."""

__version__ = "0.2.0"
