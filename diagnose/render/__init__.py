"""One Diagnosis, many sinks."""

from diagnose.render.json_out import render_json
from diagnose.render.markdown import render_markdown
from diagnose.render.text import render_text

__all__ = ["render_json", "render_markdown", "render_text"]
