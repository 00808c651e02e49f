"""Fault injection against a real `tpserve serve --tp 2` (coordinator, mpirun worker group, supervisor):
while several requests stream (greedy and seeded), one rank is killed (SIGKILL) or stopped (SIGSTOP). The
group is lost (heartbeats), exits, is relaunched by `tpserve serve`, and the coordinator replays the lost
requests on it: every request must finish without an error, with exactly the ids of an uninterrupted run
(tpserve-run on one rank, an independent reference), 0 KV blocks in use afterwards, health ok again, and no
process of the lost group left behind. The same holds when the network link between the two hosts of a
group is cut (network namespaces, deploy/netns_hosts.py), with the leader on either side of the cut; there
the test is the group's supervisor. Every wait is on observable state with a deadline.
"""
import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List

import pytest
import tpserve

from client_testing import (alive, group_ranks, run_ids, start_coordinator, start_group, wait_for, wait_until_idle,
                            worker_ranks)
from conftest import BUILD, MODEL, REPO, TPSERVE, assert_no_process_left, free_port, start_server

sys.path.insert(0, str(REPO / "deploy"))
import netns_hosts  # noqa: E402  (deploy/netns_hosts.py: the two namespace "hosts")

MAX_TOKENS = 40
# (prompt, sampling params): greedy and seeded, as the reference is run with the same flags.
REQUESTS = [
    ("The capital of France is", {}),
    ("Once upon a time, in a small village,", {"temperature": 0.9, "seed": 7}),
    ("The three laws of thermodynamics are", {}),
    ("My favourite recipe for bread starts with", {"temperature": 0.7, "top_p": 0.9, "seed": 1234}),
]


def reference_flags(params: dict) -> List[str]:
    flags = []
    for name, value in params.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    return flags


@pytest.fixture(scope="module")
def references() -> List[List[int]]:
    return [run_ids("--prompt", prompt, "--max-tokens", str(MAX_TOKENS), *reference_flags(params))
            for prompt, params in REQUESTS]


def serving_group(server, lost=()) -> Dict[int, int]:
    """{rank: pid} of a whole group of two ranks none of which is in `lost`; {} while there is none."""
    ranks = worker_ranks(server)
    return ranks if len(ranks) == 2 and not set(ranks.values()) & set(lost) else {}


class Streams:
    """The REQUESTS streaming at once, one client and thread each."""

    def __init__(self, endpoint: str, **client_args):
        self.client_args = client_args  # e.g. keys_dir for a coordinator behind CURVE
        self.ids: List[List[int]] = [[] for _ in REQUESTS]
        self.finishes: List = [None] * len(REQUESTS)
        self.errors: List = [None] * len(REQUESTS)
        self.token_times: List[List[float]] = [[] for _ in REQUESTS]
        self.threads = [threading.Thread(target=self._run, args=(endpoint, i)) for i in range(len(REQUESTS))]
        for t in self.threads:
            t.start()

    def _run(self, endpoint: str, i: int):
        prompt, params = REQUESTS[i]
        try:
            with tpserve.Client(endpoint, timeout=120, **self.client_args) as client:
                with client.stream(prompt, max_tokens=MAX_TOKENS, **params) as stream:
                    for chunk in stream:
                        self.ids[i].extend(chunk.token_ids)
                        self.token_times[i].append(time.monotonic())
                    self.finishes[i] = stream.result.samples[0].finish
        except Exception as e:  # the assertion below reports it
            self.errors[i] = e

    def min_tokens(self) -> int:
        return min(len(ids) for ids in self.ids)

    def join(self, timeout: float):
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self.threads), "a request did not finish in time"


def check_streams(streams: Streams, references):
    assert streams.errors == [None] * len(REQUESTS)
    assert streams.ids == references
    assert all(f.num_replays <= 3 for f in streams.finishes)


def check_service(server, lost_pids: List[int], **client_args):
    """Health ok again, nothing running and 0 KV blocks in use, the lost ranks gone."""
    with tpserve.Client(server.endpoint, timeout=30, **client_args) as client:
        wait_for(lambda: client.health().ok, 60, "health ok after the fault")
        stats = wait_until_idle(client.stats, timeout=30)
        assert stats.blocks_used == 0
        assert stats.num_replays >= 1
    wait_for(lambda: not any(alive(pid) for pid in lost_pids), 15, "the lost group's ranks to exit")


@pytest.fixture
def server():
    s = start_server("--max-restarts", "10", http=False)
    yield s
    for pid in worker_ranks(s).values():  # a rank left stopped would keep its job alive
        os.kill(pid, signal.SIGCONT)
    assert s.stop() == 0
    assert_no_process_left(s)


@pytest.mark.parametrize("rank,sig", [(1, signal.SIGKILL), (0, signal.SIGKILL), (1, signal.SIGSTOP),
                                      (0, signal.SIGSTOP)],
                         ids=["kill-follower", "kill-leader", "stop-follower", "stop-leader"])
