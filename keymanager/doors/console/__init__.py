"""The web console's door: its static files (``keymanager/ui/``), served under a strict CSP (:mod:`.door`)."""
