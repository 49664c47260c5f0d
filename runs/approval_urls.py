"""Routes of the approvals pages; runs/urls.py appends them to the `runs` namespace."""

from django.urls import path

from runs import approval_views

urlpatterns = [
    path("approvals/", approval_views.inbox, name="approvals"),
    path("approvals/rows/", approval_views.inbox_rows, name="approval_rows"),
    path("approvals/group/", approval_views.decide_group, name="approval_group"),
    path("approvals/audit/", approval_views.audit, name="approval_audit"),
    path("approvals/audit/decisions.csv", approval_views.audit_export, name="approval_audit_export"),
    path("executions/<pk:execution_pk>/approvals/", approval_views.decide, name="approval_decide"),
]
