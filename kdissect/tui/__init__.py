"""`kdissect tui`: a terminal user interface over a decoded capture, in Wireshark's three panes
(message list, field tree, hex dump).

The app (`app`, `widgets/`, `screens/`, `keys`: Textual) draws what the data layer gives; the
data layer imports no user-interface toolkit:

- `store`: Store, the capture as the app sees it: compact list rows of every message decoded in
  a background thread, full Messages on demand, display-filter views, marks, statistics; files
  or a live interface;
- `view`: View, the messages of a display filter, filled in the background; Progress;
- `columns`: the compact per-message columns behind the list;
- `spill`: each message's bytes, kept in a temporary file while the store indexes;
- `redissect`: a message dissected again from its spilled bytes, after the few messages its
  decoding depends on (its request, a SASL handshake...), in well under a millisecond;
- `redecode`: the fallback, Messages decoded again from the capture file, a few conversations
  at a time; the bounded cache of full Messages;
- `details`: what the panes show of one message: tree rows with byte spans and filters, hex
  dump lines with secrets masked.
"""
