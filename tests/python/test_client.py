"""The blocking Python client (client/python, package tpserve) against a real `tpserve serve --tp 2`."""
import subprocess

import pytest

import tpserve
from client_testing import PROMPT, run_ids, wait_until_idle
from conftest import TPSERVE, free_port


@pytest.fixture(scope="module")
def client(zmq_server):
    with tpserve.Client(zmq_server.endpoint, timeout=60) as c:
        yield c


def test_health_and_stats(client):
    health = client.health()
    assert health.ok and not health.draining
    assert health.num_worker_groups == 1
    assert health.vocab_size == 49152 and health.context_length == 8192  # SmolLM2-135M
    assert health.model_name
    stats = client.stats()
    assert stats.num_worker_groups == 1 and stats.blocks_total > 0
    assert stats.blocks_free + stats.blocks_used + stats.blocks_cached <= stats.blocks_total


def test_greedy_ids_equal_tpserve_run(client):
    expected = run_ids("--prompt", PROMPT, "--max-tokens", "24")
    result = client.generate(PROMPT, max_tokens=24)
    assert result.token_ids == expected
    assert result.finish_reason == ("length" if len(expected) == 24 else "stop")  # tpserve-run stops at EOS too
    assert result.usage.completion_tokens == len(expected) and result.usage.prompt_tokens > 0
    assert result.text.startswith(" Paris")


def test_token_id_prompt_equals_tpserve_run(client):
    prompt_ids = [504, 1797, 1918, 282, 2114, 314]  # any ids in the vocabulary
    expected = run_ids("--prompt-ids", ",".join(map(str, prompt_ids)), "--max-tokens", "16")
    assert client.generate(token_ids=prompt_ids, max_tokens=16).token_ids == expected


def test_seeded_sample_equals_tpserve_run_and_replays(client):
    sampling = dict(max_tokens=16, temperature=0.9, top_p=0.95, ignore_eos=True)  # always 16 draws
    first = client.generate(PROMPT, **sampling)  # no seed: the server draws one and reports it
    replay = client.generate(PROMPT, seed=first.seed, **sampling)
    assert replay.seed == first.seed
    assert replay.token_ids == first.token_ids and replay.text == first.text
    expected = run_ids("--prompt", PROMPT, "--max-tokens", "16", "--temperature", "0.9", "--top-p", "0.95",
                       "--ignore-eos", "--seed", str(first.seed))  # any 64-bit seed
    assert first.token_ids == expected
    assert client.generate(PROMPT, seed=first.seed + 1, **sampling).token_ids != first.token_ids


def test_stream_chunks_concatenate_to_the_generated_text(client):
    whole = client.generate(PROMPT, max_tokens=20)
    stream = client.stream(PROMPT, max_tokens=20)
    chunks = list(stream)
    assert len(chunks) > 1  # streamed, not one chunk at the end
    assert "".join(c.text for c in chunks) == whole.text
    assert [i for c in chunks for i in c.token_ids] == whole.token_ids
    assert stream.result.text == whole.text and stream.result.finish_reason == whole.finish_reason


def test_n_samples(client):
    result = client.generate(PROMPT, max_tokens=12, n=2, temperature=1.0, seed=1234)
    assert [s.index for s in result.samples] == [0, 1]
    assert all(s.finish_reason == "length" and len(s.token_ids) == 12 for s in result.samples)
    assert result.samples[0].token_ids != result.samples[1].token_ids  # independent draws
    assert result.usage.completion_tokens == 24
    replay = client.generate(PROMPT, max_tokens=12, n=2, temperature=1.0, seed=1234)
    assert [s.token_ids for s in replay.samples] == [s.token_ids for s in result.samples]
    greedy = client.generate(PROMPT, max_tokens=12, n=2)
    assert greedy.samples[0].token_ids == greedy.samples[1].token_ids == run_ids("--prompt", PROMPT,
                                                                                  "--max-tokens", "12")


def test_beam_search(client):
    """beam=W returns the n best hypotheses, best first, with their scores; width 1 stopping at its first
    finished hypothesis is greedy decoding."""
    result = client.generate(PROMPT, max_tokens=10, n=3, beam={"width": 4, "length_penalty": 0.0}, ignore_eos=True)
    assert [s.index for s in result.samples] == [0, 1, 2]
    scores = [s.finish.beam_score for s in result.samples]
    assert scores == sorted(scores, reverse=True)
    assert all(s.finish.beam_score == s.finish.cumulative_logprob < 0 for s in result.samples)  # penalty 0
    assert len({tuple(s.token_ids) for s in result.samples}) == 3
    width1 = client.generate(PROMPT, max_tokens=12, beam={"width": 1, "early_stopping": True})
    assert width1.token_ids == run_ids("--prompt", PROMPT, "--max-tokens", "12")
    with pytest.raises(tpserve.InvalidRequestError, match="beam width"):
        client.generate(PROMPT, beam=9)
    with pytest.raises(tpserve.InvalidRequestError, match="temperature 0"):
        client.generate(PROMPT, beam=2, temperature=0.5)


