"""networkx fabric model: build, name, locate, summarise."""

from diagnose.topology.fabric import Fabric, build_fabric, link_gbps

__all__ = ["Fabric", "build_fabric", "link_gbps"]
