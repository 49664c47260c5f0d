"""Durable records of the Host: profiles, policies, threads, executions, runs, journal, timeline and checkpoints.

Invariants the design relies on are database constraints, not only Python checks: contiguous journal indexes
are unique per run, timeline positions are unique per execution, a thread has at most one active execution and
an execution at most one leased run.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

DEFAULT_TEAM = "default"


class Team(models.Model):
    """Who shares profiles, policies and threads: a member sees and acts on its team's work only."""

    name = models.SlugField(unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TeamRole(models.IntegerChoices):
    """What a member may do in a team; each role includes the ones below it (compare with >=)."""

    VIEWER = 10, "viewer"
    OPERATOR = 20, "operator"
    APPROVER = 30, "approver"
    ADMIN = 40, "admin"


class Membership(models.Model):
    """A user's role in one team."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.PositiveSmallIntegerField(choices=TeamRole.choices, default=TeamRole.VIEWER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="membership_user_team_unique")]
        ordering = ["team", "user"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.get_role_display()})"


def _default_team_pk() -> int:
    """The `default` team, created when missing: where a profile or policy saved without a team goes."""
    return Team.objects.get_or_create(name=DEFAULT_TEAM)[0].pk


class AgentProfile(models.Model):
    """How a thread's agent is built: model, instructions and the host tools it may call."""

    name = models.SlugField(unique=True)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="profiles")
    model = models.CharField(
        max_length=200,
        help_text='"demo" for the offline scripted model, else a pydantic-ai model string "provider:model", e.g. '
        '"openai:gpt-4o", "anthropic:claude-sonnet-4-5", "openai-chat:llama3.2" for an OpenAI-compatible server.',
    )
    base_url = models.URLField(
        max_length=300,
        blank=True,
        help_text="Address of an OpenAI-compatible server (Ollama, vLLM, LM Studio), e.g. "
        "http://127.0.0.1:11434/v1. Empty: the provider's own endpoint, or its *_BASE_URL environment variable.",
    )
    instructions = models.TextField(blank=True)
    enabled_tools = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.team_id is None:
            # Unsaved without a team; django-stubs types the column of a required key as always set.
            self.team_id = _default_team_pk()  # type: ignore[unreachable]
        super().save(*args, **kwargs)


class HostPolicy(models.Model):
    """A named policy whose edits create new immutable versions; runs record the version they used.

    A team has at most one policy, and it governs every execution on that team's profiles."""

    name = models.SlugField(unique=True, default="default")
    team = models.OneToOneField(Team, on_delete=models.PROTECT, related_name="policy")
    current_version = models.ForeignKey(
        "HostPolicyVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        verbose_name_plural = "host policies"

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.team_id is None:
            # Unsaved without a team; django-stubs types the column of a required key as always set.
            self.team_id = _default_team_pk()  # type: ignore[unreachable]
        super().save(*args, **kwargs)


class ToolRecovery(models.TextChoices):
    DECLARED = "declared"
    NEVER = "never"
    ALWAYS = "always"


# The numbers a policy version may hold, inclusive. They are CHECK constraints, so no value the worker and the
# sweeper turn into a timedelta (or count attempts with) can be out of range, whoever writes the row.
POLICY_VERSION_LIMITS: dict[str, tuple[int, int]] = {
    "max_attempts": (1, 20),
    "lease_seconds": (1, 3600),
    "approval_timeout_seconds": (0, 30 * 24 * 3600),
    # More retries of one model request only delay a failure an operator should see.
    "model_max_retries": (0, 10),
}
# Days a finished execution is kept before retention purges it; None (blank) keeps it forever. 0 would purge an
# execution the moment it ends, which nobody means, so it is refused like any other number out of range.
RETENTION_DAYS_LIMITS = (1, 36500)


class HostPolicyVersion(models.Model):
    """One immutable version of a policy: approval rules, recovery mode and the limits runs obey."""

    policy = models.ForeignKey(HostPolicy, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    approval_rules = models.JSONField(default=list, blank=True)
    tool_recovery = models.CharField(max_length=16, choices=ToolRecovery.choices, default=ToolRecovery.DECLARED)
    max_attempts = models.PositiveIntegerField(default=3)
    lease_seconds = models.PositiveIntegerField(default=30)
    approval_timeout_seconds = models.PositiveIntegerField(default=0, help_text="0 = requests never expire.")
    redact_patterns = models.JSONField(default=list, blank=True)
    model_max_retries = models.PositiveSmallIntegerField(
        default=2,
        help_text="Retries of one failed model request (rate limit, server error, dropped connection) before "
        "the run fails; pydantic-ai's max_retries model setting.",
    )
    retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Days a completed, failed or cancelled execution is kept before retention purges its journal, "
        "timeline and checkpoints; blank keeps them forever.",
    )
    budgets = models.JSONField(
        default=list, blank=True, help_text="Token or money limits per profile or user, a UTC day or month each."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    comment = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["policy", "number"], name="policy_version_number_unique"),
            *(
                models.CheckConstraint(
                    condition=Q(**{f"{name}__gte": low, f"{name}__lte": high}), name=f"policy_version_{name}_range"
                )
                for name, (low, high) in POLICY_VERSION_LIMITS.items()
            ),
            models.CheckConstraint(
                condition=Q(retention_days__isnull=True)
                | Q(retention_days__gte=RETENTION_DAYS_LIMITS[0], retention_days__lte=RETENTION_DAYS_LIMITS[1]),
                name="policy_version_retention_days_range",
            ),
        ]
        ordering = ["policy", "number"]

    def __str__(self) -> str:
        return f"{self.policy.name} v{self.number}"


