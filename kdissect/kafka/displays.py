"""How Kafka integers that carry no schema flag display, as data.

The schema marks error codes (E) and timestamps (M); these are the other integers whose values
have names, by snake_case field name. Durations need no table: a name ending in `_ms` gives the
unit (model.duration_hint)."""

from __future__ import annotations

# field name -> {value: name}; such a field is an ENUM (its name in Field.display).
VALUE_NAMES: dict[str, dict[int, str]] = {
    # Produce: how many replicas must have the records before the broker answers.
    "acks": {-1: "all", 0: "none", 1: "leader"},
}
