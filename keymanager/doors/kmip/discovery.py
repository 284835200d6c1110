"""DiscoverVersions and Query: what this server speaks and offers (no object is named)."""

from __future__ import annotations

from collections.abc import Collection

from keymanager.doors.kmip import spec
from keymanager.doors.kmip.calls import KmipCall
from keymanager.doors.kmip.requests import QueryAnswer, QueryRequest, Versions, VersionsRequest
from keymanager.doors.kmip.spec import VERSIONS

VENDOR = "keymanager"
SERVER = "keymanager KMIP door (HSM-backed; docs/kmip.md)"


class KmipDiscovery:
    """DiscoverVersions and Query, answered from the operations and object types served."""

    def __init__(self, operations: Collection[spec.Operation], object_types: Collection[spec.ObjectType]) -> None:
        self._operations = operations
        self._object_types = object_types

    async def discover_versions(self, call: KmipCall, payload: VersionsRequest) -> Versions:
        """The versions served that the client lists (all of them, most preferred first, when it lists none)."""
        asked = payload.protocol_versions
        if asked:
            return Versions([version for version in asked if version in VERSIONS])
        return Versions(list(VERSIONS))

    async def query(self, call: KmipCall, payload: QueryRequest) -> QueryAnswer:
        """The operations, object types and server information the client asks for."""
        functions = set(payload.query_functions)
        answer = QueryAnswer()
        if spec.QueryFunction.QUERY_OPERATIONS in functions:
            answer.operations = sorted(self._operations, key=lambda op: op.value)
        if spec.QueryFunction.QUERY_OBJECTS in functions:
            answer.object_types = sorted(self._object_types, key=lambda kind: kind.value)
        if spec.QueryFunction.QUERY_SERVER_INFORMATION in functions:
            answer.vendor_identification = VENDOR
            answer.server_information = True
        return answer