class Thread(models.Model):
    """A harness thread as the Host knows it; its state lives in the selected checkpoint."""

    # Unique within its team: another team's thread of the same id is invisible, not "taken" (AG-UI clients choose
    # ids, and a refusal would confirm that another team uses one).
    thread_id = models.CharField(max_length=100)
    title = models.CharField(max_length=200, blank=True)
    profile = models.ForeignKey(AgentProfile, on_delete=models.PROTECT, related_name="threads")
    # Everything of the thread (executions, runs, events, checkpoints, decisions) is its team's.
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="threads")
    selected_checkpoint = models.ForeignKey(
        "Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    forked_from = models.ForeignKey(
        "Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    # A read-only copy of another Host's thread, made from a run bundle: no execution starts on it.
    imported_by = models.ForeignKey(
        "BundleTransfer", null=True, blank=True, on_delete=models.PROTECT, related_name="threads"
    )
    # On hold: retention keeps it (and, for a thread, all its executions) whatever the policy says.
    held_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    held_at = models.DateTimeField(null=True, blank=True, help_text="Put on hold: retention skips it.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "thread_id"], name="thread_id_unique_per_team")]
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title or self.thread_id

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A thread's team is its profile's unless the caller says otherwise (a Host-managed child: its parent's).
        if self.team_id is None:
            # Unsaved without a team; django-stubs types the column of a required key as always set.
            self.team_id = self.profile.team_id  # type: ignore[unreachable]
        super().save(*args, **kwargs)

    @property
    def latest_execution(self) -> Execution | None:
        return self.executions.order_by("-number").first()

    @property
    def status(self) -> str:
        latest = self.latest_execution
        return latest.status if latest else "idle"


class ExecutionStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    RECOVERING = "recovering"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_EXECUTION_STATUSES = (
    ExecutionStatus.QUEUED,
    ExecutionStatus.RUNNING,
    ExecutionStatus.WAITING,
    ExecutionStatus.RECOVERING,
)


class ExecutionTrigger(models.TextChoices):
    MANUAL = "manual"
    DEMO = "demo"
    FORK = "fork"
    API = "api"
    CHILD = "child"


class Execution(models.Model):
    """One user turn on a thread, carried out by one or more runs (initial, resumes, recoveries)."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="executions")
    number = models.PositiveIntegerField()
    input = models.TextField(blank=True)
    # What the thread search matches: searching `input` itself would tell which threads hold a masked secret.
    shown_input = models.TextField(
        blank=True, editable=False, help_text="The input as pages show it, masked by the execution's policy version."
    )
    status = models.CharField(max_length=16, choices=ExecutionStatus.choices, default=ExecutionStatus.QUEUED)
    trigger = models.CharField(max_length=16, choices=ExecutionTrigger.choices, default=ExecutionTrigger.MANUAL)
    policy_version = models.ForeignKey(HostPolicyVersion, on_delete=models.PROTECT, related_name="executions")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    failure_code = models.CharField(max_length=100, blank=True)
    failure_message = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False, help_text="An operator asked to cancel; the worker obeys.")
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    cancelled_at = models.DateTimeField(null=True, blank=True, help_text="When cancellation was asked for.")
    # A Host-managed child: the parent's request this execution answers when it ends (one child per request).
    parent_request = models.OneToOneField(
        "DeferredRequest", null=True, blank=True, on_delete=models.SET_NULL, related_name="child_execution"
    )
    replay_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replays",
        help_text="The recorded execution this one replayed with no model (`harness_replay`).",
    )
    replay_divergence = models.JSONField(
        null=True,
        blank=True,
        help_text="A replay's first divergence: step, kind, expected and asked; null when equal.",
    )
    what_if_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="what_ifs",
        help_text="The execution this one is a what-if fork of (forked from one of its checkpoints).",
    )
    what_if = models.JSONField(
        null=True,
        blank=True,
        help_text="The one thing a what-if fork changed (`runs.services.store.what_if`); null otherwise.",
    )
    # On hold: retention keeps it (and, for a thread, all its executions) whatever the policy says.
    held_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    held_at = models.DateTimeField(null=True, blank=True, help_text="Put on hold: retention skips it.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "number"], name="execution_number_unique"),
            models.UniqueConstraint(
                fields=["thread"],
                condition=Q(status__in=ACTIVE_EXECUTION_STATUSES),
                name="one_active_execution_per_thread",
            ),
        ]
        # The executions list: newest first by (created_at, id), alone or after the column of a filter.
        indexes = [
            models.Index(fields=["created_at", "id"], name="execution_newest"),
            models.Index(fields=["status", "created_at", "id"], name="execution_status_newest"),
            models.Index(fields=["failure_code", "created_at", "id"], name="execution_failure_newest"),
            models.Index(fields=["created_by", "created_at", "id"], name="execution_starter_newest"),
            # Retention: the finished executions that ended before a cutoff.
            models.Index(fields=["status", "finished_at"], name="execution_retention"),
        ]
        ordering = ["thread", "number"]

    def __str__(self) -> str:
        return f"{self.thread} #{self.number}"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_EXECUTION_STATUSES


FINISHED_EXECUTION_STATUSES = (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED)


class ExecutionTombstone(models.Model):
    """What stays of an execution retention purged: when, under which rule, what it used and cost, what went.

    Written in its own transaction before anything is deleted, so pages show a purged execution from then on,
    never a half-deleted timeline; `finished_at` is set once its journal, timeline and checkpoints are gone (a
    pass interrupted before that continues on the next one). The execution row itself (who started it, when,
    its outcome), its runs and the audit of decisions stay.
    """

    execution = models.OneToOneField(Execution, on_delete=models.CASCADE, related_name="tombstone")
    purged_at = models.DateTimeField()
    retention_days = models.PositiveIntegerField(help_text="The policy's rule that purged it.")
    outcome = models.CharField(max_length=16, choices=ExecutionStatus.choices)
    requests = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(
        max_digits=16, decimal_places=6, null=True, blank=True, help_text="Empty: some run's price was unknown."
    )
    journal_entries = models.PositiveIntegerField(default=0, help_text="Deleted so far.")
    timeline_events = models.PositiveIntegerField(default=0, help_text="Deleted so far.")
    checkpoints = models.PositiveIntegerField(default=0, help_text="Deleted so far.")
    finished_at = models.DateTimeField(null=True, blank=True, help_text="Empty while its rows are being deleted.")

    class Meta:
        ordering = ["-purged_at", "-id"]

    def __str__(self) -> str:
        return f"{self.execution} purged {self.purged_at:%Y-%m-%d}"


class RunReason(models.TextChoices):
    INITIAL = "initial"
    RESUME = "resume"
    RECOVERY = "recovery"


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    SUSPENDED = "suspended"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"


class Run(models.Model):
    """One harness run of an execution; a worker holds its lease while it writes."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="runs")
    run_id = models.CharField(max_length=100, unique=True, null=True, blank=True)
    number = models.PositiveIntegerField()
    reason = models.CharField(max_length=16, choices=RunReason.choices, default=RunReason.INITIAL)
    previous_run = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    attempt = models.PositiveIntegerField(default=1)
    tool_recovery = models.CharField(max_length=16, choices=ToolRecovery.choices, default=ToolRecovery.DECLARED)
    policy_version = models.ForeignKey(HostPolicyVersion, on_delete=models.PROTECT, related_name="runs")
    profile_snapshot = models.JSONField(default=dict, blank=True)
    # NULL (not "") means "not leased": the one-leased-run constraint is conditional on it.
    lease_token = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    start_checkpoint = models.ForeignKey(
        "Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The checkpoint this run continued from (none for a thread's first run).",
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    failure_code = models.CharField(max_length=100, blank=True)
    failure_message = models.TextField(blank=True)
    output = models.JSONField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    deferred_resume = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["execution", "number"], name="run_number_unique"),
            models.UniqueConstraint(
                fields=["execution"],
                condition=Q(lease_token__isnull=False),
                name="one_leased_run_per_execution",
            ),
        ]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="run_lease_sweep")]
        ordering = ["execution", "number"]

    def __str__(self) -> str:
        return self.run_id or f"run {self.number} of {self.execution}"


