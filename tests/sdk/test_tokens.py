"""Card-number tokens through the SDK (sync and async) and kmctl, against the real service over TLS."""

from __future__ import annotations

import asyncio

from keymanager_sdk import APIError, AsyncKeyManager, InvalidRequest, KeyManager, Policy, Token

from tests.e2e.conftest import Server
from tests.sdk.conftest import App, unique
from tests.sdk.test_kmctl import kmctl, ok_json

CARD = "4111111111111111"
CARD_FORMAT = {"keep_last": 4, "luhn": "valid"}


def _luhn_ok(digits: str) -> bool:
    total = 0
    for k, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if k % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _token_key(admin: KeyManager, app: App) -> str:
    name = unique("sdk-ff1")
    policy = Policy(tokenize=(app.name,), detokenize=(app.name,))
    key = admin.create_token_key(name, CARD_FORMAT, policy=policy)
    assert key.algorithm == "FF1_AES_256" and key.policy.tokenize == (app.name,)
    return name


def test_sync_round_trip_and_batches(admin: KeyManager, app: KeyManager, app_principal: App) -> None:
    name = _token_key(admin, app_principal)
    made = app.tokenize(name, CARD, context={"column": "pan"})
    assert isinstance(made, Token) and made.key_version == 1
    assert len(made.token) == 16 and made.token.endswith("1111") and made.token != CARD and _luhn_ok(made.token)
    assert app.detokenize(name, made.token, context={"column": "pan"}) == CARD
    assert app.tokenize(name, CARD, tweak=b"\x01").token != made.token
    results = app.tokenize_batch(name, [CARD, "4111111111111112"], context={"column": "pan"})
    assert isinstance(results[0], Token) and results[0].token == made.token
    assert isinstance(results[1], InvalidRequest)
    assert app.detokenize_batch(name, [made.token], context={"column": "pan"}) == [CARD]
    try:
        app.tokenize(name, "4111111111111112")
    except APIError as exc:
        assert exc.code == "invalid_request" and "4111111111111112" not in str(exc)
    else:
        raise AssertionError("a value failing the Luhn check was tokenized")


def test_async_round_trip(server: Server, admin: KeyManager, app_principal: App) -> None:
    name = _token_key(admin, app_principal)

    async def main() -> tuple[Token, str, list[Token | APIError]]:
        async with AsyncKeyManager(server.url, token=app_principal.token, ca=str(server.ca)) as client:
            made = await client.tokenize(name, CARD)
            back = await client.detokenize(name, made.token)
            batch = await client.tokenize_batch(name, [CARD])
            return made, back, batch

    made, back, batch = asyncio.run(main())
    assert back == CARD and isinstance(batch[0], Token) and batch[0].token == made.token


def test_kmctl_creates_token_keys_and_round_trips(server: Server, app_principal: App) -> None:
    name = unique("cli-ff1")
    policy = f'{{"tokenize": ["{app_principal.name}"], "detokenize": ["{app_principal.name}"]}}'
    created = ok_json(
        server,
        "keys",
        "create",
        name,
        "--algorithm",
        "FF1_AES_256",
        "--token-format",
        '{"keep_last": 4}',
        "--policy",
        policy,
    )
    assert created["algorithm"] == "FF1_AES_256"
    made = kmctl(server, "tokenize", name, CARD, "--context", "column=pan", token=app_principal.token)
    assert made.returncode == 0, made.stderr.decode()
    token = made.stdout.decode().strip()
    assert len(token) == 16 and token.endswith("1111") and token != CARD
    back = kmctl(server, "detokenize", name, token, "--context", "column=pan", token=app_principal.token)
    assert back.returncode == 0 and back.stdout.decode().strip() == CARD
