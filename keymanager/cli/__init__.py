"""The ``keymanager`` command: ``init`` and ``serve``."""