class DroppedCancelRequest(models.Model):
    """A request to cancel a running execution that its run never saw: the run suspended for answers first.

    Waiting is a different state to stop (ending it refuses what it waits on, a decision), so the request is
    dropped rather than carried over to the resume; this records who asked, when, and which run suspended.
    """

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="dropped_cancel_requests")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", help_text="The run that suspended.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField()
    dropped_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["execution", "requested_at", "id"]

    def __str__(self) -> str:
        return f"cancel request of {self.execution}, dropped"


class JournalEntry(models.Model):
    """One source stream item of a run, in root-stream order; insert-only."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="journal")
    index = models.PositiveIntegerField()
    source_run_id = models.CharField(max_length=100)
    source_sequence = models.PositiveIntegerField()
    kind = models.CharField(max_length=64)
    occurred_at = models.DateTimeField()
    payload = models.TextField()
    codec_version = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="journal_index_unique"),
            models.UniqueConstraint(
                fields=["run", "source_run_id", "source_sequence"], name="journal_source_sequence_unique"
            ),
        ]
        ordering = ["run", "index"]
        verbose_name_plural = "journal entries"

    def __str__(self) -> str:
        return f"{self.run} #{self.index} {self.kind}"


class TimelineOrigin(models.TextChoices):
    """Whose item a timeline row is; an AG-UI client of one run's stream takes only the run's own."""

    # The run's AG-UI stream, including the end the Host writes for a lane whose run died.
    RUN = "run"
    # An item the Host adds beside the runs (a decision), in the lane of the run it concerns but outside its
    # stream: it may follow that run's RUN_FINISHED, which no AG-UI run accepts.
    HOST = "host"


class TimelineEvent(models.Model):
    """An AG-UI event projected from the journal, at a durable position in its execution's timeline."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="timeline")
    position = models.PositiveIntegerField()
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="timeline")
    journal_entry = models.ForeignKey(
        JournalEntry, null=True, blank=True, on_delete=models.CASCADE, related_name="timeline"
    )
    subagent_run_id = models.CharField(max_length=100, blank=True)
    origin = models.CharField(max_length=8, choices=TimelineOrigin.choices, default=TimelineOrigin.RUN)
    event_type = models.CharField(max_length=64, db_index=True)
    event = models.JSONField()
    occurred_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["execution", "position"], name="timeline_position_unique"),
        ]
        ordering = ["execution", "position"]

    def __str__(self) -> str:
        return f"{self.execution} @{self.position} {self.event_type}"


