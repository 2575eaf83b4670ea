"""Shared storage: bucket and workload-identity grant (gcs), or private service access and Lustre
(lustre); what is kept on destroy; what waits for what."""

from __future__ import annotations

import json
import re

import pulumi
import pytest

from core import names
from core.config.model import StackConfig
from core.names import lustre_names
from infra.storage import park_refusal, workload_principal
from plan.harness import run_values
from plan.mocks import FAKE_PROJECT_NUMBER
from tests.conftest import MODES, combination_values
from tests.infra.conftest import all_dependencies, depends_on

BUCKET = "gcp:storage/bucket:Bucket"
GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
PEERING = "gcp:servicenetworking/connection:Connection"
FIREWALL = "gcp:compute/firewall:Firewall"
LUSTRE = "gcp:lustre/instance:Instance"
NETWORK = "gcp:compute/network:Network"
CLUSTER_URN_SUFFIX = "gcp:container/cluster:Cluster::grpo-test"
PARKED_BUCKET = "grpo-test-parked-7b5ca2ad"
"""The parked bucket of the test stack (cluster grpo-test, project my-grpo-project)."""


def test_workload_principal_names_the_ray_service_account_in_its_namespace():
    assert workload_principal("p-123456", "42") == (
        "principal://iam.googleapis.com/projects/42/locations/global/workloadIdentityPools/"
        f"p-123456.svc.id.goog/subject/ns/{names.NAMESPACE}/sa/{names.RAY_SERVICE_ACCOUNT}"
    )


@pytest.mark.parametrize("prefix", ["grpo-dev", "grpo-nemo-rl-standard-b200", "a", "x" * 40])
def test_lustre_filesystem_is_at_most_eight_alphanumerics_derived_from_the_cluster(prefix):
    derived = lustre_names(prefix)
    assert re.fullmatch(r"[a-z][a-z0-9]{0,7}", derived.filesystem), derived.filesystem
    assert derived == lustre_names(prefix), "deterministic"
    assert derived.instance_id.startswith(prefix) and len(derived.instance_id) <= 63


def test_lustre_filesystem_drops_hyphens():
    assert lustre_names("grpo-dev").filesystem == "grpodev"
    assert lustre_names("grpo-nemo-rl").filesystem == "grponemo"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("keep", [True, False])
def test_bucket_is_uniform_hierarchical_and_kept_per_keep_on_destroy(infra_run, mode, keep):
    recording = infra_run(mode, "b200", "gcs", storage={"keepOnDestroy": keep})
    bucket = recording.one(BUCKET)
    inputs = bucket.inputs
    assert (inputs["name"], inputs["location"]) == ("my-grpo-project-grpo-test", "us-central1")
    assert inputs["uniformBucketLevelAccess"] is True
    assert inputs["hierarchicalNamespace"] == {"enabled": True}
    assert inputs["forceDestroy"] is (not keep)
    assert bucket.retain_on_delete is keep
    assert not any(resource.protect for resource in recording.resources), "protect would make destroy fail"
    assert not recording.by_type(LUSTRE) and not recording.by_type(ADDRESS)


RAY_GRANT = "my-grpo-project-grpo-test-ray-object-user"
GUARDIAN_GRANT = "my-grpo-project-grpo-test-guardian-object-user"


@pytest.mark.parametrize("mode", MODES)
def test_grants_give_object_user_to_the_ray_pods_and_the_guardian_through_workload_identity(infra_run, mode):
    recording = infra_run(mode, "h200", "gcs")
    principal = "principal://iam.googleapis.com/projects/{}/locations/global/workloadIdentityPools/my-grpo-project.svc.id.goog/subject/ns/grpo/sa/{}"
    for name, ksa in ((RAY_GRANT, "ray-grpo"), (GUARDIAN_GRANT, "grpo-guardian")):
        assert recording.one(GRANT, name).inputs == {
            "bucket": "my-grpo-project-grpo-test",
            "member": workload_principal("my-grpo-project", FAKE_PROJECT_NUMBER, ksa),
            "role": "roles/storage.objectUser",
        }
        assert recording.one(GRANT, name).inputs["member"] == principal.format(FAKE_PROJECT_NUMBER, ksa)
    without = infra_run(mode, "h200", "gcs", job={"recover": False})
    assert [grant.name for grant in without.by_type(GRANT)] == [RAY_GRANT]


def test_bucket_is_created_beside_the_cluster_and_only_the_grants_wait_for_it(infra_run):
    recording = infra_run("standard", "b200", "gcs")
    bucket = recording.one(BUCKET)
    assert depends_on(recording, bucket) == {"storage"}
    for name in (RAY_GRANT, GUARDIAN_GRANT):
        assert {"grpo-test", "my-grpo-project-grpo-test"} <= depends_on(recording, recording.one(GRANT, name))
    assert not any(urn.endswith(CLUSTER_URN_SUFFIX) for urn in all_dependencies(recording, bucket))


