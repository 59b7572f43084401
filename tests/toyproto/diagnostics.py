"""Every diagnostic the toy protocol attaches: only the MALFORMED ones of a message that breaks."""

from __future__ import annotations

from kdissect.diagnostics import Catalogue, decode_errors

DIAGNOSTICS = Catalogue("toy", "Toy", decode_errors())
