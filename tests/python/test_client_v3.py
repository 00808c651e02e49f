"""Protocol v3 requests through the Python client: metrics, tokenize, detokenize and prompt logprobs.

The coordinator answers a request it does not serve yet with the placeholder error "not implemented yet";
these tests skip on exactly that reply (and on nothing else), so they run for real once it is gone.
"""
import re

import pytest

import tpserve
from client_testing import PROMPT

PLACEHOLDER = "not implemented yet"


@pytest.fixture(scope="module")
def client(zmq_server):
    with tpserve.Client(zmq_server.endpoint, timeout=60) as c:
        yield c


def served(call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except tpserve.InternalError as e:
        if e.message == PLACEHOLDER:
            pytest.skip(f"the coordinator does not serve {call.__name__} yet")
        raise


def counter(metrics_text: str, name: str) -> float:
    """The sum over label sets of one counter in a Prometheus text exposition."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", re.MULTILINE)
    values = pattern.findall(metrics_text)
    assert values, f"{name} not in the metrics"
    return sum(float(v) for v in values)


def test_metrics_count_generated_tokens(client):
    before = counter(served(client.metrics), "tpserve:generation_tokens_total")
    generated = client.generate(PROMPT, max_tokens=7, ignore_eos=True).usage.completion_tokens
    after = counter(client.metrics(), "tpserve:generation_tokens_total")
    assert after - before == generated == 7
    assert "tpserve:num_requests_running" in client.metrics()


def test_tokenize_gives_the_ids_the_server_generates_from(client):
    tokens = served(client.tokenize, PROMPT)
    assert tokens.max_model_len == client.health().context_length
    by_text, by_ids = client.generate(PROMPT, max_tokens=8), client.generate(token_ids=tokens.token_ids, max_tokens=8)
    assert by_ids.token_ids == by_text.token_ids
    assert by_text.usage.prompt_tokens == len(tokens.token_ids)

    messages = [{"role": "user", "content": "What is 2+2?"}]
    chat_tokens = client.tokenize(messages=messages)
    assert client.generate(token_ids=chat_tokens.token_ids, max_tokens=8).token_ids == \
        client.chat(messages, max_tokens=8).token_ids
    assert len(client.tokenize(PROMPT, add_special_tokens=False).token_ids) <= len(tokens.token_ids)


def test_detokenize_gives_the_generated_text(client):
    result = client.generate(PROMPT, max_tokens=12, ignore_eos=True)
    assert served(client.detokenize, result.token_ids) == result.text
    with pytest.raises(tpserve.InvalidRequestError):
        client.detokenize([10**6])


def test_prompt_logprobs_equal_the_logprobs_of_generation(client):
    prompt_ids = [504, 1797, 1918, 282, 2114, 314]  # any ids in the vocabulary
    generated = client.generate(token_ids=prompt_ids, max_tokens=6, ignore_eos=True, logprobs=2)  # greedy
    echo = client.generate(token_ids=prompt_ids + generated.token_ids, max_tokens=1, prompt_logprobs=True,
                           logprobs=2)
    assert echo.prompt_logprobs is not None
    assert list(echo.prompt_logprobs.token_ids) == prompt_ids + generated.token_ids
    assert len(echo.prompt_logprobs.logprobs) == len(prompt_ids) + len(generated.token_ids) - 1
    # The prompt position that predicts generated token k is len(prompt_ids) - 1 + k.
    for k, (token_id, expected) in enumerate(zip(generated.token_ids, generated.logprobs)):
        got = echo.prompt_logprobs.logprobs[len(prompt_ids) - 1 + k]
        assert got.logprob == pytest.approx(expected.logprob, abs=1e-4)
        assert [t.token_id for t in got.top] == [t.token_id for t in expected.top]
        assert got.top[0].token_id == token_id
