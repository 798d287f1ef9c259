"""JSON: the stable contract (schema_version 1). Byte-identical for identical input."""

from __future__ import annotations

import json

from diagnose.models.diagnosis import Diagnosis


def render_json(d: Diagnosis) -> str:
    out = d.model_dump(mode="json")
    if out.get("settings") is None:
        out.pop("settings", None)  # the built-in catalog as shipped: the header says nothing
    return json.dumps(out, indent=2, ensure_ascii=False) + "\n"


def json_schema() -> str:
    schema = Diagnosis.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://github.com/diagnose/diagnose/schema/diagnosis-v1.json"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
