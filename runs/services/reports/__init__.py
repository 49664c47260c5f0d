"""What pages and the admin read beyond the timeline, above `timeline` and beside `lifecycle`: the execution
page's config, provenance, failures, the audit, the list of executions, rule checks and dry runs. Nothing here
writes."""

from . import failures, provenance, timeline_page
from .audit import CSV_COLUMNS, AuditFilters, audit_rows, csv_lines
from .dry_run import dry_run
from .execution_list import WAITING_FOR, Cursor, ExecutionFilters, ExecutionPage, execution_page, status_counts
from .rule_checks import effective_approvals, rule_problems

__all__ = (
    "CSV_COLUMNS",
    "WAITING_FOR",
    "AuditFilters",
    "Cursor",
    "ExecutionFilters",
    "ExecutionPage",
    "audit_rows",
    "csv_lines",
    "dry_run",
    "effective_approvals",
    "execution_page",
    "failures",
    "provenance",
    "rule_problems",
    "status_counts",
    "timeline_page",
)
