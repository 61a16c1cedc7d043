"""Compute planner: GPU catalog and roofline timing of training kernels (pure Python, no ns-3)."""

from hetero_ns3.compute.gpus import GpuSpec, get_gpu, gpu_catalog

__all__ = ["GpuSpec", "get_gpu", "gpu_catalog"]
