"""Forms of the humans' pages: every post is validated here before a service sees it."""

from __future__ import annotations

from django import forms


class SpaceSwitchForm(forms.Form):
    space = forms.SlugField(max_length=64)
    next = forms.CharField(required=False, max_length=2000)
