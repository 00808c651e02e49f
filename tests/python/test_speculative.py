"""Speculative decoding through a real `tpserve serve --tp 2 --speculative ngram:4 --draft-model SmolLM2` on
SmolLM2, by prompt lookup and by the draft model (here the target file itself, so every proposal is right,
seeded ones included: the draft draws with the target's seed): the Python client's `speculative=` argument,
the OpenAI gateway's `speculative` extra field, the Finish counts, the stats and the Prometheus counters. The
reference is the same request with speculation off on the same server: the ids, text and usage must be
identical, since speculation only changes the speed.
"""
import re

import openai
import pytest

import tpserve
from conftest import MODEL, assert_no_process_left, start_server

# A text to copy: what prompt lookup predicts well.
TEXT = ("The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step. "
        "All that glitters is not gold.")
MESSAGES = [{"role": "user", "content": "Repeat this text exactly, three times:\n\n" + TEXT}]


@pytest.fixture(scope="module")
def server():
    s = start_server("--speculative", "ngram:4", "--draft-model", str(MODEL))
    yield s
    assert s.stop() == 0
    assert_no_process_left(s)


@pytest.fixture(scope="module")
def client(server):
    with tpserve.Client(server.endpoint, timeout=120) as c:
        yield c


def generate(client, **kwargs):
    result = client.generate(messages=MESSAGES, max_tokens=160, ignore_eos=True, **kwargs)
    return result.samples[0]


@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.8, "top_p": 0.9, "repetition_penalty": 1.1,
                                          "frequency_penalty": 0.3, "seed": 7}], ids=["greedy", "seeded"])
def test_speculation_keeps_the_tokens(client, sampling):
    plain = generate(client, speculative="off", **sampling)
    assert plain.finish.num_draft_tokens == 0
    for choice in (None, "ngram:2", {"method": "ngram", "k": 6}, "draft:3", {"method": "draft", "k": 5}):
        spec = generate(client, speculative=choice, **sampling)  # None: the server's ngram:4
        assert spec.token_ids == plain.token_ids, choice
        assert spec.text == plain.text
        assert spec.finish.usage.completion_tokens == plain.finish.usage.completion_tokens
        assert spec.finish.num_draft_tokens > 0, choice
        assert 0 <= spec.finish.num_accepted_tokens <= spec.finish.num_draft_tokens
        if not sampling and choice == {"method": "ngram", "k": 6}:  # greedy copying is what prompt lookup is for
            assert spec.finish.num_accepted_tokens > 0
        if "draft" in str(choice):  # the target drafting for itself is never wrong
            assert spec.finish.num_accepted_tokens == spec.finish.num_draft_tokens, choice


def test_stop_string_inside_a_speculative_step(client):
    """A stop string met by a token that a step kept along with later ones: the text, ids and usage end
    where plain decoding ends them."""
    plain = generate(client, speculative="off", stop=["thousand"])
    spec = generate(client, speculative="ngram:8", stop=["thousand"])
    assert plain.finish.reason == "stop"
    assert (spec.text, spec.token_ids, spec.finish.reason) == (plain.text, plain.token_ids, plain.finish.reason)
    assert spec.finish.usage.completion_tokens == plain.finish.usage.completion_tokens


def test_bad_speculative_arguments_are_refused(client):
    with pytest.raises(tpserve.InvalidRequestError):
        generate(client, speculative="ngram:17")
    with pytest.raises(tpserve.InvalidRequestError):
        generate(client, speculative="eagle")
    with pytest.raises(tpserve.InvalidRequestError):
        generate(client, speculative="draft:17")


def test_stats_and_metrics_count_proposals(client):
    generate(client)
    stats = client.stats()
    assert stats.num_draft_tokens > 0 and 0 < stats.num_accepted_tokens <= stats.num_draft_tokens
    assert stats.num_verify_steps > 0
    text = client.metrics()
    for name in ("tpserve:spec_decode_num_drafts_total", "tpserve:spec_decode_num_draft_tokens_total",
                 "tpserve:spec_decode_num_accepted_tokens_total"):
        values = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
        assert values and float(values[0]) > 0, name


def test_openai_extra_body(server):
    api = openai.OpenAI(base_url=server.http_url + "/v1", api_key="unused", max_retries=0, timeout=120)
    model = api.models.list().data[0].id

    def chat(speculative):
        reply = api.chat.completions.create(model=model, messages=MESSAGES, max_tokens=96, temperature=0,
                                            extra_body={"speculative": speculative, "ignore_eos": True})
        return reply.choices[0].message.content, reply.usage.completion_tokens

    plain = chat({"method": "off"})
    assert chat({"method": "ngram", "k": 4}) == plain
    assert chat({"method": "ngram", "num_speculative_tokens": 3}) == plain
    assert chat({"method": "draft", "k": 4}) == plain
    with pytest.raises(openai.BadRequestError) as error:
        chat({"method": "ngram", "k": 99})
    assert "speculative" in str(error.value)
