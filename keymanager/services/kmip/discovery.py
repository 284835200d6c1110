"""DiscoverVersions and Query: what this server speaks and offers (no object is named)."""

from __future__ import annotations

from collections.abc import Collection

from kmip.core import enums, misc
from kmip.core.messages import contents, payloads

from keymanager.services.kmip import spec
from keymanager.services.kmip.calls import KmipCall
from keymanager.services.kmip.spec import VERSIONS

VENDOR = "keymanager"
SERVER = "keymanager KMIP door (HSM-backed; docs/kmip.md)"


class KmipDiscovery:
    """DiscoverVersions and Query, answered from the operations and object types served."""

    def __init__(self, operations: Collection[spec.Operation], object_types: Collection[enums.ObjectType]) -> None:
        self._operations = operations
        self._object_types = object_types

    async def discover_versions(
        self, call: KmipCall, payload: payloads.DiscoverVersionsRequestPayload
    ) -> payloads.DiscoverVersionsResponsePayload:
        """The versions served that the client lists (all of them, most preferred first, when it lists none)."""
        served = [contents.ProtocolVersion(*version) for version in VERSIONS]
        asked = payload.protocol_versions or []
        if asked:
            served = [version for version in asked if (version.major, version.minor) in VERSIONS]
        return payloads.DiscoverVersionsResponsePayload(protocol_versions=served)

    async def query(self, call: KmipCall, payload: payloads.QueryRequestPayload) -> payloads.QueryResponsePayload:
        """The operations, object types and server information the client asks for."""
        functions = set(payload.query_functions or [])
        answer = payloads.QueryResponsePayload()
        if enums.QueryFunction.QUERY_OPERATIONS in functions:
            answer.operations = [enums.Operation(op.value) for op in sorted(self._operations, key=lambda op: op.value)]
        if enums.QueryFunction.QUERY_OBJECTS in functions:
            answer.object_types = sorted(self._object_types, key=lambda kind: kind.value)
        if enums.QueryFunction.QUERY_SERVER_INFORMATION in functions:
            answer.vendor_identification = VENDOR
            answer.server_information = misc.ServerInformation()
        return answer
