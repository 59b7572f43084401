"""Every diagnostic the ZooKeeper dissector attaches to a message (see kdissect/diagnostics.py)."""

from __future__ import annotations

from kdissect.diagnostics import Catalogue, decode_errors
from kdissect.model import Group, Severity

DIAGNOSTICS = Catalogue("zookeeper", "ZooKeeper", (
    *decode_errors(),
    ("undecoded", Severity.WARNING, Group.UNDECODED,
     "a body kdissect cannot decode (no layout for its opcode, or a reply whose request was not "
     "captured): kept raw"),
    ("trailing", Severity.WARNING, Group.MALFORMED,
     "bytes after a complete record: kept raw"),
    ("no_read_only", Severity.NOTE, Group.COMMENT,
     "a ConnectRequest or ConnectResponse without the readOnly byte: a peer before ZooKeeper 3.4"),
    ("vector_limit", Severity.WARNING, Group.UNDECODED,
     "a list past the elements one message may show: the first elements are shown"),
))
