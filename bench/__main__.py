"""``python -m bench``: see ``bench.cli``; without the bench's packages, one line naming ``make bench``."""

import sys

EXTRA = ("rich", "boto3", "botocore", "moto", "psutil", "aws_encryption_sdk", "flask", "keymanager_sdk")
"""Top-level modules of the ``bench`` extra (and the SDK) that the bench imports."""


def missing_extra(exc: ModuleNotFoundError) -> bool:
    """True when ``exc`` names a package of the bench extra (anything else is a bug, raised as is)."""
    return (exc.name or "").split(".")[0] in EXTRA


if __name__ == "__main__":
    try:
        from bench.cli import main
    except ModuleNotFoundError as exc:
        if not missing_extra(exc):
            raise
        sys.exit(f"python -m bench: the bench's packages are not installed ({exc.name}): run `make bench` first")
    sys.exit(main())
