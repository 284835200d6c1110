"""The AWS KMS door's translation layer: AWS's requests into calls of the shared services.

``crypto.py``: keys in use (Encrypt, Decrypt, ...); ``keys.py``: key management; ``resources.py``:
policies, tags and grants. SigV4 access keys are not here: ``services/access_keys.py`` serves the
KMS door and the XKS door alike.
"""
