"""Prometheus metrics of a real `tpserve serve` (coordinator + TP-2 SmolLM2 worker group), scraped by a real
Prometheus server (Debian's `prometheus`) from the coordinator's --metrics-port, and linted by `promtool`.

After N requests complete, the test waits (bounded, polling Prometheus's query API) for the first scrape taken
after that instant, then asserts through the query API that every request histogram counted exactly N.
"""
import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import TPSERVE, free_port, start_server

NUM_REQUESTS = 4
MAX_TOKENS = 6
PROMPTS = ["The capital of France is", "Water boils at", "A haiku about the sea:", "Two plus two equals"]
MODEL_NAME_LABEL = "model_name"


def http_get(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return reply.read().decode()


@pytest.fixture(scope="module")
def served():
    """tpserve serve with --metrics-port; yields (server, metrics URL)."""
    port = free_port()
    server = start_server("--metrics-port", str(port), http=False)
    try:
        yield server, f"http://127.0.0.1:{port}/metrics"
    finally:
        assert server.stop() == 0


class Prometheus:
    """A Prometheus server scraping one target every second, with its storage in a temporary folder."""

    def __init__(self, target: str):
        binary = shutil.which("prometheus")
        assert binary, "the prometheus package is missing: run deploy/install-deps.sh"
        self.dir = Path(tempfile.mkdtemp(prefix="tpserve-prometheus-"))
        config = self.dir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: tpserve\n    static_configs:\n      - targets: ['{target}']\n")
        self.url = f"http://127.0.0.1:{free_port()}"
        self.process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address={self.url.removeprefix('http://')}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    def query(self, promql: str) -> list:
        """The instant query's result vector ([] when empty); raises while Prometheus is not up yet."""
        reply = json.loads(http_get(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"))
        assert reply["status"] == "success", reply
        return reply["data"]["result"]

    def value(self, promql: str) -> float:
        result = self.query(promql)
        assert len(result) == 1, f"{promql}: {result}"
        return float(result[0]["value"][1])

    def wait_for_scrape_after(self, instant: float, timeout: float = 90.0) -> None:
        """Waits until a scrape of the target taken after `instant` (Unix seconds) is stored."""
        deadline = time.monotonic() + timeout
        last_error = None
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stderr.read().decode()
            try:
                result = self.query('timestamp(up{job="tpserve"} == 1)')
                if result and float(result[0]["value"][1]) > instant:
                    return
            except (OSError, AssertionError) as e:  # not listening yet
                last_error = e
            time.sleep(0.2)  # polling an external server's state, bounded by the deadline
        pytest.fail(f"Prometheus stored no scrape after the requests within {timeout} s ({last_error})")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def test_prometheus_scrapes_request_counts(served):
    server, metrics_url = served
    prometheus = Prometheus(urllib.parse.urlparse(metrics_url).netloc)
    try:
        args = [str(TPSERVE), "batch", "--server", server.endpoint, "--max-tokens", str(MAX_TOKENS), "--ignore-eos"]
        for prompt in PROMPTS[:NUM_REQUESTS]:
            args += ["--prompt", prompt]
        batch = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert batch.returncode == 0, batch.stderr
        done = time.time()
        prometheus.wait_for_scrape_after(done)

        for histogram in ["e2e_request_latency_seconds", "time_to_first_token_seconds", "request_queue_time_seconds",
                          "request_prefill_time_seconds", "request_decode_time_seconds"]:
            assert prometheus.value(f"tpserve:{histogram}_count") == NUM_REQUESTS, histogram
            assert prometheus.value(f'tpserve:{histogram}_bucket{{le="+Inf"}}') == NUM_REQUESTS, histogram
        assert prometheus.value("tpserve:inter_token_latency_seconds_count") == NUM_REQUESTS * (MAX_TOKENS - 1)
        assert prometheus.value("tpserve:generation_tokens_total") == NUM_REQUESTS * MAX_TOKENS
        assert prometheus.value('tpserve:request_success_total{finished_reason="length"}') == NUM_REQUESTS
        assert prometheus.query("tpserve:request_failure_total") == []  # no failure series: none happened
        assert prometheus.value("tpserve:num_requests_running") == 0
        assert prometheus.value("tpserve:num_worker_groups") == 1
        # The engine steps: every one counted once in iteration_tokens_total and in the group's step time.
        steps = prometheus.value("tpserve:iteration_tokens_total_count")
        assert steps >= MAX_TOKENS
        assert prometheus.value("sum(tpserve:worker_step_time_seconds_count)") == steps
        assert 0 < prometheus.value("sum(tpserve:worker_allreduce_time_seconds_sum)") < \
            prometheus.value("sum(tpserve:worker_step_time_seconds_sum)")
        # vLLM's model_name label is on every series.
        labelled = prometheus.query(f'count({{__name__=~"tpserve:.*", {MODEL_NAME_LABEL}!=""}})')
        everything = prometheus.query('count({__name__=~"tpserve:.*"})')
        assert labelled and labelled[0]["value"][1] == everything[0]["value"][1]
    finally:
        prometheus.stop()


def test_promtool_finds_only_the_vllm_naming_choices(served):
    """promtool's lint is clean but for two rules vLLM's names break on purpose (kept so dashboards carry over):
    the `tpserve:` colon (promtool reserves colons for recording rules) and a histogram named *_total
    (vllm:iteration_tokens_total). Any other finding (missing HELP, non-base units, a counter without _total, a
    parse error) fails."""
    text = http_get(served[1])
    samples = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    # promtool lints the families that have samples (request_failure_total has none until a failure).
    families = [name for name in (line.split()[2] for line in text.splitlines() if line.startswith("# TYPE "))
                if name in samples or f"{name}_count" in samples]
    assert len(families) >= 19
    expected = {f"{name} metric names should not contain ':'" for name in families}
    expected.add('tpserve:iteration_tokens_total non-counter metrics should not have "_total" suffix')
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    findings = {line.strip() for line in (lint.stdout + lint.stderr).splitlines() if line.strip()}
    assert lint.returncode in (0, 3), lint.stdout + lint.stderr  # 3: lint findings, 1: an error
    assert findings == expected
    # The same text with the colon spelled as an underscore: promtool's only finding is the vLLM histogram name.
    renamed = text.replace("tpserve:", "tpserve_")
    lint = subprocess.run(["promtool", "check", "metrics"], input=renamed, capture_output=True, text=True, timeout=60)
    assert {line.strip() for line in (lint.stdout + lint.stderr).splitlines() if line.strip()} == \
        {'tpserve_iteration_tokens_total non-counter metrics should not have "_total" suffix'}


def test_metrics_http_endpoint_answers_only_metrics(served):
    base = served[1].removesuffix("/metrics")
    with urllib.request.urlopen(f"{base}/metrics") as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    with pytest.raises(urllib.error.HTTPError) as error:
        http_get(f"{base}/nothing")
    assert error.value.code == 404