class CheckpointKind(models.TextChoices):
    INITIAL = "initial"
    BOUNDARY = "boundary"
    TERMINAL = "terminal"
    FAILURE_CANDIDATE = "failure_candidate"
    FORK = "fork"


class Checkpoint(models.Model):
    """A stored HarnessState, whole (a base) or as the history added since its parent (a delta).

    A base holds the whole state JSON in `state_json`. A delta holds the state without its message history in
    `state_json` and the messages appended since `parent` in `history_delta`; `base` names its chain's base so
    the chain is read in one query. The HMAC `digest` covers the row's content and its parent's digest, so an
    edit anywhere in a chain is detected (see `runs.services.store.checkpoints`).
    """

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="checkpoints")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="checkpoints")
    kind = models.CharField(max_length=24, choices=CheckpointKind.choices)
    journal_index = models.IntegerField(null=True, blank=True)
    state_json = models.TextField()
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    base = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    history_delta = models.TextField(blank=True)
    digest = models.CharField(max_length=64)
    pending_deferred_input = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["thread", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(parent__isnull=True, base__isnull=True)
                | models.Q(parent__isnull=False, base__isnull=False),
                name="checkpoint_delta_has_parent_and_base",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} checkpoint {self.pk} of {self.thread}"

    @property
    def is_delta(self) -> bool:
        return self.parent_id is not None