def test_stop_string_cuts_the_text(client):
    full = client.generate(PROMPT, max_tokens=24).text
    stop = full.split()[2]  # a word the greedy text reaches after a few tokens
    expected = full[:full.index(stop)]
    result = client.generate(PROMPT, max_tokens=24, stop=[stop, "never appears"])
    assert result.text == expected and result.finish_reason == "stop"
    assert "".join(c.text for c in client.stream(PROMPT, max_tokens=24, stop=stop)) == expected


def test_logprobs(client):
    result = client.generate(PROMPT, max_tokens=8, logprobs=3)
    assert len(result.logprobs) == 8
    for token_id, lp in zip(result.token_ids, result.logprobs):
        assert len(lp.top) == 3
        assert lp.top[0].token_id == token_id and lp.logprob == lp.top[0].logprob  # greedy: the most likely
        assert 0 >= lp.top[0].logprob >= lp.top[1].logprob >= lp.top[2].logprob


def test_chat_equals_the_cli(client, zmq_server):
    out = subprocess.run([str(TPSERVE), "generate", "--server", zmq_server.endpoint, "--chat", "What is 2+2?",
                          "--system", "Answer briefly.", "--max-tokens", "24", "--print-ids"],
                         capture_output=True, text=True, timeout=120, check=True)
    messages = [{"role": "system", "content": "Answer briefly."}, ("user", "What is 2+2?")]
    result = client.chat(messages, max_tokens=24)
    assert result.token_ids == [int(x) for x in out.stdout.split()]
    assert "4" in result.text


def test_repeated_prompt_is_served_from_the_prefix_cache(client):
    prompt = "Prefix caching test. " + " ".join(f"word{i}" for i in range(40))  # several KV blocks
    first = client.generate(prompt, max_tokens=2)
    second = client.generate(prompt, max_tokens=2)
    assert first.usage.cached_prompt_tokens == 0
    assert 0 < second.usage.cached_prompt_tokens < second.usage.prompt_tokens
    assert second.token_ids == first.token_ids


def test_leaving_a_stream_cancels_it_and_frees_its_blocks(client):
    with client.stream(PROMPT, max_tokens=1000, ignore_eos=True) as stream:
        next(stream)
        assert client.stats().blocks_used > 0
    assert wait_until_idle(client.stats).blocks_used == 0

    for _ in client.stream(PROMPT, max_tokens=1000, ignore_eos=True):
        break  # the dropped stream cancels its request
    wait_until_idle(client.stats)


def test_cancel_by_request_id_finishes_with_reason_cancelled(client):
    stream = client.stream(PROMPT, max_tokens=1000, ignore_eos=True)
    next(stream)
    client.cancel(stream.request_id)
    result = stream.result
    assert result.finish_reason == "cancelled"
    assert 1 <= result.usage.completion_tokens < 1000
    wait_until_idle(client.stats)


def test_server_errors_are_typed(client):
    with pytest.raises(tpserve.InvalidRequestError, match="49152") as error:
        client.generate(token_ids=[1, 10**6])
    assert error.value.kind == "invalidRequest" and isinstance(error.value, tpserve.TpserveError)
    with pytest.raises(tpserve.PromptTooLongError):
        client.generate(PROMPT, max_tokens=8192)
    with pytest.raises(tpserve.InvalidRequestError):
        client.generate(PROMPT, n=0)
    with pytest.raises(tpserve.InvalidRequestError):
        next(client.stream(PROMPT, logprobs=21))
    assert client.generate(PROMPT, max_tokens=2).finish_reason == "length"  # the connection still serves


def test_arguments_are_checked_before_sending(client):
    with pytest.raises(tpserve.InvalidRequestError, match="max_tokens"):
        client.generate(PROMPT, max_tokens=-1)
    with pytest.raises(TypeError, match="max_token"):
        client.generate(PROMPT, max_token=4)
    with pytest.raises(TypeError):
        client.generate(PROMPT, token_ids=[1, 2])


def test_no_server_is_a_timeout():
    with tpserve.Client(f"tcp://127.0.0.1:{free_port()}", timeout=0.5) as lonely:
        with pytest.raises(tpserve.TpserveTimeoutError):
            lonely.health()
