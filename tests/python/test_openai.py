"""The OpenAI-compatible gateway (tpserve-http) driven by the real `openai` package against a real
`tpserve serve --tp 2 --http-port` on SmolLM2.

References are independent of the gateway: tpserve-run's greedy text and ids, the coordinator's own stats
(`tpserve stats`), and the engine's token-by-token logprobs.
"""
import http.client
import json
import re
import subprocess
import time

import openai
import pytest

from conftest import TPSERVE, TPSERVE_RUN, MODEL, assert_no_process_left, start_server

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.http_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(client):
    models = client.models.list().data
    assert len(models) == 1
    return models[0].id


def ids_of(tokens):
    """The gateway writes a logprob's token as token_id:<id> (it has no tokenizer)."""
    return [int(re.fullmatch(r"token_id:(\d+)", t).group(1)) for t in tokens]


def raw_request(server, method, path, body=b"", headers=None):
    """One HTTP exchange outside the openai package (malformed bodies, headers): (status, headers, body)."""
    host, port = server.http_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read()
    finally:
        conn.close()


def post_json(server, path, body):
    """POST a JSON body to a non-/v1 route (/tokenize, /detokenize); the decoded reply."""
    status, _, reply = raw_request(server, "POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    assert status == 200, reply
    return json.loads(reply)


def coordinator_stats(server):
    out = subprocess.run([str(TPSERVE), "stats", "--server", server.endpoint], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}


def test_health_models_and_request_id(server, model):
    status, headers, body = raw_request(server, "GET", "/health", headers={"X-Request-Id": "abc-123"})
    assert status == 200, body
    assert headers["X-Request-Id"] == "abc-123"
    status, headers, _ = raw_request(server, "GET", "/health")
    assert re.fullmatch(r"[0-9a-f]{16}", headers["X-Request-Id"])
    assert model


def test_greedy_completion_equals_tpserve_run(server, client, model):
    run = subprocess.run([str(TPSERVE_RUN), "--model", str(MODEL), "--prompt", PROMPT, "--max-tokens", "16",
                          "--print-ids"], capture_output=True, text=True, timeout=300, check=True)
    reference_ids = [int(x) for x in run.stdout.split()]
    reply = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=0, logprobs=1,
                                      extra_headers={"X-Request-Id": "greedy-1"})
    choice = reply.choices[0]
    assert ids_of(choice.logprobs.tokens) == reference_ids
    assert reply.id == "cmpl-greedy-1"
    detok = post_json(server, "/detokenize", {"tokens": reference_ids})
    assert choice.text == detok["prompt"]
    assert reply.usage.completion_tokens == len(reference_ids)
    assert reply.usage.prompt_tokens_details.cached_tokens >= 0
    # Stream and non-stream agree, chunk by chunk.
    stream = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    text, usage, reasons = "", None, []
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.text
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert text == choice.text
    assert reasons == [choice.finish_reason]
    assert usage.completion_tokens == reply.usage.completion_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_chat_streamed_and_not(client, model):
    messages = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Name a colour."}]
    reply = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content
    assert reply.usage.prompt_tokens > 10  # the chat format's tokens around the messages
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0,
                                            stream=True)
    text, roles = "", []
    for chunk in stream:
        for c in chunk.choices:
            text += c.delta.content or ""
            if c.delta.role:
                roles.append(c.delta.role)
    assert text == reply.choices[0].message.content
    assert roles == ["assistant"]
    # Without max_tokens the chat runs to the end of turn (the gateway asks for the context left).
    free = client.chat.completions.create(model=model, messages=messages, temperature=0)
    assert free.choices[0].finish_reason == "stop"


def test_n2_and_batch_indexing(server, client, model):
    reply = client.completions.create(model=model, prompt=PROMPT, max_tokens=8, temperature=1.0, seed=11, n=2)
    assert [c.index for c in reply.choices] == [0, 1]
    assert reply.choices[0].text != reply.choices[1].text  # distinct seeds per sample
    # A batch of two prompts (text and token ids) with n=2: choices prompt_index * n + sample_index.
    ids = post_json(server, "/tokenize", {"prompt": "Once upon a time"})["tokens"]
    batch = client.completions.create(model=model, prompt=[PROMPT, ids], max_tokens=6, temperature=0, n=2)
    assert [c.index for c in batch.choices] == [0, 1, 2, 3]
    single_a = client.completions.create(model=model, prompt=PROMPT, max_tokens=6, temperature=0)
    single_b = client.completions.create(model=model, prompt="Once upon a time", max_tokens=6, temperature=0)
    assert batch.choices[0].text == batch.choices[1].text == single_a.choices[0].text
    assert batch.choices[2].text == batch.choices[3].text == single_b.choices[0].text
    assert batch.usage.completion_tokens == sum(6 for _ in range(4))


