"""What the Prefect server holds about flow runs, read once it has arrived. Run logs are
shipped by a background worker and task runs are recorded from events, both after the run
has returned: one read right after a run can miss some. These readers flush this process's
logs and poll (support.processes.poll) until `done` holds or the deadline passes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from support.processes import poll

DEADLINE_S = 60


def flow_run_logs(flow_run_ids: Sequence[UUID], done: Callable[[list[Any]], bool],
                  timeout: float = DEADLINE_S) -> list[Any]:
    """The log entries (`.message`, `.task_run_id`, ...) of these flow runs and their tasks,
    once `done(entries)` holds."""
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=15, at_exit=False)  # this process's queued logs; others ship theirs

    def read() -> list[Any]:
        with get_client(sync_client=True) as client:
            return client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=list(flow_run_ids))))

    return poll(read, done, timeout)


def flow_finished(entries: list[Any]) -> bool:
    """The flow run's own last line is there (tasks log "Finished in state" too)."""
    return any(e.task_run_id is None and e.message.startswith("Finished in state") for e in entries)


def task_runs(flow_run_ids: Sequence[UUID], done: Callable[[list[Any]], bool],
              timeout: float = DEADLINE_S) -> list[Any]:
    """The task runs of these flow runs, once `done(task_runs)` holds."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    def read() -> list[Any]:
        with get_client(sync_client=True) as client:
            return client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=list(flow_run_ids))))

    return poll(read, done, timeout)
