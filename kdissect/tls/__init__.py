"""TLS below the broker protocols: the record layer, the hellos, key schedules from an NSS key log,
and the decryption of each side's stream (docs/tls.md). `TlsConnection` turns one conversation's
TCP events into the decrypted events the framers read."""