def test_a_configured_bucket_name_is_used(infra_run):
    recording = infra_run("standard", "b200", "gcs", storage={"bucket": "my-training-data"})
    assert recording.one(BUCKET).inputs["name"] == "my-training-data"
    assert {grant.inputs["bucket"] for grant in recording.by_type(GRANT)} == {"my-training-data"}


@pytest.mark.parametrize("mode", MODES)
def test_lustre_private_service_access_firewall_and_instance(infra_run, mode):
    recording = infra_run(mode, "b200", "lustre")
    network_id = "projects/my-grpo-project/global/networks/grpo-test-net"
    address = recording.one(ADDRESS)
    assert address.inputs == {
        "address": "10.0.64.0",
        "addressType": "INTERNAL",
        "name": "grpo-test-lustre-psa",
        "network": network_id,
        "prefixLength": 22,
        "project": "my-grpo-project",
        "purpose": "VPC_PEERING",
    }
    peering = recording.one(PEERING)
    assert peering.inputs == {
        "network": network_id,
        "reservedPeeringRanges": ["grpo-test-lustre-psa"],
        "service": "servicenetworking.googleapis.com",
    }
    firewall = recording.one(FIREWALL, "grpo-test-lustre-lnet")
    assert firewall.inputs["network"] == "grpo-test-net"
    assert firewall.inputs["sourceRanges"] == ["10.0.64.0/22"]
    assert firewall.inputs["allows"] == [{"ports": ["988"], "protocol": "tcp"}]
    instance = recording.one(LUSTRE)
    assert instance.inputs == {
        "capacityGib": "18000",
        "filesystem": "grpotest",
        "gkeSupportEnabled": False,
        "instanceId": "grpo-test-lustre",
        "location": "us-central1-b",
        "network": network_id,
        "perUnitStorageThroughput": "1000",
        "project": "my-grpo-project",
    }
    parked = recording.one(BUCKET)
    assert (parked.name, parked.inputs["location"], parked.inputs["forceDestroy"]) == (
        PARKED_BUCKET,
        "us-central1",
        False,
    )
    assert parked.inputs["hierarchicalNamespace"] == {"enabled": True}
    assert parked.inputs["publicAccessPrevention"] == "enforced"
    grant = recording.one(GRANT)
    assert grant.inputs == {
        "bucket": PARKED_BUCKET,
        "member": f"serviceAccount:service-{FAKE_PROJECT_NUMBER}@gcp-sa-lustre.iam.gserviceaccount.com",
        "role": "roles/storage.objectUser",
    }
    assert instance.urn in grant.depends_on, "the service agent exists once the project's first instance does"


def test_lustre_uses_the_legacy_port_below_the_default_port_floor(infra_run):
    recording = infra_run("standard", "h200", "lustre", cluster={"minVersion": "1.33.2-gke.1111000"})
    assert recording.one(FIREWALL, "grpo-test-lustre-lnet").inputs["allows"] == [{"ports": ["6988"], "protocol": "tcp"}]
    assert recording.one(LUSTRE).inputs["gkeSupportEnabled"] is True


@pytest.mark.parametrize("keep", [True, False])
def test_a_kept_lustre_instance_keeps_what_it_needs_to_stay_reachable(infra_run, keep):
    recording = infra_run("standard", "b200", "lustre", storage={"keepOnDestroy": keep})
    kept = {(r.type, r.name) for r in recording.resources if r.retain_on_delete}
    expected = {
        (LUSTRE, "grpo-test-lustre"),
        (ADDRESS, "grpo-test-lustre-psa"),
        (PEERING, "grpo-test-lustre-peering"),
        (NETWORK, "grpo-test-net"),
    }
    assert kept == (expected if keep else set()) | {(BUCKET, PARKED_BUCKET)}, "the parked bucket is always kept"
    assert not any(resource.protect for resource in recording.resources)


def test_lustre_is_created_beside_the_cluster_after_its_peering(infra_run):
    recording = infra_run("standard", "b200", "lustre")
    instance = recording.one(LUSTRE)
    assert depends_on(recording, instance) == {"lustre", "grpo-test-net", "grpo-test-lustre-peering"}
    assert not any(urn.endswith(CLUSTER_URN_SUFFIX) for urn in all_dependencies(recording, instance))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("keep", [True, False])
