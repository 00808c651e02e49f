"""Encoding client messages and decoding server messages (comm/schema/client.capnp), shared by Client and
AsyncClient. One Cap'n Proto message per ZeroMQ frame, unpacked encoding.

A generate request's keyword arguments (`**params`) are checked here, in one place, and only those given
are set: the rest keep the schema's defaults (max_tokens 16, greedy sampling, one sample, ...).
"""
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import capnp

from . import _schema
from .errors import InvalidRequestError, error_from_reply
from .types import (Chunk, Finish, Health, PromptLogprobs, Stats, Tokenized, TokenLogprobs, TopLogprob, Usage,
                    snake_case)

_wire = _schema.client

# Python name -> GenerateRequest field (request-level settings).
_REQUEST_FIELDS = {
    "max_tokens": "maxTokens", "stop": "stop", "stop_token_ids": "stopTokenIds", "ignore_eos": "ignoreEos",
    "logprobs": "numLogprobs", "n": "n", "priority": "priority", "prompt_logprobs": "promptLogprobs",
    "user": "user",
}
# Python name -> SamplingParams field; seed and logit_bias are set apart (hasSeed, a list of structs).
_SAMPLING_FIELDS = {snake_case(f): f for f in ("temperature", "topK", "topP", "minP", "repetitionPenalty",
                                                 "presencePenalty", "frequencyPenalty")}

Message = Union[Dict[str, str], Tuple[str, str]]  # {"role": ..., "content": ...} or (role, content)


def _set(builder, field: str, value: Any, name: str) -> None:
    try:
        setattr(builder, field, value)
    except (capnp.KjException, TypeError, ValueError) as e:
        raise InvalidRequestError(f"{name}={value!r}: wrong type or out of range ({str(e).splitlines()[0]})")


def _fill_chat(builder, messages: Sequence[Message]) -> None:
    chat = builder.init("chat", len(messages))
    for i, message in enumerate(messages):
        role, content = (message["role"], message["content"]) if isinstance(message, dict) else message
        _set(chat[i], "role", role, f"messages[{i}].role")
        _set(chat[i], "content", content, f"messages[{i}].content")


def _fill_prompt(prompt_union, prompt: Optional[str], token_ids: Optional[Sequence[int]],
                 messages: Optional[Sequence[Message]]) -> None:
    if sum(x is not None for x in (prompt, token_ids, messages)) != 1:
        raise TypeError("give exactly one of prompt (text), token_ids or messages")
    if prompt is not None:
        _set(prompt_union, "text", prompt, "prompt")
    elif token_ids is not None:
        _set(prompt_union, "tokenIds", list(token_ids), "token_ids")
    else:
        _fill_chat(prompt_union, messages)


def _speculative(value: Any) -> Tuple[str, int]:
    """(method, k) of a `speculative` argument: "off", "ngram", "ngram:K", "draft", "draft:K" or
    {"method": ..., "k": ...}."""
    if isinstance(value, dict):
        method, k = value.get("method"), value.get("k", 0)
    elif isinstance(value, str):
        method, _, k_text = value.partition(":")
        try:
            k = int(k_text) if k_text else 0
        except ValueError:
            raise InvalidRequestError(f"speculative={value!r}: K must be a number, as in ngram:4") from None
    else:
        raise TypeError("speculative must be a string (off, ngram, ngram:K, draft, draft:K) or a dict {method, k}")
    if method not in ("off", "ngram", "draft"):
        raise InvalidRequestError(f"speculative method {method!r} is not supported; use off, ngram or draft")
    if not isinstance(k, int) or not 0 <= k <= 16:
        raise InvalidRequestError(f"speculative k={k!r} must be in [1, 16]")
    return method, k


_EARLY_STOPPING = {False: "heuristic", True: "whenFull", "never": "never"}


