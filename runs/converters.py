"""The `pk` path converter: a record number the database can hold, so a longer one is a 404, not a 500."""

from __future__ import annotations

from runs.validators import MAX_DB_INTEGER


class RecordNumberConverter:
    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_DB_INTEGER:
            raise ValueError(f"{value} is beyond the database's integer range")
        return number

    def to_url(self, value: int) -> str:
        return str(value)
