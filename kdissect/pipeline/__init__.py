"""The one place that composes the layers (see `core`):

- `core`: Pipeline (frames in, messages out) and dissect_file;
- `decoder`: what happens to each TCP conversation above TCP (flow filter, detection, decoding,
  linking, its end and the observers told of it);
- `detect`: choosing the dissector (port table, probes, giving up) and what undecoded bytes
  look like;
- `decoding`: Decoding, what a conversation carries once its protocol is known (dissector,
  state, framers);
- `output`: ordered output (hold rules) and the held-bytes budget;
- `counters`: what a run saw, for the summary of what was not decoded;
- `live`: a live capture's loop (sniff and the TUI), imported where it runs.
"""

from kdissect.pipeline.core import Pipeline, dissect_file
from kdissect.pipeline.counters import Counters, PortTally
from kdissect.pipeline.decoder import ConversationObserver, FlowFilter, link
from kdissect.pipeline.decoding import Decoding
from kdissect.pipeline.output import HeldBytes, drop_body

__all__ = ["ConversationObserver", "Counters", "Decoding", "FlowFilter", "HeldBytes", "Pipeline", "PortTally",
           "dissect_file", "drop_body", "link"]
