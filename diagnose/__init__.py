"""diagnose: rule-based diagnosis of the GPU-cluster communication layer."""

__version__ = "0.1.0"
