"""The Kubernetes manifests in deploy/k8s, validated offline: built-in kinds against Kubernetes' own OpenAPI
schemas (the kubernetes-validate package, strict: unknown fields are errors), the LeaderWorkerSet custom
resource against deploy/k8s/schema/leaderworkerset-v1.json, and its leader and worker pod templates against
Kubernetes' PodTemplate schema. The checks are shown to fail on broken copies of the same manifests."""
import copy
import json
import pathlib

import jsonschema
import kubernetes_validate
import pytest
import yaml

K8S = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "k8s"
KUBERNETES_VERSION = "1.30"
LWS_SCHEMA = json.loads((K8S / "schema" / "leaderworkerset-v1.json").read_text())


def documents():
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


def validate(doc):
    if doc["kind"] != "LeaderWorkerSet":
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        return
    jsonschema.validate(doc, LWS_SCHEMA)
    group = doc["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod_template = {"apiVersion": "v1", "kind": "PodTemplate",
                        "metadata": {"name": f"{doc['metadata']['name']}-{role}"}, "template": group[role]}
        kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)


DOCS = list(documents())


@pytest.mark.parametrize("name,doc", DOCS, ids=[f"{n}:{d['kind']}/{d['metadata']['name']}" for n, d in DOCS])
def test_manifest_is_valid(name, doc):
    validate(doc)


def test_every_role_is_deployed():
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in DOCS}
    for expected in [("Deployment", "tpserve-coordinator"), ("Deployment", "tpserve-gateway"),
                     ("StatefulSet", "tpserve-worker"), ("LeaderWorkerSet", "tpserve-group"),
                     ("LeaderWorkerSet", "tpserve-group-gpu")]:
        assert expected in kinds


def test_worker_groups_recreate_whole_groups():
    """MPI cannot heal a communicator: a lost rank must take its whole group down."""
    for _, doc in DOCS:
        if doc["kind"] == "LeaderWorkerSet":
            assert doc["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"


def test_gpu_group_requests_one_gpu_per_rank_and_runs_cuda():
    doc = next(d for _, d in DOCS if d["metadata"]["name"] == "tpserve-group-gpu")
    group = doc["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        (container,) = group[role]["spec"]["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "--device cuda" in group["leaderTemplate"]["spec"]["containers"][0]["args"][0]


def broken(kind, mutate):
    doc = copy.deepcopy(next(d for _, d in DOCS if d["kind"] == kind))
    mutate(doc)
    return doc


@pytest.mark.parametrize("kind,mutate", [
    ("Deployment", lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolicy=3)),
    ("Deployment", lambda d: d["spec"]["template"]["spec"]["containers"][0].update(unknownField=1)),
    ("LeaderWorkerSet", lambda d: d["spec"]["leaderWorkerTemplate"].update(size="two")),
    ("LeaderWorkerSet", lambda d: d["spec"]["leaderWorkerTemplate"].update(restartPolicy="Always")),
    ("LeaderWorkerSet", lambda d: d["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
     .update(volumeMounts=[{"name": "models"}])),
])
def test_broken_manifest_is_refused(kind, mutate):
    with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError)):
        validate(broken(kind, mutate))
