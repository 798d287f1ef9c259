"""I/O only: open folders, archives and single files; decode; sniff each file's format by content."""

from diagnose.bundle.loader import BundleError, BundleFile, LoadLimits, load_inputs
from diagnose.bundle.sniff import Sniffed, sniff_file

__all__ = ["BundleError", "BundleFile", "LoadLimits", "Sniffed", "load_inputs", "sniff_file"]
