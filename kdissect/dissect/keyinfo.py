"""KeyInfo: one field key as `kdissect fields` lists it (like `tshark -G fields`), what a
protocol's `field_keys()` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class KeyInfo:
    key: str
    type: str
    description: str = ""
    used_by: list[str] = field(default_factory=list)
    count: int = 0
    example: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "type": self.type}
        if self.description:
            out["description"] = self.description
        if self.used_by:
            out["used_by"] = self.used_by
        if self.count:
            out["count"] = self.count
            out["example"] = self.example
        return out

    def use(self, who: str) -> KeyInfo:
        """Note that `who` (an API, a record) carries this key; returns self."""
        if who not in self.used_by:
            self.used_by.append(who)
        return self