class DeferredKind(models.TextChoices):
    APPROVAL = "approval"
    EXTERNAL = "external"
    QUESTION = "question"
    # Answered by the Host when the child execution it started ends, never by an operator.
    CHILD = "child"


class DeferredStatus(models.TextChoices):
    PENDING = "pending"
    DECIDED = "decided"
    EXPIRED = "expired"


class DeferredRequest(models.Model):
    """A tool call a suspended run left for a person or an outside system to answer."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="deferred_requests")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="deferred_requests")
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="deferred_requests")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=DeferredKind.choices)
    args = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=DeferredStatus.choices, default=DeferredStatus.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "tool_call_id"], name="deferred_request_call_unique"),
        ]
        # The executions list's "tool called" filter.
        indexes = [models.Index(fields=["tool_name", "execution"], name="deferred_request_tool")]
        permissions = [("decide_deferred", "Can answer deferred tool requests")]
        ordering = ["execution", "id"]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.tool_call_id})"


class DecisionSubmission(models.Model):
    """One submitted set of decisions; its key makes a repeated form post idempotent."""

    key = models.CharField(max_length=100, unique=True)
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="submissions")
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="submissions")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    submitted_at = models.DateTimeField(auto_now_add=True)
    resume_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    def __str__(self) -> str:
        return self.key


class Verdict(models.TextChoices):
    APPROVED = "approved"
    DENIED = "denied"
    EXTERNAL_RESULT = "external_result"
    ANSWERED = "answered"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    # A Host-managed child failed or was cancelled: its parent's call fails.
    FAILED = "failed"


class Decision(models.Model):
    """The answer to one deferred request."""

    request = models.OneToOneField(DeferredRequest, on_delete=models.CASCADE, related_name="decision")
    submission = models.ForeignKey(DecisionSubmission, on_delete=models.CASCADE, related_name="decisions")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    override_args = models.JSONField(null=True, blank=True)
    approved_args = models.JSONField(null=True, blank=True)
    args_digest = models.CharField(max_length=64, blank=True)
    result = models.JSONField(null=True, blank=True)
    message = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    decided_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.verdict}: {self.request}"


class ToolDispatch(models.Model):
    """A tool call the worker let through to execution: the Host's ledger of possible side effects.

    Written (and committed) just before the tool runs, so a call whose worker died afterwards still counts.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_dispatches")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    recovery_retryable = models.BooleanField(default=False)
    args = models.JSONField(null=True, blank=True)
    dispatched_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # The executions list's "tool called" filter.
        indexes = [models.Index(fields=["tool_name", "run"], name="tool_dispatch_tool")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.tool_call_id})"


