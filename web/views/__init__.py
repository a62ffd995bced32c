"""Humans' pages. Each view resolves the human's space, calls one selector or service, renders."""
