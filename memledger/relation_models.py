"""The read models of people and relations that other documents embed (``export``): an entity as listed, and one
version of a relation. Kept apart from memledger/relations.py so that what embeds them imports no verb."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class EntityView(BaseModel):
    """One entity of a user (``memledger entities USER --json``). ``withheld`` names the label of the only relations
    that tie it to the user when the read did not allow it: then ``name`` and ``aliases`` are null."""

    model_config = ConfigDict(defer_build=True)
    entity_id: str
    kind: str
    name: str | None
    aliases: list[str] | None
    recorded_at: datetime = Field(description="when the entity was first recorded (system time, UTC)")
    withheld: str | None = None


class RelationVersion(BaseModel):
    """One version of a relation as ``export`` lists it: its stream ``key`` and ``version``, what the event did
    (``kind``, ``effect``), the edge (``subject_id`` ``self`` or an entity id, ``relation_type``, ``entity_id``),
    the sentence and reason, provenance, valid range and status as known now, and when it was recorded. A labelled
    version the read does not allow keeps its place with ``text`` and ``reason`` null and ``withheld`` naming the
    label."""

    model_config = ConfigDict(defer_build=True)
    key: str
    version: int
    kind: str
    effect: str
    subject_id: str
    relation_type: str
    entity_id: str | None
    text: str | None
    reason: str | None
    observed_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    status: str | None
    source: str
    source_ref: str | None
    confidence: float | None
    sensitivity: str | None
    recorded_at: datetime
    position: int
    withheld: str | None = None


__all__ = ["EntityView", "RelationVersion"]
