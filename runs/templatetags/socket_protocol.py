"""`{% socket_protocol %}`: the websocket protocol's constants for `static/js/socket.js`, as a json_script."""

from __future__ import annotations

from django import template
from django.utils.html import json_script
from django.utils.safestring import SafeString

from runs.protocol import page_constants

register = template.Library()


@register.simple_tag
def socket_protocol() -> SafeString:
    return json_script(page_constants(), "socket-protocol")
