"""`{{ moment|when }}`: a time in the one date format (harness_site/formats), zone included, inside a <time>
element that times.js turns into "3 min ago" with the exact time kept on hover."""

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html

register = template.Library()


@register.filter
def when(moment: datetime | None, empty: str = "—") -> str:
    if moment is None:
        return empty
    exact = date_format(timezone.localtime(moment), "DATETIME_FORMAT")
    return format_html('<time class="when" datetime="{}" title="{}">{}</time>', moment.isoformat(), exact, exact)
