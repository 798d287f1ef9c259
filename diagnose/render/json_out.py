"""JSON: the stable contract (schema_version 1). Byte-identical for identical input."""

from __future__ import annotations

import json

from diagnose.models.diagnosis import Diagnosis


def render_json(d: Diagnosis) -> str:
    return json.dumps(d.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def json_schema() -> str:
    schema = Diagnosis.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://github.com/diagnose/diagnose/schema/diagnosis-v1.json"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
