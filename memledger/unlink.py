"""``unlink``: undo a wrong slot-resolution decision by recording events, never by editing.

``unlink(user, KEY, VERSION)`` says "the statement recorded as VERSION of KEY does not belong to KEY":

* it superseded, retired or corrected the value before it (VERSION is KEY's current head): KEY is corrected back
  to the value VERSION replaced, with that value's source and confidence and actor ``unlink`` (a ``correct``
  event: VERSION is kept in history as misreported for KEY), and the
  statement is recorded under a fresh key of its own with its original times and provenance;
* it reaffirmed KEY (a ``reaffirmed`` event): the statement is recorded under a fresh key; KEY is untouched;
* it contested KEY (remember's ``conflict``): the contest is settled for the current value (a ``reaffirm`` by
  ``system_feedback``, which clears the contest), and the statement keeps its own key.

Each event's ``reason`` says ``unlink: ...``. Anything else (VERSION opened KEY, is no longer current, or was not
recorded by a remember) is refused with BadInput, nothing written.
"""

from __future__ import annotations

import secrets
from typing import Any

from ledger.domain import NON_USER_SOURCES
from ledger.errors import BadInput
from ledger.schemas import RememberReceipt, check_key, check_user_id, validate_command

from . import reads
from .locks import user_lock


def unlink(ml: Any, user_id: str, key: str, version: Any) -> RememberReceipt:
    user_id = check_user_id(user_id)
    key = check_key(key)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise BadInput("version", f"{version!r} is not a version number", "give the VERSION shown by history (1, 2, ...)")
    with user_lock(ml, user_id):
        # the ledger's own reads, not the gated faces: an unlink reads the statement's text to move it
        rows = reads.history(ml, user_id, key)
        if not rows:
            raise BadInput("key", f"{user_id} has no memory under key {key!r}",
                           f"give a key that `memledger profile {user_id}` or `memledger history {user_id}` lists")
        row = next((r for r in rows if r.version == version), None)
        if row is None:
            raise BadInput("version", f"{key!r} has no version {version}", f"see `memledger history {user_id} {key}`")
        if not (row.reason or "").startswith(("remember: ", "to confirm: ")):
            raise BadInput("version", f"{key} v{version} was not placed by remember (slot resolution)",
                           "use correct or retract for facts recorded with a key")
        head = reads.profile(ml, user_id).facts.get(key)
        statement = {k: v for k, v in dict(
            observed_at=row.observed_at, valid_from=row.valid_from if row.status != "contesting" else None,
            source=row.source, source_ref=row.source_ref, session_id=row.session_id, actor=row.actor,
            trace_id=row.trace_id, confidence=row.confidence, sensitivity=row.sensitivity).items() if v is not None}
        new_key = "memory.r" + secrets.token_hex(6)
        own = validate_command({"op": "assert", "user_id": user_id, "key": new_key, "value": row.text, "text": row.text,
                                "reason": f"unlink: moved from {key} v{version} (a wrong slot-resolution decision)",
                                **statement})
        commands = []
        if row.kind == "reaffirmed":
            decision = "new"
        elif row.status == "contesting":
            if head is None:
                raise BadInput("version", f"{key} has no current value any more", "nothing to settle")
            commands.append(validate_command({
                "op": "assert", "user_id": user_id, "key": key, "value": head.value, "text": head.text,
                "source": "system_feedback", "reason": f"unlink: {key} v{version} did not contest this"}))
            own = None  # the statement already has its own key (remember's conflict recorded it there)
            decision = "reaffirm"
        elif row.replaces is not None and head is not None and head.version == version:
            old = next((r for r in rows if r.version == row.replaces), None)
            if old is None or old.value is None:
                raise BadInput("version", f"{key} v{version} replaced nothing that can be restored",
                               "retract it instead")
            commands.append(validate_command({
                "op": "correct", "user_id": user_id, "key": key, "value": old.value, "text": old.text,
                # the restored value keeps the provenance it had (what the user said stays a user_statement)
                "source": old.source if old.source not in NON_USER_SOURCES else "system_feedback",
                "confidence": old.confidence, "actor": "unlink",
                "reason": f"unlink: v{version} does not belong to {key}; restores v{old.version} (moved to {new_key})"}))
            decision = "correct"
        elif row.replaces is None and row.kind == "asserted" and row.status != "contesting":
            raise BadInput("version", f"{key} v{version} opened {key}: it replaced nothing",
                           f"retract it (memledger retract {user_id} {key}) if it should not be remembered")
        elif head is None:
            raise BadInput("version", f"{key} v{version} is no longer current: {key} has no current value (it was "
                           "retracted or erased after it), and unlink undoes only the latest decision of a key",
                           f"restore a value with `memledger correct {user_id} {key} VALUE` "
                           f"(see `memledger history {user_id} {key}`)")
        else:
            raise BadInput("version", f"{key} v{version} is no longer the current value of {key}: v{head.version} "
                           "was recorded after it, and unlink undoes only the latest decision of a key",
                           f"undo the latest first with `memledger unlink {user_id} {key} {head.version}` if it is "
                           f"wrong too; to put back an older value, `memledger correct {user_id} {key} VALUE` "
                           f"(the versions after it are kept as misreported; see `memledger history {user_id} {key}`)")
        if own is not None:
            commands.append(own)
        receipts = ml.execute(commands)
    main = receipts[0]
    return RememberReceipt(**main.model_dump(), decision=decision, related=[],  # type: ignore[arg-type]
                           explanation=f"unlink {key} v{version}: " + (
                               f"restored {key}; the statement now has its own key {new_key}" if decision == "correct"
                               else f"the statement now has its own key {new_key}" if decision == "new"
                               else f"the contest on {key} is settled"),
                           extra=receipts[1:])
