"""What pages and the admin read beyond the timeline, above `timeline` and beside `lifecycle`: the execution
page's config, provenance, failures, the audit, rule checks and dry runs. Nothing here writes."""

from . import durations, failures, provenance, timeline_page
from .audit import CSV_COLUMNS, AuditFilters, audit_rows, csv_lines
from .dry_run import dry_run
from .rule_checks import effective_approvals, rule_problems

__all__ = (
    "CSV_COLUMNS",
    "AuditFilters",
    "audit_rows",
    "csv_lines",
    "dry_run",
    "durations",
    "effective_approvals",
    "failures",
    "provenance",
    "rule_problems",
    "timeline_page",
)
