"""CurveZMQ end to end: a real `tpserve serve --keys DIR` (coordinator + 2-rank group, both links
encrypted), the `tpserve` CLI as client, and tcpdump on the loopback interface.

- a client with a listed key is served; one without keys (plain TCP) or with an unlisted key gets nothing;
- the captured traffic holds no prompt text with CURVE on, and does hold it without (so the capture works);
- a coordinator asked to listen beyond loopback without keys refuses to start and says how to make them.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import TPSERVE, MODEL, free_port, start_server

SECRET = "the launch code is swordfish"


def keys(tmp_path, name):
    d = tmp_path / name
    subprocess.run([str(TPSERVE), "keys", "init", str(d)], check=True, capture_output=True)
    return str(d)


def generate(server, *flags, timeout_s="60"):
    return subprocess.run([str(TPSERVE), "generate", "--server", server.endpoint, "--prompt", SECRET,
                           "--max-tokens", "4", "--timeout-s", timeout_s, *flags],
                          capture_output=True, text=True, timeout=120)


def captured(port, action):
    """Runs action() while tcpdump records loopback traffic to and from `port`; returns the raw capture.
    The capture is complete when a marker sent after the action is in the file (packets are written
    in order, one by one: -U, --immediate-mode)."""
    if shutil.which("tcpdump") is None:
        pytest.fail("tcpdump is not installed (deploy/install-deps.sh installs it)")
    pcap = f"/tmp/tpserve-curve-{os.getpid()}-{port}.pcap"
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "--immediate-mode", "-w", pcap, f"tcp port {port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    marker = b"tpserve-capture-marker-%d" % os.getpid()
    try:
        line = dump.stderr.readline().decode()  # "listening on lo": capturing from here on
        assert "listening on" in line, line
        result = action()
        with socket.create_connection(("127.0.0.1", int(port))) as s:  # not ZMTP: the server drops it
            s.sendall(marker)
        deadline = time.monotonic() + 20
        while marker not in open(pcap, "rb").read():
            assert time.monotonic() < deadline, "tcpdump never wrote the marker"
            time.sleep(0.05)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.communicate(timeout=30)
    with open(pcap, "rb") as f:
        data = f.read()
    os.remove(pcap)
    return result, data


def test_curve_serves_listed_keys_encrypts_and_refuses_strangers(tmp_path):
    good = keys(tmp_path, "keys")
    stranger = keys(tmp_path, "stranger")
    server = start_server("--keys", good, client_flags=("--keys", good))
    try:
        port = server.endpoint.rsplit(":", 1)[1]
        result, data = captured(port, lambda: generate(server, "--keys", good))
        assert result.returncode == 0, result.stderr
        assert len(data) > 2000, "the capture saw no traffic"
        assert SECRET.encode() not in data and b"swordfish" not in data

        plain = generate(server, timeout_s="3")
        assert plain.returncode != 0 and "DEADLINE_EXCEEDED" in plain.stderr, plain.stderr
        # The right server key, an unlisted own key.
        mixed = tmp_path / "mixed"
        (mixed / "clients").mkdir(parents=True)
        shutil.copy(os.path.join(good, "coordinator.pub"), mixed / "coordinator.pub")
        shutil.copy(os.path.join(stranger, "clients", "default.key"), mixed / "clients" / "default.key")
        unlisted = generate(server, "--keys", str(mixed), timeout_s="3")
        assert unlisted.returncode != 0 and "DEADLINE_EXCEEDED" in unlisted.stderr, unlisted.stderr
        # The listed client is still served, and so is the OpenAI gateway (a CURVE client of the coordinator).
        assert generate(server, "--keys", good).returncode == 0
        request = urllib.request.Request(server.http_url + "/v1/completions", method="POST",
                                         data=json.dumps({"prompt": "Hello", "max_tokens": 3}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert json.loads(reply.read())["usage"]["completion_tokens"] == 3
        # The Python client with the same keys, blocking and asyncio.
        import asyncio
        import tpserve
        with tpserve.Client(server.endpoint, keys_dir=good) as client:
            assert len(client.generate(SECRET, max_tokens=3).token_ids) == 3

        async def async_generate():
            async with tpserve.AsyncClient(server.endpoint, keys_dir=good) as client:
                return await client.generate(SECRET, max_tokens=3)
        assert len(asyncio.run(async_generate()).token_ids) == 3
        with tpserve.Client(server.endpoint, keys_dir=str(mixed), timeout=3) as stranger_client:
            with pytest.raises(tpserve.TpserveTimeoutError):
                stranger_client.health()
    finally:
        assert server.stop() == 0


def test_without_keys_the_prompt_crosses_in_clear_text():
    server = start_server(http=False)
    try:
        port = server.endpoint.rsplit(":", 1)[1]
        result, data = captured(port, lambda: generate(server))
        assert result.returncode == 0, result.stderr
        assert SECRET.encode() in data, "the capture misses plain traffic: the CURVE test would prove nothing"
    finally:
        assert server.stop() == 0


def test_non_loopback_without_keys_refuses_to_start():
    coordinator = TPSERVE.parent.parent / "coordinator" / "tpserve-coordinator"
    args = [str(coordinator), "--model", str(MODEL), "--host", "0.0.0.0", "--port", str(free_port()),
            "--worker-port", str(free_port())]
    refused = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "tpserve keys init" in refused.stderr and "--insecure" in refused.stderr, refused.stderr


def test_gateway_beyond_loopback_without_api_key_refuses_to_start():
    gateway = TPSERVE.parent / "http" / "tpserve-http"
    args = [str(gateway), "--coordinator", "tcp://127.0.0.1:1", "--host", "0.0.0.0", "--port", str(free_port())]
    env = {k: v for k, v in os.environ.items() if k != "TPSERVE_API_KEY"}
    refused = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    assert refused.returncode != 0
    assert "--api-key" in refused.stderr and "--insecure" in refused.stderr, refused.stderr
    # With a key it starts (and is stopped by SIGTERM); --insecure also starts, with a warning.
    for extra, extra_env in ((["--api-key", "k"], {}), (["--insecure"], {}), ([], {"TPSERVE_API_KEY": "k"})):
        started = subprocess.Popen(args + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**env, **extra_env})
        line = started.stdout.readline()
        started.send_signal(signal.SIGTERM)
        assert started.wait(timeout=30) == 0
        assert "listening on http://0.0.0.0:" in line, (extra, extra_env, line, started.stderr.read())
