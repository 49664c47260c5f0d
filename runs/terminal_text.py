"""Model text made safe for a terminal: no escape sequences, no control characters but line breaks and tabs.

Model output is untrusted. Printed raw, an ANSI/OSC sequence could retitle the window, hide or rewrite earlier
lines, plant a clickable link, or (on some terminals) answer back as if typed.
"""

from __future__ import annotations

import re

_ESCAPE_SEQUENCES = re.compile(
    r"""
    \x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)      # OSC ... BEL or ST (or unterminated)
  | \x1b[P^_X][^\x1b]*(?:\x1b\\|$)          # DCS, PM, APC, SOS ... ST
  | \x1b\[[0-?]*[ -/]*[@-~]?                # CSI
  | \x9b[0-?]*[ -/]*[@-~]?                  # 8-bit CSI
  | \x1b[ -/]*[0-~]?                        # any other escape
    """,
    re.VERBOSE,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without escape sequences and control characters (\\n and \\t stay; \\r would rewrite the line)."""
    return _CONTROL.sub("", _ESCAPE_SEQUENCES.sub("", text))