def test_logprobs(client, model):
    reply = client.completions.create(model=model, prompt=PROMPT, max_tokens=6, temperature=0, logprobs=3)
    lp = reply.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == reply.usage.completion_tokens
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) == 3
        best = max(top.values())
        assert top[token] == logprob == best  # greedy picks the top token
        assert logprob <= 0
    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                          temperature=0, logprobs=True, top_logprobs=2)
    content = chat.choices[0].logprobs.content
    assert len(content) == chat.usage.completion_tokens
    assert all(len(c.top_logprobs) == 2 and c.top_logprobs[0].logprob == c.logprob for c in content)


def test_stop(client, model):
    full = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=0).choices[0].text
    words = full.split()
    assert len(words) >= 3, full
    stop = words[2]
    cut = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=0, stop=[stop, "zzzz"])
    assert cut.choices[0].text == full[:full.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_seeded_sample_replays(client, model):
    first = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=1.0)
    seed = first.model_extra["seed"]
    assert isinstance(seed, int)
    again = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=1.0, seed=seed)
    assert again.choices[0].text == first.choices[0].text
    assert again.model_extra["seed"] == seed
    other = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=1.0, seed=seed + 1)
    assert other.choices[0].text != first.choices[0].text


def test_disconnect_mid_stream_frees_blocks(server, client, model):
    stream = client.completions.create(model=model, prompt=PROMPT, max_tokens=2000, temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    received = 0
    for chunk in stream:
        received += len(chunk.choices)
        if received >= 3:
            break
    assert int(coordinator_stats(server)["blocks_used"]) > 0  # the request holds KV blocks now
    stream.close()  # the connection goes away mid-stream
    deadline = time.monotonic() + 30
    while int(coordinator_stats(server)["blocks_used"]) != 0:
        assert time.monotonic() < deadline, "KV blocks still in use after the client left"
        time.sleep(0.05)
    assert int(coordinator_stats(server)["running"]) == 0


def test_bad_requests(server, client, model):
    status, headers, body = raw_request(server, "POST", "/v1/completions", b'{"prompt": "x",',
                                        {"Content-Type": "application/json"})
    assert status == 400
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error" and "JSON" in error["message"]
    assert "X-Request-Id" in headers
    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model=model, prompt=PROMPT, temperature="hot")
    assert bad.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=model, messages=[{"role": "wizard", "content": "x"}])
    assert bad.value.body["param"] == "messages[0].role"
    status, _, body = raw_request(server, "POST", "/v1/completions", b'{"prompt": "\xff\xfe"}')
    assert status == 400 and b"UTF-8" in body
    with pytest.raises(openai.BadRequestError) as bad:  # this server has no draft model
        client.completions.create(model=model, prompt=PROMPT, extra_body={"speculative": {"method": "draft"}})
    assert "--draft-model" in bad.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt=PROMPT)
    status, _, _ = raw_request(server, "GET", "/v2/nothing")
    assert status == 404
    big = json.dumps({"prompt": "x" * (5 << 20)}).encode()
    status, _, body = raw_request(server, "POST", "/v1/completions", big)
    assert status == 413 and b"4194304" in body
    assert raw_request(server, "GET", "/health")[0] == 200  # the gateway keeps serving


def test_tokenize_detokenize_round_trip(server):
    text = "Hello, world! Ünïcödé"
    tokens = post_json(server, "/tokenize", {"prompt": text, "add_special_tokens": False})
    assert tokens["count"] == len(tokens["tokens"]) > 0
    assert tokens["max_model_len"] == 8192
    back = post_json(server, "/detokenize", {"tokens": tokens["tokens"]})
    assert back["prompt"] == text
    chat = post_json(server, "/tokenize", {"messages": [{"role": "user", "content": "Hi"}]})
    assert chat["count"] > 3


