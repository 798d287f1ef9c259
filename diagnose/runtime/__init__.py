"""How a triage's work is spread over processes, behind one seam (:class:`Executor`): :class:`SerialExecutor`, one
process in path order, is the reference and the library's default; :class:`ParallelExecutor` (the CLI's and the
service's) parses large bundles on two cores with the same result, byte for byte (:mod:`.isolated` gives a caller
that runs threads a one-thread process where it may fork). Everything about processes, pipes, forks, spill files
and the collector lives here; :mod:`diagnose.stages` never imports it."""

from diagnose.runtime.parallel import ParallelExecutor
from diagnose.runtime.serial import Executor, Run, SerialExecutor, Stages

__all__ = ["Executor", "ParallelExecutor", "Run", "SerialExecutor", "Stages"]
