"""`{% submission_key_field %}`: the hidden one-time key of a form that starts work (runs.services.lifecycle.starts).

A new key per rendering: a double click or a browser's re-post repeats the key, a freshly loaded form does not."""

from django import template
from django.utils.html import format_html

from runs.forms import new_submission_key

register = template.Library()


@register.simple_tag
def submission_key_field() -> str:
    return format_html('<input type="hidden" name="submission_key" value="{}">', new_submission_key())