def test_echo_prompt_logprobs_equal_token_by_token(server, client, model):
    """echo + logprobs (lm-eval's loglikelihood): each prompt token's logprob equals the engine's logprob of
    that token when the prompt before it is sent and the token is forced with logit_bias (the reported
    logprob is of the raw distribution). Needs the workers' prompt logprobs (promptLogprobs): fails without."""
    text = "Paris is the capital of France"
    ids = post_json(server, "/tokenize", {"prompt": text})["tokens"]
    reply = client.completions.create(model=model, prompt=text, max_tokens=0, echo=True, logprobs=1, temperature=0)
    lp = reply.choices[0].logprobs
    assert reply.choices[0].text == text
    assert ids_of(lp.tokens) == ids
    assert lp.token_logprobs[0] is None
    for i in range(1, len(ids)):
        forced = client.completions.create(model=model, prompt=ids[:i], max_tokens=1, temperature=0, logprobs=1,
                                           logit_bias={str(ids[i]): 100})
        assert ids_of(forced.choices[0].logprobs.tokens) == [ids[i]]
        assert lp.token_logprobs[i] == pytest.approx(forced.choices[0].logprobs.token_logprobs[0], abs=1e-5)


def test_beam_search(server, client, model):
    """vLLM's beam search fields: n best of best_of hypotheses. The same request through the C++ client
    (`tpserve generate --json`) gives the ids and scores; each hypothesis's cumulative logprob is checked
    against the engine's teacher-forced logprobs of its tokens (echo), and the order against the scores."""
    prompt_ids = post_json(server, "/tokenize", {"prompt": PROMPT})["tokens"]
    out = subprocess.run([str(TPSERVE), "generate", "--server", server.endpoint, "--prompt-ids",
                          ",".join(map(str, prompt_ids)), "--max-tokens", "10", "--ignore-eos", "--beam-width", "4",
                          "--n", "3", "--json"], capture_output=True, text=True, timeout=120, check=True).stdout
    samples = [json.loads(line) for line in out.splitlines()]
    assert [s["sample"] for s in samples] == [0, 1, 2]
    reply = client.completions.create(model=model, prompt=prompt_ids, max_tokens=10, n=3,
                                      extra_body={"use_beam_search": True, "best_of": 4, "ignore_eos": True})
    assert [c.text for c in reply.choices] == [s["text"] for s in samples]
    assert len({tuple(s["token_ids"]) for s in samples}) == 3
    scores = [s["beam"]["score"] for s in samples]
    assert scores == sorted(scores, reverse=True)
    for s in samples:
        assert len(s["token_ids"]) == 10 and s["finish_reason"] == "length"
        forced = client.completions.create(model=model, prompt=prompt_ids + s["token_ids"], max_tokens=0, echo=True,
                                           logprobs=0, temperature=0)
        teacher = sum(forced.choices[0].logprobs.token_logprobs[len(prompt_ids):])
        assert s["beam"]["cumulative_logprob"] == pytest.approx(teacher, abs=1e-4)
        assert s["beam"]["score"] == pytest.approx(teacher / 10, abs=1e-5)  # length_penalty 1
    # Width 1 stopping at its first finished hypothesis is greedy decoding.
    greedy = client.completions.create(model=model, prompt=PROMPT, max_tokens=12, temperature=0)
    width1 = client.completions.create(model=model, prompt=PROMPT, max_tokens=12,
                                       extra_body={"use_beam_search": True, "early_stopping": True})
    assert width1.choices[0].text == greedy.choices[0].text
    # Sampling settings beam search cannot take are a 400 naming them; the server keeps serving.
    for bad in ({"temperature": 0.7}, {"n": 3, "extra_body": {"use_beam_search": True, "best_of": 2}},
                {"presence_penalty": 0.5}):
        kwargs = {"extra_body": {"use_beam_search": True}, **bad}
        with pytest.raises(openai.BadRequestError):
            client.completions.create(model=model, prompt=PROMPT, max_tokens=4, **kwargs)
    assert client.completions.create(model=model, prompt=PROMPT, max_tokens=2, temperature=0).choices[0].text


def test_auth_and_overload():
    """A second server: API key required, and a queue of 0 so every generation is refused as overloaded."""
    s = start_server("--api-key", "sesame", "--max-queue", "0")
    try:
        wrong = openai.OpenAI(base_url=s.http_url + "/v1", api_key="not-sesame", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
        status, _, _ = raw_request(s, "POST", "/v1/completions", b'{"prompt": "x"}')
        assert status == 401  # no Authorization header at all
        right = openai.OpenAI(base_url=s.http_url + "/v1", api_key="sesame", max_retries=0)
        assert right.models.list().data
        with pytest.raises(openai.RateLimitError) as limited:
            right.completions.create(model=right.models.list().data[0].id, prompt=PROMPT, max_tokens=4)
        assert int(limited.value.response.headers["Retry-After"]) >= 1
        assert raw_request(s, "GET", "/health")[0] == 200
    finally:
        assert s.stop() == 0
        assert_no_process_left(s)