class StartSubmission(models.Model):
    """One post of a form that starts work (new thread, new execution, fork); its key makes a repeat of the
    same post return what the first one created instead of creating it again."""

    key = models.CharField(max_length=100, unique=True)
    thread = models.ForeignKey(Thread, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    execution = models.ForeignKey(Execution, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    submitted_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key


class BundleMode(models.TextChoices):
    # The timeline and masked inputs only: safe to hand to someone outside the team.
    REDACTED = "redacted"
    # The journal and checkpoints with their real values, too: needs `runs.export_full_bundle`.
    FULL = "full"


class BundleDirection(models.TextChoices):
    EXPORT = "export"
    IMPORT = "import"


class BundleTransfer(models.Model):
    """One run bundle exported from or imported into this Host: who, when, what, and the manifest's hash."""

    direction = models.CharField(max_length=8, choices=BundleDirection.choices)
    mode = models.CharField(max_length=8, choices=BundleMode.choices)
    # The Host that exported the bundle (this one's name for an export).
    host = models.CharField(max_length=200)
    exported_at = models.DateTimeField()
    execution = models.ForeignKey(Execution, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    manifest_sha256 = models.CharField(max_length=64)
    signed = models.BooleanField(default=True, help_text="False: imported without a valid signature, as asked.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        permissions = [("export_full_bundle", "Can export run bundles with real values (full mode)")]

    def __str__(self) -> str:
        return f"{self.direction} of a {self.mode} bundle ({self.host}, {self.at:%Y-%m-%d %H:%M})"


# A price above this per million tokens is a typo (the dearest models cost tens of dollars per million).
MAX_PRICE_PER_MILLION = 1000


def _price_field(label: str) -> models.DecimalField[Any, Any]:
    return models.DecimalField(
        f"{label} per million tokens",
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0), MaxValueValidator(MAX_PRICE_PER_MILLION)],
    )


class ModelPrice(models.Model):
    """What one model's tokens cost from `valid_from` on, until a later price of the same model."""

    model = models.CharField(max_length=200, help_text="As an agent profile names it, e.g. openai:gpt-4o.")
    input = _price_field("input")
    output = _price_field("output")
    cache_read = _price_field("cache read")
    cache_write = _price_field("cache write")
    valid_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model", "-valid_from"]
        constraints = [models.UniqueConstraint(fields=["model", "valid_from"], name="one_price_per_model_and_start")]

    def __str__(self) -> str:
        return f"{self.model} from {self.valid_from:%Y-%m-%d}"


class SavedView(models.Model):
    """A user's named filter of the executions list: the list's query string, shown in the nav."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    name = models.CharField(max_length=60)
    query = models.CharField(max_length=2000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="saved_view_name_unique_per_user")]
        ordering = ["user", "name"]

    def __str__(self) -> str:
        return self.name


class BulkAction(models.TextChoices):
    APPROVE = "approve"
    DENY = "deny"
    CANCEL = "cancel"
    RECOVER = "recover"


class BulkOperation(models.Model):
    """One action over many executions, run as an RQ job a row at a time; its items are its audit."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=16, choices=BulkAction.choices)
    message = models.TextField(blank=True, help_text="The reason sent with each denial.")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"bulk {self.action} #{self.pk}"


class BulkOutcome(models.TextChoices):
    PENDING = "pending"
    # Taken by the job: an item is claimed before it is acted on, so no job acts on it twice.
    TAKEN = "taken"
    DONE = "done"
    SKIPPED = "skipped"
    REFUSED = "refused"


class BulkItem(models.Model):
    """One execution of a bulk operation and what became of it."""

    operation = models.ForeignKey(BulkOperation, on_delete=models.CASCADE, related_name="items")
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="+")
    outcome = models.CharField(max_length=16, choices=BulkOutcome.choices, default=BulkOutcome.PENDING)
    message = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["operation", "execution"], name="bulk_item_once")]
        ordering = ["operation", "id"]

    def __str__(self) -> str:
        return f"{self.operation}: {self.execution} {self.outcome}"


class Remask(models.Model):
    """Redaction patterns of a policy version applied to the executions its policy governed before it: their stored
    masked copies (timeline events, shown inputs, thread titles) are masked again by an RQ job, in chunks.

    Its scope is fixed when it starts (executions up to `last_execution`); `cursor` is the last execution done, so a
    job run again carries on where one stopped. The row is the audit of who started it.
    """

    policy = models.ForeignKey(HostPolicy, on_delete=models.CASCADE, related_name="remasks")
    version = models.ForeignKey(HostPolicyVersion, on_delete=models.PROTECT, related_name="+")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_execution = models.BigIntegerField(help_text="The newest execution in scope (primary key).")
    cursor = models.BigIntegerField(default=0, help_text="The last execution re-masked (primary key).")
    total = models.PositiveIntegerField()
    done = models.PositiveIntegerField(default=0)
    changed_events = models.PositiveIntegerField(default=0, help_text="Timeline events whose stored form changed.")

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"re-mask #{self.pk} of {self.policy} with v{self.version.number}"
