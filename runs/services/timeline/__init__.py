"""A run's timeline, above `store`: events masked (redaction), stored with their journal items (projection),
published after the commit, read back for pages, and followed live by sockets and AG-UI streams (feeds, followers);
decisions as timeline items."""

from . import publishing, read_side
from .decision_items import DECISION_EVENT_NAME, ArgumentChange, argument_changes
from .feeds import ExecutionFeed, Frames, feed_for
from .followers import ExecutionFollower, FollowerOutput
from .lane_closing import OpenLane, aclose_projection
from .projection import RunProjection
from .publishing import (
    APPROVALS_GROUP,
    THREADS_GROUP,
    execution_group,
    publish_execution_status,
    publish_frames,
    publish_session_ended,
    session_group,
    worker_sender,
)
from .read_side import (
    REPLAY_PAGE_SIZE,
    THREAD_STATUSES,
    format_duration,
    frames_after,
    last_position,
)
from .redaction import (
    REDACTED,
    Produced,
    Redactor,
    TimelineRedactor,
    dump_event,
    redactor_for,
    redactor_of_all,
    restore_redacted,
)

__all__ = (
    "APPROVALS_GROUP",
    "DECISION_EVENT_NAME",
    "REDACTED",
    "REPLAY_PAGE_SIZE",
    "THREADS_GROUP",
    "THREAD_STATUSES",
    "ArgumentChange",
    "ExecutionFeed",
    "ExecutionFollower",
    "FollowerOutput",
    "Frames",
    "OpenLane",
    "Produced",
    "Redactor",
    "RunProjection",
    "TimelineRedactor",
    "aclose_projection",
    "argument_changes",
    "dump_event",
    "execution_group",
    "feed_for",
    "format_duration",
    "frames_after",
    "last_position",
    "publish_execution_status",
    "publish_frames",
    "publish_session_ended",
    "publishing",
    "read_side",
    "redactor_for",
    "redactor_of_all",
    "restore_redacted",
    "session_group",
    "worker_sender",
)