def test_destroy_deletes_lustre_then_its_connection_then_the_range_and_the_vpc(infra_run, mode, keep):
    """Destroy runs in reverse dependency order; a connection that is not kept removes its peering when
    a producer still holds it, so the VPC can be deleted after it."""
    recording = infra_run(mode, "b200", "lustre", storage={"keepOnDestroy": keep})
    instance, peering, address = recording.one(LUSTRE), recording.one(PEERING), recording.one(ADDRESS)
    vpc = recording.one(NETWORK, "grpo-test-net")
    volume = recording.one("kubernetes:core/v1:PersistentVolume")
    assert instance.urn in all_dependencies(recording, volume)
    assert peering.urn in all_dependencies(recording, instance)
    assert {address.urn, vpc.urn} <= all_dependencies(recording, peering)
    assert instance.urn not in all_dependencies(recording, peering)
    assert peering.inputs.get("deletionPolicy") == (None if keep else "REMOVE_PEERING")


PARKED = {"keepOnDestroy": False, "parked": True}
"""storage.parked on a Lustre stack whose instance is no longer kept on destroy."""


@pytest.mark.parametrize("mode", MODES)
def test_a_parked_stack_has_no_instance_nor_anything_mounting_it_and_keeps_the_rest(infra_run, mode):
    running = infra_run(mode, "b200", "lustre", storage={"keepOnDestroy": False})
    parked = infra_run(mode, "b200", "lustre", storage=PARKED)
    gone = {(r.type, r.name) for r in running.resources} - {(r.type, r.name) for r in parked.resources}
    assert {(kind, name) for kind, name in gone if not kind.startswith("grpo-gke:")} == {
        (LUSTRE, "grpo-test-lustre"),
        # what mounts it: the volume and its claim, the staging Job, the RayCluster
        ("kubernetes:core/v1:PersistentVolume", "grpo-data-volume"),
        ("kubernetes:core/v1:PersistentVolumeClaim", "grpo-data"),
        ("kubernetes:batch/v1:Job", "grpo-staging"),
        ("kubernetes:core/v1:ConfigMap", "grpo-staging-script"),
        ("kubernetes:ray.io/v1:RayCluster", "grpo"),
        # the run guardian (it mounts the claim) and the run's submission (it needs the RayCluster)
        ("kubernetes:apps/v1:Deployment", "grpo-guardian"),
        ("kubernetes:core/v1:ConfigMap", "grpo-guardian-code"),
        ("kubernetes:core/v1:ConfigMap", "grpo-guardian-settings"),
        ("kubernetes:core/v1:ServiceAccount", "grpo-guardian"),
        ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "grpo-guardian-nodes"),
        ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "grpo-guardian-nodes"),
        ("kubernetes:rbac.authorization.k8s.io/v1:Role", "grpo-guardian"),
        ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "grpo-guardian"),
        ("pulumi-python:dynamic:Resource", "grpo-job-submission"),
        # the import of a parked run into a new instance (jobs/runs/restore_provider.py)
        ("pulumi-python:dynamic:Resource", "restored-run"),
        # the guard the instance's deletion waits on (jobs/runs/park_guard.py)
        ("pulumi-python:dynamic:Resource", "park-guard"),
    }
    assert not {(r.type, r.name) for r in parked.resources} - {(r.type, r.name) for r in running.resources}
    assert parked.one(BUCKET).name == PARKED_BUCKET and parked.one(GRANT).inputs["bucket"] == PARKED_BUCKET
    assert parked.outputs["parkedBucket"] == f"gs://{PARKED_BUCKET}"
    assert "lustreMountPoint" not in parked.outputs and "jobRun" not in parked.outputs


def test_parking_without_the_marker_is_refused_naming_the_key_and_the_command():
    values = combination_values("standard", "b200", "lustre", storage=PARKED)
    with pytest.raises(pulumi.RunError) as refused:
        run_values(values, park_marker=None)
    assert str(refused.value) == (
        f"grpo-gke:storage.parked is true but gs://{PARKED_BUCKET}/parked/marker.json does not exist: the run is not"
        " parked, and deleting the Lustre instance would lose it; run python -m jobs park --stack test first (or set"
        " storage.parked false)"
    )


def test_parking_after_the_run_came_back_is_refused_until_it_is_parked_again():
    values = combination_values("standard", "b200", "lustre", storage=PARKED)
    with pytest.raises(Exception, match="says 'restored', not 'parked'"):
        run_values(values, park_marker='{"state": "restored"}')


