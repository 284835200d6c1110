"""``kmctl objects list|get|destroy``: the managed objects that are not keys (secret data, opaque
objects, certificates registered over KMIP), their metadata only.

``destroy ID`` drops the object's value and prints the object, now ``destroyed``; while the object
is active the service refuses (exit 1): revoke it over KMIP first.
"""

from __future__ import annotations

import argparse

from keymanager_sdk._client import KeyManager
from keymanager_sdk.cli._output import emit


def objects_list(client: KeyManager, args: argparse.Namespace) -> int:
    """Print the managed objects you may see, newest first."""
    return emit(args, client.list_objects(), "managed objects")


def objects_get(client: KeyManager, args: argparse.Namespace) -> int:
    """Print one managed object: id, type, state, owner, creation and update times."""
    return emit(args, client.get_object(args.object_id))


def objects_destroy(client: KeyManager, args: argparse.Namespace) -> int:
    """Destroy managed object ID; print it after (state ``destroyed``)."""
    return emit(args, client.destroy_object(args.object_id))
