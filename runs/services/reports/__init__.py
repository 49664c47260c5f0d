"""What pages and the admin read beyond the timeline, above `timeline` and beside `lifecycle`: the execution
page's config, provenance, failures, the audit, the list of executions, rule checks, dry runs, usage and cost.
Nothing here writes."""

from . import budget_usage, costs, durations, failures, provenance, run_comparison, step_alignment, timeline_page
from .audit import CSV_COLUMNS, AuditFilters, audit_rows, csv_lines
from .dry_run import dry_run
from .execution_list import WAITING_FOR, Cursor, ExecutionFilters, ExecutionPage, execution_page, status_counts
from .rule_checks import effective_approvals, problems_of_rule, rule_problems
from .usage_report import usage_report

__all__ = (
    "CSV_COLUMNS",
    "WAITING_FOR",
    "AuditFilters",
    "Cursor",
    "ExecutionFilters",
    "ExecutionPage",
    "audit_rows",
    "budget_usage",
    "costs",
    "csv_lines",
    "dry_run",
    "durations",
    "effective_approvals",
    "execution_page",
    "failures",
    "problems_of_rule",
    "provenance",
    "rule_problems",
    "run_comparison",
    "status_counts",
    "step_alignment",
    "timeline_page",
    "usage_report",
)
