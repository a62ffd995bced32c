"""Small display helpers for the templates. Everything returned is plain text: autoescaping still applies."""

from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def dna_value(value) -> str:
    """A DNA value as a human reads it: strings as they are, everything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def percent(value) -> str:
    """0.8312 -> '83.1%'; None -> '—' (nothing measured is not 0%)."""
    if value is None:
        return "—"
    return f"{value * 100:.1f}%"


@register.filter
def score(value) -> str:
    return "—" if value is None else f"{value:.3f}"


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if hasattr(mapping, "get") else None
