"""Getting code out of model replies. A reply with no complete code is a failed generation:
truncated or half-parsed code is never passed on as if it were the model's answer."""

from __future__ import annotations

import json
import re

_FENCED = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> str | None:
    """The last fenced code block, else None."""
    blocks = _FENCED.findall(text)
    return blocks[-1] if blocks else None


def extract_json_code(text: str) -> tuple[str | None, str | None]:
    """(thought, code) from a JSON reply {"thought": ..., "code": ...}, tolerating a fenced
    JSON block or prose around one object; (None, None) when no well-formed object is there."""
    candidates = [text.strip()]
    candidates += re.findall(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for blob in candidates:
        try:
            obj = json.loads(blob)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("code"), str) and obj["code"].strip():
            code = obj["code"]
            fenced = extract_code(code)
            return (str(obj.get("thought", "")), fenced if fenced else code)
    return None, None
