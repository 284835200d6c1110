"""The doors: each a protocol onto the one core, and nothing more (``docs/adding-a-door.md``).

A door parses its protocol's requests, calls the shared pipeline and services (admission, the rights
table, the operations, the audit record owed, lifecycle) and renders their answers; it keeps no rule
of its own. Each lives in a package of its own here, its entry in ``door.py``:
:mod:`.kms` (the AWS KMS API), :mod:`.xks` (the AWS External Key Store proxy API), :mod:`.transit`
(the Vault Transit API), :mod:`.kmip` (KMIP, its listener in ``serving/kmip.py``; PyKMIP only in its
``codec/``) and :mod:`.console` (the web console's files). The native REST API is
``keymanager.api`` itself.

Only the wiring plugs them in: ``services/container.py`` builds their services and ``api/app.py``
gives their entries to the gateway, and KMIP's to its listener (``tests/test_layers.py`` holds every
other module to that).
"""