def _beam(value: Any) -> Tuple[int, float, str]:
    """beam=W or {"width": W, "length_penalty": 1.0, "early_stopping": False | True | "never"}."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = {"width": value}
    if not isinstance(value, dict):
        raise TypeError("beam must be a width or a dict {width, length_penalty, early_stopping}")
    unknown = set(value) - {"width", "length_penalty", "early_stopping"}
    if unknown:
        raise TypeError(f"unknown beam field(s): {', '.join(sorted(unknown))}")
    width, early = value.get("width"), value.get("early_stopping", False)
    if not isinstance(width, int) or not 1 <= width <= 8:
        raise InvalidRequestError(f"beam width={width!r} must be in [1, 8]")
    if early not in _EARLY_STOPPING:
        raise InvalidRequestError(f"beam early_stopping={early!r} must be False, True or 'never'")
    return width, float(value.get("length_penalty", 1.0)), _EARLY_STOPPING[early]


def generate_filler(prompt: Optional[str], token_ids: Optional[Sequence[int]], messages: Optional[Sequence[Message]],
                    stream: bool, params: Dict[str, Any]) -> Callable:
    """Checks a generate request's arguments now (TypeError / InvalidRequestError) and returns what fills
    the GenerateRequest builder. params: max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
    presence_penalty, frequency_penalty, seed, logit_bias ({token id: bias}), stop (a string or a list),
    stop_token_ids, ignore_eos, logprobs (top-n per token, 0..20), n, priority, prompt_logprobs, user,
    speculative ("off", "ngram", "ngram:K", "draft", "draft:K" or {"method": "ngram", "k": K}; None: the
    server's default; draft needs a server started with --draft-model),
    beam (a width, or {"width", "length_penalty", "early_stopping"}: beam search; n best hypotheses return)."""
    unknown = set(params) - set(_REQUEST_FIELDS) - set(_SAMPLING_FIELDS) - {"seed", "logit_bias", "speculative", "beam"}
    if unknown:
        raise TypeError(f"unknown generate argument(s): {', '.join(sorted(unknown))}")
    params = {name: value for name, value in params.items() if value is not None}  # None: the default
    if isinstance(params.get("stop"), str):
        params["stop"] = [params["stop"]]

    def fill(g) -> None:
        _fill_prompt(g.prompt, prompt, token_ids, messages)
        g.stream = stream
        for name, value in params.items():
            if name in _REQUEST_FIELDS:
                _set(g, _REQUEST_FIELDS[name], list(value) if name in ("stop", "stop_token_ids") else value, name)
            elif name in _SAMPLING_FIELDS:
                _set(g.sampling, _SAMPLING_FIELDS[name], value, name)
        if "seed" in params:
            _set(g.sampling, "seed", params["seed"], "seed")
            g.sampling.hasSeed = True
        if "speculative" in params:
            method, k = _speculative(params["speculative"])
            spec = g.init("speculative")
            spec.method = method
            _set(spec, "numTokens", k, "speculative k")
        if "beam" in params:
            width, length_penalty, early_stopping = _beam(params["beam"])
            beam = g.init("beam")
            beam.width, beam.lengthPenalty, beam.earlyStopping = width, length_penalty, early_stopping
        bias = params.get("logit_bias", {})
        entries = g.sampling.init("logitBias", len(bias))
        for entry, (token_id, value) in zip(entries, bias.items()):
            _set(entry, "tokenId", int(token_id), "logit_bias token id")
            _set(entry, "bias", value, f"logit_bias[{token_id}]")

    fill(_wire.GenerateRequest.new_message())  # surfaces argument errors at the call, not at send time
    return fill


def tokenize_filler(text: Optional[str], messages: Optional[Sequence[Message]], add_special_tokens: bool) -> Callable:
    if (text is None) == (messages is None):
        raise TypeError("give exactly one of text or messages")

    def fill(t) -> None:
        if text is not None:
            _set(t.prompt, "text", text, "text")
        else:
            _fill_chat(t.prompt, messages)
        t.addSpecialTokens = add_special_tokens

    fill(_wire.TokenizeRequest.new_message())
    return fill


def detokenize_filler(token_ids: Sequence[int]) -> Callable:
    def fill(d) -> None:
        _set(d, "tokenIds", list(token_ids), "token_ids")

    fill(_wire.DetokenizeRequest.new_message())
    return fill


def encode(request_id: int, api_key: str, kind: str, fill: Optional[Callable] = None) -> bytes:
    """A ClientMessage of body `kind`; Void kinds (cancel, health, stats, heartbeat, metrics) take no fill."""
    message = _wire.ClientMessage.new_message(version=_schema.PROTOCOL_VERSION, requestId=request_id, apiKey=api_key)
    if fill is None:
        setattr(message.body, kind, None)
    else:
        fill(message.body.init(kind))
    return message.to_bytes()


def _enum_name(value) -> str:
    """An enum's name; a value newer than this client's schema reads as its number (e.g. "9")."""
    try:
        return str(value)
    except RuntimeError:
        return str(value.raw)


def _token_logprobs(readers) -> Tuple[TokenLogprobs, ...]:
    return tuple(TokenLogprobs(r.logprob, tuple(TopLogprob(t.tokenId, t.logprob) for t in r.top)) for r in readers)


def _decode_body(kind: str, body, request_id: int) -> Any:
    if kind == "chunk":
        c = body.chunk
        return Chunk(c.sampleIndex, tuple(c.tokenIds), c.text, _token_logprobs(c.logprobs))
    if kind == "finish":
        f = body.finish
        usage = Usage(f.usage.promptTokens, f.usage.completionTokens, f.usage.cachedPromptTokens)
        return Finish(f.sampleIndex, _enum_name(f.reason), usage, f.ttftMs, f.tpotMs, f.seed, f.numReplays,
                      f.numDraftTokens, f.numAcceptedTokens, f.beamScore, f.cumulativeLogprob)
    if kind == "error":
        return error_from_reply(_enum_name(body.error.kind), body.error.message, request_id)
    if kind in ("health", "stats"):
        reply, cls = getattr(body, kind), Health if kind == "health" else Stats
        return cls(*(getattr(reply, name) for name in reply.schema.fieldnames))
    if kind == "promptLogprobs":
        p = body.promptLogprobs
        return PromptLogprobs(tuple(p.tokenIds), _token_logprobs(p.logprobs))
    if kind == "metrics":
        return body.metrics.text
    if kind == "tokenize":
        return Tokenized(tuple(body.tokenize.tokenIds), body.tokenize.maxModelLen)
    if kind == "detokenize":
        return body.detokenize.text
    return None


def decode(data: bytes) -> Optional[Tuple[int, str, Any]]:
    """(request id, body kind, payload as a Python value), or None for bytes that are no ServerMessage or a
    body this client does not know (a newer server's): such messages are dropped, as the C++ client does."""
    try:
        with _wire.ServerMessage.from_bytes(data) as message:
            kind = str(message.body.which())
            return message.requestId, kind, _decode_body(kind, message.body, message.requestId)
    except Exception:  # whatever pycapnp raises on bytes that are no message: never break the client
        return None