def test_parking_a_config_whose_spec_changed_since_the_park_is_refused_naming_both_runs(tmp_path):
    """The project's park (incluster/park.py park_run on the Lustre and bucket stand-ins) parked the run of the standard
    B200 Lustre stack; `pulumi up` with storage.parked true passes for that config, and is refused, naming both runs,
    for the same stack with its learning rate changed since (another spec hash: a run the park did not export)."""
    from jobs.spec.training import training_spec
    from tests.conftest import combination_config
    from tests.jobs.runs.test_park_guard import UNKEPT, park

    bucket = tmp_path / "bucket"
    instance = "projects/my-grpo-project/locations/us-central1-b/instances/grpo-test-lustre"
    park({"bucket": PARKED_BUCKET, "instance": instance}, tmp_path / "lustre", bucket)
    marker = (bucket / names.PARK_MARKER).read_text()
    run = training_spec(combination_config("standard", "b200", "lustre", **UNKEPT)).run
    assert json.loads(marker)["run"] == run
    run_values(combination_values("standard", "b200", "lustre", storage=PARKED), park_marker=marker)
    edited = {"learningRate": 2e-6}
    other = training_spec(combination_config("standard", "b200", "lustre", **UNKEPT, grpo=edited)).run
    with pytest.raises(pulumi.RunError) as refused:
        run_values(combination_values("standard", "b200", "lustre", storage=PARKED, grpo=edited), park_marker=marker)
    assert str(refused.value) == (
        f"grpo-gke:storage.parked is true but gs://{PARKED_BUCKET}/parked/marker.json parked {run} of stack 'test',"
        f" and this config names the run {other} (its spec changed since the park): the park does not speak for"
        f" {other}, and deleting the Lustre instance could lose it; undo the config's change, or run python -m jobs"
        " park --stack test again with this config (or set storage.parked false)"
    )


def test_park_refusal_reads_the_marker():
    config = StackConfig.model_validate(
        {"stack": "s", "project": "my-grpo-project", "region": "us-central1", "zone": "us-central1-b",
         "gpu": {"type": "h200", "nodes": 1}, "storage": {"type": "lustre", "capacityGib": 9000, "throughput": 1000},
         "workload": {"framework": "verl", "model": "Qwen/Qwen2.5-0.5B-Instruct", "dataset": "gsm8k"}}
    )  # fmt: skip
    # A marker `python -m jobs park` wrote passes (tests/jobs/test_cli_park.py); here each field it is judged by.
    run = "s-0123456789"
    parked = {"state": "parked", "stack": "s", "run": run, "runs": [run, "s-other"]}
    assert park_refusal(json.dumps(parked), config, run) is None
    assert "says None" in park_refusal("not json", config, run)
    assert "says None" in park_refusal("[]", config, run)
    for state in ("parking", "stale", "restored"):
        assert f"says {state!r}, not 'parked'" in park_refusal(json.dumps({**parked, "state": state}), config, run)
    assert park_refusal(json.dumps({**parked, "stack": "t", "run": "t-0123456789"}), config, run).startswith(
        "grpo-gke:storage.parked is true but gs://grpo-s-parked-7b5ca2ad/parked/marker.json parked t-0123456789 of"
        " stack 't', not a run of 's': deleting the Lustre instance would lose this stack's run;"
    )
    assert "parked sx-0123456789 of stack 's'" in park_refusal(
        json.dumps({**parked, "run": "sx-0123456789"}), config, run
    )
    assert "does not list s-0123456789 among the runs it exported" in park_refusal(
        json.dumps({**parked, "runs": ["s-other"]}), config, run
    )
    assert park_refusal(None, config, run).endswith(
        "; run python -m jobs park --stack s first (or set storage.parked false)"
    )
    parking = config.model_copy(update={"storage": config.storage.model_copy(update={"park_when_idle": True})})
    assert park_refusal(None, parking, run).endswith(
        "; run python -m jobs park --stack s or wait for the guardian's parked entry (python -m jobs status --stack s)"
        " first (or set storage.parked false)"
    )


def test_the_run_is_imported_back_before_anything_mounts_the_instance(infra_run):
    recording = infra_run("standard", "b200", "lustre")
    restored = recording.one("pulumi-python:dynamic:Resource", "restored-run")
    assert depends_on(recording, restored) >= {
        "grpo-test-lustre",
        "grpo-test-lustre-lnet",
        f"{PARKED_BUCKET}-lustre-agent",
    }
    assert restored.inputs["bucket"] == PARKED_BUCKET
    assert restored.inputs["instance"] == "projects/my-grpo-project/locations/us-central1-b/instances/grpo-test-lustre"
    volume = recording.one("kubernetes:core/v1:PersistentVolume")
    assert restored.urn in volume.depends_on, "the claim, and so every pod mounting it, waits for the import"
    gcs = infra_run("standard", "b200", "gcs")
    assert not [r for r in gcs.by_type("pulumi-python:dynamic:Resource") if r.name == "restored-run"]
