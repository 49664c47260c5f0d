"""The Host's services, in layers; each subpackage imports only those below it (an import-linter contract):

- `worker` (the RQ job's run loop) and `recovery` (the sweep), which do not import each other;
- `lifecycle` (executions, forks, children, approvals, cancellation) and `reports` (what pages and the admin read
  beyond the timeline), which do not import each other;
- `timeline` (redaction, projection, publication and the read side of the stored events);
- `store` (leases, journal, checkpoints, the queue, policy versions, tools, providers, the agent a run builds).
"""
