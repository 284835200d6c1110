"""``/v1/keys/{key}/tokenize`` and ``…/detokenize``: format-preserving tokens with FF1_AES_256 keys.

Deterministic: the same value, key version and tweak give the same token. ``tweak`` (base64,
0-32 bytes) and ``context`` are exclusive; a context becomes the tweak by the rule in
docs/tokenization.md; neither is the empty tweak. Audit records name the key and version,
never a value or a token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sized
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from keymanager.api.audit_trail import AuditContext, audited
from keymanager.api.deps import AuditDep, run_authenticated, services_of
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES, Body, Context, ErrorDetail, decode_base64
from keymanager.domain.audit import AuditEntry
from keymanager.domain.models import Principal
from keymanager.errors import KeyManagerError
from keymanager.services.snapshot import Snapshot
from keymanager.services.tokens import TokenBatch, Tokenized, TokenRequest

router = APIRouter(prefix="/v1/keys", tags=["tokens"], responses=ERROR_RESPONSES, route_class=StrictJsonRoute)

_TEXT = Field(max_length=64, description="Characters of the key's alphabet; spaces and dashes stay in place.")
_TWEAK = Field(default=None, max_length=64, description="Base64 of a 0-32 byte FF1 tweak; exclusive with context.")


class TokenizeRequest(Body):
    value: str = _TEXT
    context: Context | None = None
    tweak: str | None = _TWEAK


class DetokenizeRequest(Body):
    token: str = _TEXT
    context: Context | None = None
    tweak: str | None = _TWEAK
    key_version: int | None = Field(default=None, ge=1, description="Default: the key's primary version.")


class DetokenizeItem(Body):
    token: str = _TEXT
    context: Context | None = None
    tweak: str | None = _TWEAK


class TokenizeBatchRequest(Body):
    items: list[TokenizeRequest]


class DetokenizeBatchRequest(Body):
    items: list[DetokenizeItem]
    key_version: int | None = Field(default=None, ge=1, description="Default: the key's primary version.")


class TokenizeResponse(BaseModel):
    token: str
    key_id: str
    key_version: int


class DetokenizeResponse(BaseModel):
    value: str


class TokenItemError(BaseModel):
    error: ErrorDetail


class TokenizeBatchResponse(BaseModel):
    results: list[TokenizeResponse | TokenItemError]
    key_version: int


class DetokenizeBatchResponse(BaseModel):
    results: list[DetokenizeResponse | TokenItemError]


def _item(text: str, context: Context | None, tweak: str | None) -> TokenRequest:
    return TokenRequest(text, context, None if tweak is None else decode_base64(tweak, "tweak"))


def _batch_item(item: TokenizeRequest | DetokenizeItem) -> TokenRequest | KeyManagerError:
    text = item.value if isinstance(item, TokenizeRequest) else item.token
    try:
        return _item(text, item.context, item.tweak)
    except KeyManagerError as exc:
        return exc


@router.post("/{key}/tokenize", response_model=TokenizeResponse)
@audited("key.tokenize")
async def tokenize(key: str, body: TokenizeRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """The token of ``value`` under the key's primary version (same length, kept characters in clear)."""
    tokens = services_of(request).tokens
    item = _item(body.value, body.context, body.tweak)
    made = await run_authenticated(
        request, trail, lambda snapshot, principal: tokens.tokenize(snapshot, principal, key, item), trail.success
    )
    return JSONResponse({"token": made.text, "key_id": made.key_id, "key_version": made.key_version})


@router.post("/{key}/detokenize", response_model=DetokenizeResponse)
@audited("key.detokenize")
async def detokenize(key: str, body: DetokenizeRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """The value of ``token`` under ``key_version`` (default: the primary version)."""
    item, version = _item(body.token, body.context, body.tweak), body.key_version
    detokenize = services_of(request).tokens.detokenize
    made = await run_authenticated(
        request, trail, lambda snapshot, principal: detokenize(snapshot, principal, key, item, version), trail.success
    )
    return JSONResponse({"value": made.text})


@router.post("/{key}/tokenize/batch", response_model=TokenizeBatchResponse)
@audited("key.tokenize_batch")
async def tokenize_batch(key: str, body: TokenizeBatchRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Tokens of up to 1,000 values under the primary version: one result or one error per item, in order."""
    tokens = services_of(request).tokens
    items = [_batch_item(i) for i in body.items]
    batch = await _batch(request, trail, items, lambda snapshot, p: tokens.tokenize_batch(snapshot, p, key, items))

    def shape(t: Tokenized) -> dict[str, Any]:
        return {"token": t.text, "key_id": t.key_id, "key_version": t.key_version}

    return JSONResponse({"results": [_result(r, shape) for r in batch.results], "key_version": batch.key_version})


@router.post("/{key}/detokenize/batch", response_model=DetokenizeBatchResponse)
@audited("key.detokenize_batch")
async def detokenize_batch(key: str, body: DetokenizeBatchRequest, request: Request, trail: AuditDep) -> JSONResponse:
    """Values of up to 1,000 tokens of one key version: one result or one error per item, in order."""
    tokens = services_of(request).tokens
    items = [_batch_item(i) for i in body.items]
    version = body.key_version
    batch = await _batch(
        request, trail, items, lambda snapshot, p: tokens.detokenize_batch(snapshot, p, key, items, version)
    )
    return JSONResponse({"results": [_result(r, lambda t: {"value": t.text}) for r in batch.results]})


async def _batch(
    request: Request, trail: AuditContext, items: Sized, use: Callable[[Snapshot, Principal], Awaitable[TokenBatch]]
) -> TokenBatch:
    """``use`` run as a batch of ``items``: its record counts them, names the key version and how many failed."""
    trail.details.update(items=len(items))

    def success(batch: TokenBatch) -> AuditEntry:
        return trail.success(batch, failed=sum(isinstance(r, KeyManagerError) for r in batch.results))

    return await run_authenticated(request, trail, use, success)


def _result(result: Tokenized | KeyManagerError, shape: Callable[[Tokenized], dict[str, Any]]) -> dict[str, Any]:
    if isinstance(result, KeyManagerError):
        return {"error": {"code": result.code, "message": result.message}}
    return shape(result)
