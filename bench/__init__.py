"""Benchmark of keymanager against AWS KMS (or its local emulator): ``python -m bench``.

The bench drives services through the keymanager SDK and boto3 only; it never imports the
server package. Subcommands: ``blobs`` (default), ``transport``, ``app`` and ``targets``.
"""
