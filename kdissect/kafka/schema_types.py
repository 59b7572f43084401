"""The row types of the generated Kafka tables (apis.py, schema_messages.py), written by hand
so the generator emits data only."""

from __future__ import annotations

from typing import NamedTuple


class Api(NamedTuple):
    """One API key: its name, lowest and newest version, first flexible version (None: none)."""

    name: str
    lowest: int
    newest: int
    first_flexible: int | None


class FieldRow(NamedTuple):
    """One field of a message or struct. Version ranges are inclusive; a max of 32767 is open
    and min > max is empty. `type` is a primitive, '[]prim', 'struct' or '[]struct' (`children`
    then holds the struct's fields). `tag` is -1 for a regular field. `flags`: E error code,
    T topic name, G group id, M timestamp in ms. `default` as the specification writes it."""

    name: str
    type: str
    min_version: int
    max_version: int
    nullable_min: int
    nullable_max: int
    tag: int
    tagged_min: int
    tagged_max: int
    flags: str
    default: str | None
    children: tuple[FieldRow, ...] | None


class EmbeddedMessage(NamedTuple):
    """A message carried in a `bytes` field, which starts with its own int16 version."""

    lowest: int
    newest: int
    first_flexible: int | None
    fields: tuple[FieldRow, ...]