def test_lost_rank_is_replayed_with_identical_ids(server, references, rank, sig):
    ranks = wait_for(lambda: serving_group(server), 30, "two ranks")
    streams = Streams(server.endpoint)
    wait_for(lambda: streams.min_tokens() >= 3, 60, "every request streaming")
    os.kill(ranks[rank], sig)
    streams.join(90)
    try:
        check_streams(streams, references)
        assert any(f.num_replays == 1 for f in streams.finishes), [f.num_replays for f in streams.finishes]
        check_service(server, list(ranks.values()))
    finally:
        for pid in ranks.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_random_faults_under_load(server, references):
    """Three faults (random kind, rank and moment) while requests stream, each once the relaunched group
    serves again, with a new round of the requests whenever the last one has ended; every request of every
    round still ends with the reference ids (at most 3 replays each)."""
    rng = random.Random(int(os.environ.get("TPSERVE_FAULT_SEED", "11")))
    lost: List[int] = []
    rounds = [Streams(server.endpoint)]
    tokens = lambda: sum(len(ids) for ids in rounds[-1].ids)
    ended = lambda: all(not t.is_alive() for t in rounds[-1].threads)
    try:
        for _ in range(3):
            ranks = wait_for(lambda: serving_group(server, lost), 60, "the relaunched group")
            if ended():
                rounds.append(Streams(server.endpoint))
            target = tokens() + rng.randint(1, 8)  # a random moment: after a few more tokens
            wait_for(lambda: tokens() >= target or ended(), 60, "tokens before the fault")
            os.kill(ranks[rng.choice([0, 1])], rng.choice([signal.SIGKILL, signal.SIGSTOP]))
            lost += list(ranks.values())
        for streams in rounds:
            streams.join(120)
            check_streams(streams, references)
        check_service(server, lost)
    finally:
        for pid in lost:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_relaunch_waits_its_backoff_and_gives_up_past_max_restarts():
    """`tpserve serve --max-restarts 1 --restart-backoff-ms 4000`: the group killed once comes back, but not
    before its 4 s backoff (the group exits ~1.5 s after the kill, so a relaunch without the backoff would serve
    within ~3 s); killed again, it is not relaunched: the coordinator drains, serve exits 1, nothing is left."""
    server = start_server("--max-restarts", "1", "--restart-backoff-ms", "4000", http=False)
    try:
        ranks = wait_for(lambda: serving_group(server), 30, "two ranks")
        killed = time.monotonic()
        os.kill(ranks[1], signal.SIGKILL)
        relaunched = wait_for(lambda: serving_group(server, ranks.values()), 60, "the relaunched group")
        assert time.monotonic() - killed >= 4.0
        with tpserve.Client(server.endpoint, timeout=30) as client:
            wait_for(lambda: client.health().ok, 60, "health ok after the relaunch")
        os.kill(relaunched[1], signal.SIGKILL)
        assert server.process.wait(timeout=60) == 1
        assert_no_process_left(server)
    finally:
        if server.process.poll() is None:
            os.killpg(server.process.pid, signal.SIGKILL)


def test_lost_groups_requests_finish_on_a_group_of_another_tp_degree(references):
    """A standalone coordinator with two data-parallel groups, TP 2 and TP 1, the requests spread over both; a
    rank of the TP-2 group is killed while they stream. The coordinator moves that group's requests to the TP-1
    group at once (nobody relaunches anything): they finish there after 1 replay with the ids of the
    uninterrupted TP-1 reference, since logits are bitwise the same at every TP degree; the others are
    untouched."""
    port, worker_port = free_port(), free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    coordinator = start_coordinator(port, worker_port)
    groups = [start_group(2, worker_port, "--threads", "1"), start_group(1, worker_port, "--threads", "1")]
    try:
        with tpserve.Client(endpoint, timeout=30) as probe:
            wait_for(lambda: probe.health().num_worker_groups == 2, 120, "both groups to register")
            doomed = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(group_ranks(groups[0])), 30, "two ranks")
            streams = Streams(endpoint)
            wait_for(lambda: streams.min_tokens() >= 3, 60, "every request streaming")
            os.kill(doomed[1], signal.SIGKILL)
            streams.join(120)
            check_streams(streams, references)  # tpserve-run on one rank
            replays = [f.num_replays for f in streams.finishes]
            assert 1 in replays and set(replays) <= {0, 1}, replays
            assert groups[0].wait(timeout=30) != 0  # the lost group exited on its own, non-zero
            stats = wait_until_idle(probe.stats, timeout=30)
            assert stats.blocks_used == 0 and stats.num_worker_groups == 1 and probe.health().ok
    finally:
        coordinator.send_signal(signal.SIGTERM)  # drains, then shuts the groups down
        coordinator.wait(timeout=60)
        for group in groups:
            try:
                group.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(group.pid, signal.SIGKILL)
                raise


