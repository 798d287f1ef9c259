"""The vocabulary every stage speaks."""

from diagnose.models.diagnosis import (
    SCHEMA_VERSION,
    CauseResult,
    Diagnosis,
    EvidenceRef,
    FileEntry,
    Finding,
    Location,
    MissingEvidence,
    RuledOut,
    Symptom,
)
from diagnose.models.records import ParseResult, Record, clip

__all__ = [
    "SCHEMA_VERSION",
    "CauseResult",
    "Diagnosis",
    "EvidenceRef",
    "FileEntry",
    "Finding",
    "Location",
    "MissingEvidence",
    "ParseResult",
    "Record",
    "RuledOut",
    "Symptom",
    "clip",
]
