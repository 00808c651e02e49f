"""API keys through the Python client: a server started with --api-key answers a missing or wrong key with
UnauthenticatedError and serves the right one (given, or from $TPSERVE_API_KEY)."""
import asyncio

import pytest

import tpserve
from client_testing import PROMPT
from conftest import API_KEY


def test_wrong_or_missing_key_is_unauthenticated(api_key_server, monkeypatch):
    monkeypatch.delenv("TPSERVE_API_KEY", raising=False)
    for key in ("wrong-key", None):
        with tpserve.Client(api_key_server.endpoint, api_key=key) as client:
            with pytest.raises(tpserve.UnauthenticatedError):
                client.generate(PROMPT, max_tokens=2)
            with pytest.raises(tpserve.UnauthenticatedError):
                client.health()


def test_right_key_is_served(api_key_server, monkeypatch):
    with tpserve.Client(api_key_server.endpoint, api_key=API_KEY) as client:
        assert client.health().ok
        assert client.generate(PROMPT, max_tokens=4).usage.completion_tokens == 4
    monkeypatch.setenv("TPSERVE_API_KEY", API_KEY)
    with tpserve.Client(api_key_server.endpoint) as client:
        assert client.stats().num_worker_groups == 1


def test_async_client_sends_the_key(api_key_server):
    async def main():
        async with tpserve.AsyncClient(api_key_server.endpoint, api_key="wrong-key") as client:
            with pytest.raises(tpserve.UnauthenticatedError):
                await client.generate(PROMPT, max_tokens=2)
        async with tpserve.AsyncClient(api_key_server.endpoint, api_key=API_KEY) as client:
            return await client.generate(PROMPT, max_tokens=4)

    assert asyncio.run(asyncio.wait_for(main(), 120)).usage.completion_tokens == 4
