"""A policy's JSON lists (approval rules, redaction patterns, budgets) edited in the admin as rows, one per item.

The page posts `<name>-rows` (how many rows) and `<name>-<row>-<column>` for each cell, plus `<name>-<row>-remove`;
blank and removed rows are dropped. The field turns the rows into the same JSON list the policy stores, so the
validation that follows (`HostPolicyForm`) and everything that reads the list are unchanged; it puts the problems
of each item beside its row (`RowsWidget.row_errors`). A post without `<name>-rows` is read as JSON text, as
scripts and the tests of the JSON form post it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django import forms
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from runs.forms import StorableJSONField

__all__ = ("BudgetRowsWidget", "PatternRowsWidget", "PostedRows", "RowsField", "RuleRowsWidget")

# More rows than any policy needs: a post naming a larger count is read up to here.
MAX_ROWS = 200


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    label: str
    size: int = 20
    choices: tuple[str, ...] = ()


class PostedRows(list[dict[str, str]]):
    """The rows as posted (cells as typed), blank and removed rows left out; `refused` says why a post that names
    no usable row count is refused."""

    refused = ""


class RowsWidget(forms.Widget):
    """One row of inputs per item of a JSON list, plus one blank row to add to (more come from `form_rows.js`)."""

    columns: tuple[Column, ...] = ()
    add_label = "Add a row"

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.row_errors: dict[int, list[str]] = {}

    def id_for_label(self, id_: str) -> str:
        # The field's label points at the first cell of the first row.
        return f"{id_}-0-{self.columns[0].name}" if id_ else ""

    def cells_of(self, item: Any) -> dict[str, str]:
        raise NotImplementedError

    def item_of(self, cells: Mapping[str, str]) -> Any:
        raise NotImplementedError

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        count = data.get(f"{name}-rows")
        if count is None:
            return data.get(name)
        posted = PostedRows()
        try:
            rows = int(count)
        except ValueError:
            rows = 0
        if not 0 <= rows <= MAX_ROWS:
            posted.refused = f"At most {MAX_ROWS} rows are read; this post names {rows}. Nothing was saved."
            return posted
        for row in range(rows):
            cells = {column.name: (data.get(f"{name}-{row}-{column.name}") or "").strip() for column in self.columns}
            if data.get(f"{name}-{row}-remove") or not any(cells.values()):
                continue
            posted.append(cells)
        return posted

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return f"{name}-rows" not in data and name not in data

    def _rows(self, value: Any) -> list[dict[str, str]]:
        if isinstance(value, PostedRows):
            return list(value)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                return []  # refused by the field: its error says why
        return [self.cells_of(item) for item in value] if isinstance(value, list) else []

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        rows = self._rows(value)
        blank = {column.name: "" for column in self.columns}
        context = {
            "name": name,
            "columns": self.columns,
            "rows": [
                (
                    index,
                    [(column, cells.get(column.name, "")) for column in self.columns],
                    self.row_errors.get(index, []),
                )
                for index, cells in enumerate([*rows, blank])
            ],
            "count": len(rows) + 1,
            "add_label": self.add_label,
            "stored_json": json.dumps([self.item_of(cells) for cells in rows], indent=2, ensure_ascii=False),
        }
        return SafeString(render_to_string("admin/runs/hostpolicy/form_rows.html", context))


def _value_text(value: Any) -> str:
    """A condition's value as typed: a string as itself, unless it would read back as another JSON value."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False)


def _typed_value(text: str) -> Any:
    """What a typed value means: JSON when it reads as JSON (`1000`, `true`, `"1000"`), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


class RuleRowsWidget(RowsWidget):
    """An approval rule per row: tool, an optional condition (argument, operator, value) and the reason."""

    columns = (
        Column("tool", "tool (name or glob)"),
        Column("arg", "argument"),
        Column("op", "operator", choices=("", "eq", "ne", "gt", "lt", "contains")),
        Column("value", "value (JSON or text)"),
        Column("reason", "reason shown to the approver", size=36),
    )
    add_label = "Add a rule"

    def cells_of(self, item: Any) -> dict[str, str]:
        if not isinstance(item, Mapping):
            return {"tool": json.dumps(item, ensure_ascii=False)}
        condition = item.get("when")
        when: Mapping[str, Any] = condition if isinstance(condition, Mapping) else {}
        return {
            "tool": str(item.get("tool", "")),
            "arg": str(when.get("arg", "")),
            "op": str(when.get("op", "")),
            "value": _value_text(when["value"]) if "value" in when else "",
            "reason": str(item.get("reason", "")),
        }

    def item_of(self, cells: Mapping[str, str]) -> dict[str, Any]:
        rule: dict[str, Any] = {"tool": cells.get("tool", "")}
        arg, op, value = cells.get("arg", ""), cells.get("op", ""), cells.get("value", "")
        if arg or op or value:
            rule["when"] = {"arg": arg, "op": op, "value": _typed_value(value) if value else None}
        if cells.get("reason"):
            rule["reason"] = cells["reason"]
        return rule


class PatternRowsWidget(RowsWidget):
    """A redaction pattern (a key regex) per row."""

    columns = (Column("pattern", "key pattern (regular expression, case-insensitive)", size=40),)
    add_label = "Add a pattern"

    def cells_of(self, item: Any) -> dict[str, str]:
        return {"pattern": item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)}

    def item_of(self, cells: Mapping[str, str]) -> str:
        return cells.get("pattern", "")


class BudgetRowsWidget(RowsWidget):
    """A budget per row: whom it covers (a profile or a user), its window, and its limit in tokens or money."""

    columns = (
        Column("scope", "covers a", choices=("", "profile", "user")),
        Column("name", "profile name, username, or * for each user"),
        Column("window", "per UTC", choices=("", "day", "month")),
        Column("unit", "limit in", choices=("", "tokens", "money")),
        Column("limit", "limit", size=12),
    )
    add_label = "Add a budget"

    def cells_of(self, item: Any) -> dict[str, str]:
        if not isinstance(item, Mapping):
            return {"name": json.dumps(item, ensure_ascii=False)}
        cells = {column.name: str(item.get(column.name, "")) for column in self.columns}
        if "limit" in item:
            cells["limit"] = _value_text(item["limit"])
        return cells

    def item_of(self, cells: Mapping[str, str]) -> dict[str, Any]:
        budget: dict[str, Any] = {column.name: cells.get(column.name, "") for column in self.columns}
        budget["limit"] = _typed_value(budget["limit"])
        return budget


class RowsField(StorableJSONField):
    """A JSON list edited as rows (`RowsWidget`), or posted as JSON text."""

    widget: RowsWidget

    def __init__(self, *, widget: RowsWidget, **kwargs: Any) -> None:
        super().__init__(widget=widget, **kwargs)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, PostedRows):
            if value.refused:
                raise forms.ValidationError(value.refused, code="invalid")
            return [self.widget.item_of(cells) for cells in value]
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        return data if isinstance(data, PostedRows) else super().bound_data(data, initial)

    def prepare_value(self, value: Any) -> Any:
        # The widget renders rows from the list (or the posted rows) itself, not from JSON text.
        return value

    def has_changed(self, initial: Any, data: Any) -> bool:
        return initial != self.to_python(data) if isinstance(data, PostedRows) else super().has_changed(initial, data)

    def errors_beside_rows(self, problems: dict[int, list[str]]) -> forms.ValidationError:
        """Put each item's problems beside its row, and list them all as the field's error."""
        self.widget.row_errors = problems
        return forms.ValidationError([problem for index in sorted(problems) for problem in problems[index]])
