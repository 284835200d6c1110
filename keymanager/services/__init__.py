"""Use cases: what a request does, written against the store and the HSM, free of HTTP."""
