"""`{{ value|pretty_json }}`: a stored JSON value as indented JSON text (never Python's repr)."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