class NetnsCluster:
    """A standalone coordinator and clients on host A, a worker group of two ranks over the link A-B (rank 0,
    the leader, on `leader`), the test as the group's supervisor (like LeaderWorkerSet's RecreateGroup):
    deploy/netns_hosts.py. The coordinator listens beyond loopback, so behind CURVE keys."""

    def __init__(self, hosts, keys: str):
        self.hosts, self.keys = hosts, keys
        port, worker_port = free_port(), free_port()  # on A: this thread is there
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.worker_endpoint = f"tcp://{netns_hosts.ADDR_A}:{worker_port}"
        self.coordinator = start_coordinator(port, worker_port, "--host", "0.0.0.0", "--keys", keys)
        self.group = None

    def start_group(self, leader: str) -> Dict[int, int]:
        """Launches the group and returns {rank: pid} once the coordinator counts it."""
        self.group = self.hosts.start_group(2, leader, BUILD / "worker" / "tpserve-worker", "--model", str(MODEL),
                                            "--coordinator", self.worker_endpoint, "--keys", self.keys,
                                            "--threads", "1")
        wait_for(lambda: self.group.poll() is not None or self.healthy(), 120, "the group to register")
        assert self.group.poll() is None, f"the group exited with {self.group.returncode} before it registered"
        return wait_for(lambda: (lambda r: r if len(r) == 2 else None)(self.hosts.ranks()), 30, "two ranks")

    def healthy(self) -> bool:
        with tpserve.Client(self.endpoint, timeout=5, keys_dir=self.keys) as client:
            try:
                return client.health().ok
            except tpserve.TpserveError:
                return False

    def stop(self) -> None:
        """SIGTERM drains the coordinator, which shuts the group down; whatever is left is killed."""
        self.coordinator.send_signal(signal.SIGTERM)
        self.coordinator.wait(timeout=60)
        if self.group is not None:
            try:
                self.group.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.group.pid, signal.SIGKILL)
                self.group.wait()


@pytest.fixture
def netns_cluster(tmp_path):
    if not netns_hosts.available():
        pytest.skip("network namespaces need root, iproute2 and mpirun")
    keys = str(tmp_path / "keys")
    subprocess.run([str(TPSERVE), "keys", "init", keys], check=True, capture_output=True, timeout=30)
    try:
        hosts = netns_hosts.TwoHosts.create("tpf")
    except subprocess.CalledProcessError as e:  # e.g. a container without CAP_SYS_ADMIN: as netns-test.sh, skip
        pytest.skip(f"cannot make network namespaces here: {e.stderr.decode(errors='replace').strip()}")
    try:
        with hosts.entered("a"):
            cluster = NetnsCluster(hosts, keys)
            try:
                yield cluster
            finally:
                cluster.stop()
        # Nothing of the lost or the last group is left on either host (ranks, Open MPI daemons).
        wait_for(lambda: not hosts.pids("a") and not hosts.pids("b"), 30, "every process on both hosts to exit")
    finally:
        hosts.teardown()


@pytest.mark.parametrize("leader", ["a", "b"], ids=["cut-follower", "cut-leader"])
def test_cut_link_is_replayed_with_identical_ids(netns_cluster, references, leader):
    """The link between the two hosts of a group goes down while requests stream. cut-follower: the leader sits
    with the coordinator on A and loses its follower on B; cut-leader: the leader is on B and loses both the
    coordinator and its follower. Either way the coordinator stops counting the group (bounded: liveness, not a
    TCP timeout), every rank exits, and once the link is back the relaunched group finishes every request with
    the ids of an uninterrupted run."""
    cluster = netns_cluster
    ranks = cluster.start_group(leader)
    streams = Streams(cluster.endpoint, keys_dir=cluster.keys)
    wait_for(lambda: streams.min_tokens() >= 3, 60, "every request streaming")
    cut_at = time.monotonic()
    cluster.hosts.cut()
    wait_for(lambda: not cluster.healthy(), 15, "the coordinator to stop counting the group")
    detection = time.monotonic() - cut_at
    wait_for(lambda: not any(alive(pid) for pid in ranks.values()), 20, "every rank of the cut group to exit")
    # mpirun exits non-zero by itself when its out-of-band keepalives give up on the unreachable host first; a
    # kill message it sent there before that waits on TCP retransmissions (minutes): then the supervisor ends
    # the job whose ranks are gone (in Kubernetes the leader pod's liveness probe, deploy/k8s/).
    exit_code = netns_hosts.end_job(cluster.group, grace=10)
    assert exit_code is None or exit_code != 0
    cluster.hosts.restore()
    cluster.start_group(leader)
    streams.join(120)
    check_streams(streams, references)
    assert any(f.num_replays == 1 for f in streams.finishes), [f.num_replays for f in streams.finishes]
    check_service(cluster, list(ranks.values()), keys_dir=cluster.keys)
    print(f"{leader}: the coordinator stopped counting the group {detection:.2f} s after the cut")
