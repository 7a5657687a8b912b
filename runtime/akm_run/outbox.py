"""The notifications outbox (operations.md D4): one row per event a root run's notifier is told of,
written in the transaction of the event, then claimed and settled by the process that sends it."""

from __future__ import annotations

import hashlib
import json
import time
from abc import abstractmethod
from typing import Any

from akm_run.database import Database

# The events the host's notifier (`--notify-cmd`) is sent (operations.md D4).
HOST_EVENTS = ("blocked", "failed", "stalled")


class Outbox(Database):
    """The notifications of a store's runs."""

    @abstractmethod
    def event(
        self, run_id: str, kind: str, step_id: str | None = None, unit_id: str | None = None, **data: Any
    ) -> None:
        """Append an event to the run's journal, inside the caller's transaction."""

    def remember_notifier(self, run_id: str, command: str) -> None:
        """The host's notifier (`--notify-cmd`, `$AKM_RUN_NOTIFY_CMD`) for this run and its re-drives."""
        with self.transaction():
            self._execute("UPDATE runs SET notify_cmd = ? WHERE id = ?", (command, run_id))

    def _queue_notification(self, root_id: str, event_run_id: str, event: str) -> None:
        """Inside the caller's transaction, after the event it tells of: a pending notification of
        the root run for the newest event of `event_run_id`, when the root has a notifier for it."""
        row = self._execute(
            "SELECT notify_cmd, plan_json FROM runs WHERE id = ? AND parent_run_id IS NULL", (root_id,)
        ).fetchone()
        if row is None:
            return
        wanted = set(HOST_EVENTS if row[0] else ()) | set(json.loads(row[1]).get("notify", {}).get("on", []))
        if event not in wanted:
            return
        seq = int(self._execute("SELECT MAX(seq) FROM events WHERE run_id = ?", (event_run_id,)).fetchone()[0])
        dispatch = "n-" + hashlib.sha256(f"akm.notify/1\0{root_id}\0{seq}".encode()).hexdigest()[:24]
        self._execute(
            "INSERT INTO notifications (run_id, seq, event, dispatch_id, status, created_at) "
            "VALUES (?, ?, ?, ?, 'pending', ?)",
            (root_id, seq, event, dispatch, time.time()),
        )

    def claim_notification(self, run_id: str, seq: int, attempts: int, claimer: str) -> bool:
        """Take a notification to send it (one more attempt), as read with `attempts`: True for one
        taker only, so two drives (or a drive and the worker that saw its unit stall) never send it
        at once. A taker that dies leaves it `sending`, for the next to take under the same dispatch id."""
        with self.transaction(durable=False):
            cursor = self._execute(
                "UPDATE notifications SET status = 'sending', attempts = attempts + 1, claimed_by = ?, claimed_at = ? "
                "WHERE run_id = ? AND seq = ? AND attempts = ? AND status IN ('pending', 'sending')",
                (claimer, time.time(), run_id, seq, attempts),
            )
            return bool(cursor.rowcount)

    def record_notification(
        self,
        run_id: str,
        seq: int,
        *,
        sent: bool,
        exit_code: int | None,
        reason: str | None,
        stderr_tail: str | None,
        retries: int = 0,
    ) -> None:
        """How a claimed delivery ended, after `retries` retries: `notify.sent`, or `notify.failed`
        (the run is unchanged)."""
        with self.transaction():
            self._execute(
                "UPDATE notifications SET status = ?, attempts = attempts + ?, exit_code = ?, reason = ?, "
                "stderr_tail = ?, sent_at = ? WHERE run_id = ? AND seq = ?",
                ("sent" if sent else "failed", retries, exit_code, reason, stderr_tail, time.time(), run_id, seq),
            )
            extra: dict[str, Any] = {} if sent else {"exitCode": exit_code, "reason": reason}
            self.event(run_id, "notify.sent" if sent else "notify.failed", seq=seq, **extra)

    def root_run(self, run_id: str) -> str:
        """The top-level run a run descends from (itself when it is one)."""
        for _ in range(64):  # a plan nests at most 8 deep; a cycle in forged rows must not hang
            row = self._execute("SELECT parent_run_id FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None or row[0] is None:
                return run_id
            run_id = str(row[0])
        return run_id
