"""The asyncio twin (tpserve.AsyncClient) against a real `tpserve serve --tp 2`: concurrent requests on one
connection give what the blocking client gives one at a time."""
import asyncio

import pytest

import tpserve
from client_testing import PROMPT, run_ids, wait_until_idle
from conftest import free_port

PROMPTS = [PROMPT, "Once upon a time", "def fibonacci(n):", "The three primary colours are"]


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 300))


@pytest.fixture(scope="module")
def endpoint(zmq_server):
    return zmq_server.endpoint


def test_concurrent_generates_equal_one_at_a_time(endpoint):
    with tpserve.Client(endpoint) as client:
        expected = [client.generate(p, max_tokens=16).token_ids for p in PROMPTS]

    async def main():
        async with tpserve.AsyncClient(endpoint) as client:
            results = await asyncio.gather(*(client.generate(p, max_tokens=16) for p in PROMPTS))
            return [r.token_ids for r in results]

    assert run(main()) == expected
    assert expected[0] == run_ids("--prompt", PROMPT, "--max-tokens", "16")


def test_stream_chat_health_stats(endpoint):
    async def main():
        async with tpserve.AsyncClient(endpoint) as client:
            health, stats = await asyncio.gather(client.health(), client.stats())
            assert health.ok and stats.num_worker_groups == 1
            whole = await client.generate(PROMPT, max_tokens=20, temperature=0.7, seed=7)
            chunks = [c async for c in client.stream(PROMPT, max_tokens=20, temperature=0.7, seed=7)]
            assert len(chunks) > 1
            assert "".join(c.text for c in chunks) == whole.text
            assert [i for c in chunks for i in c.token_ids] == whole.token_ids
            assert whole.seed == 7
            chat = await client.chat([{"role": "user", "content": "What is 2+2?"}], max_tokens=24)
            assert chat.finish_reason in ("stop", "length") and chat.text

    run(main())


def test_leaving_a_stream_cancels_it(endpoint):
    async def main():
        async with tpserve.AsyncClient(endpoint) as client:
            async with client.stream(PROMPT, max_tokens=1000, ignore_eos=True) as stream:
                async for _ in stream:
                    assert (await client.stats()).blocks_used > 0
                    break
            await wait_idle()

            async for _ in client.stream(PROMPT, max_tokens=1000, ignore_eos=True):
                break  # dropped without aclose(): its cancel is sent from the loop
            await wait_idle()

            stream = client.stream(PROMPT, max_tokens=1000, ignore_eos=True)
            await stream.__anext__()
            await client.cancel(stream.request_id)
            result = await stream.result()
            assert result.finish_reason == "cancelled" and result.usage.completion_tokens < 1000

    async def wait_idle():
        # A blocking observer polled in a thread, so the loop goes on (and sends the dropped stream's cancel).
        with tpserve.Client(endpoint) as observer:
            await asyncio.get_running_loop().run_in_executor(None, wait_until_idle, observer.stats)

    run(main())


def test_errors_are_typed(endpoint):
    async def main():
        async with tpserve.AsyncClient(endpoint) as client:
            with pytest.raises(tpserve.InvalidRequestError):
                await client.generate(token_ids=[10**6])
            with pytest.raises(tpserve.PromptTooLongError):
                async for _ in client.stream(PROMPT, max_tokens=8192):
                    pass
            assert (await client.generate(PROMPT, max_tokens=2)).finish_reason == "length"

    run(main())


def test_no_server_is_a_timeout():
    async def main():
        async with tpserve.AsyncClient(f"tcp://127.0.0.1:{free_port()}", timeout=0.5) as client:
            with pytest.raises(tpserve.TpserveTimeoutError):
                await client.health()

    run(main())
