"""A toy protocol in one package, as docs/architecture.md's "Adding a protocol" describes."""
