"""The nodes' own service account with GKE's node role only, used by every pool and by Autopilot, and the GKE
service agent's grant on the Secrets key."""

from __future__ import annotations

import uuid

import pytest

from core import names
from core.facts.gcp import ARTIFACT_REGISTRY_READER_ROLE, CLOUD_PLATFORM_SCOPE, STREAMING_CONSUMER_ROLE
from core.facts.privilege import NODE_ROLE_ALLOW_LIST, NODE_SERVICE_ACCOUNT_ROLES
from infra.identity import gke_service_agent, role_resource_name
from tests.conftest import COMBINATIONS, MODES
from tests.infra.conftest import depends_on

ACCOUNT = "gcp:serviceaccount/account:Account"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
REPOSITORY_MEMBER = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
KEY_MEMBER = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
KEY = "projects/my-keys-1/locations/us-central1/keyRings/gke/cryptoKeys/secrets"
NODE_EMAIL = "grpo-test-node-sa@offline.iam.gserviceaccount.com"
"""The account's email as the offline mocks compute it."""


def test_account_id_fits_iam_and_says_what_it_is():
    assert names.node_service_account_id("grpo-dev") == "grpo-dev-node-sa"
    assert names.node_service_account_id("g") == "g-node-sa"
    longest = names.node_service_account_id("g" * 22 + "-" + "x" * 17)
    assert longest == "g" * 22 + "-node-sa" and len(longest) == 30, "cut to 30 and no double hyphen"


def test_grant_names_and_the_service_agent():
    assert role_resource_name("grpo-dev", "roles/container.defaultNodeServiceAccount") == (
        "grpo-dev-node-sa-container-defaultNodeServiceAccount"
    )
    assert gke_service_agent("42") == "serviceAccount:service-42@container-engine-robot.iam.gserviceaccount.com"


def test_the_node_roles_are_gke_s_node_role_and_inside_the_documented_allow_list():
    assert NODE_SERVICE_ACCOUNT_ROLES == ("roles/container.defaultNodeServiceAccount",)
    assert set(NODE_SERVICE_ACCOUNT_ROLES) <= NODE_ROLE_ALLOW_LIST
    assert not any(role in NODE_ROLE_ALLOW_LIST for role in ("roles/editor", "roles/owner", "roles/storage.admin"))


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_one_node_account_with_exactly_the_node_role_non_authoritatively(infra_run, mode, gpu, storage):
    recording = infra_run(mode, gpu, storage)
    account = recording.one(ACCOUNT)
    assert account.inputs["accountId"] == "grpo-test-node-sa"
    assert account.inputs["project"] == "my-grpo-project"
    assert account.delete_before_replace is True
    assert depends_on(recording, account) == {"iam"}
    grants = recording.by_type(PROJECT_MEMBER)
    # the image is streamed by default (issue 33 item 4): the nodes also hold Service Usage Consumer, which image
    # streaming asks of a custom node account, and read the stack's remote repository
    assert sorted(grant.inputs["role"] for grant in grants) == sorted(
        [*NODE_SERVICE_ACCOUNT_ROLES, STREAMING_CONSUMER_ROLE]
    )
    readers = recording.by_type(REPOSITORY_MEMBER)
    assert [reader.inputs["role"] for reader in readers] == [ARTIFACT_REGISTRY_READER_ROLE]
    for grant in grants:
        assert grant.inputs["member"] == f"serviceAccount:{NODE_EMAIL}"
        assert grant.inputs["project"] == "my-grpo-project"
        assert grant.inputs["role"] in NODE_ROLE_ALLOW_LIST
    # Authoritative bindings or policies would drop the project's other members.
    types = {resource.type for resource in recording.resources}
    assert not types & {"gcp:projects/iAMBinding:IAMBinding", "gcp:projects/iAMPolicy:IAMPolicy"}
    # Nothing else is granted to the nodes' account: every IAM member naming it is one of these grants.
    naming_it = [r for r in recording.resources if r.inputs.get("member") == f"serviceAccount:{NODE_EMAIL}"]
    assert sorted(r.name for r in naming_it) == sorted(grant.name for grant in [*grants, *readers])
    assert recording.by_type(KEY_MEMBER) == []


def test_pulling_directly_the_node_account_holds_the_node_role_alone(infra_run):
    """`workload.imageSource: direct`: no remote repository, so neither its reader grant nor image streaming's."""
    recording = infra_run("standard", "h200", "gcs", workload={"imageSource": "direct"})
    grants = recording.by_type(PROJECT_MEMBER)
    assert sorted(grant.inputs["role"] for grant in grants) == list(NODE_SERVICE_ACCOUNT_ROLES)
    naming_it = [r for r in recording.resources if r.inputs.get("member") == f"serviceAccount:{NODE_EMAIL}"]
    assert sorted(r.name for r in naming_it) == sorted(grant.name for grant in grants)


@pytest.mark.parametrize("gpu,storage", [("b200", "gcs"), ("h200", "lustre")])
def test_every_standard_pool_and_the_default_pool_run_as_the_node_account(infra_run, gpu, storage):
    recording = infra_run("standard", gpu, storage)
    pools = recording.by_type(POOL)
    assert len(pools) == 2
    for pool in pools:
        assert pool.inputs["nodeConfig"]["serviceAccount"] == NODE_EMAIL, pool.name
        assert pool.inputs["nodeConfig"]["oauthScopes"] == [CLOUD_PLATFORM_SCOPE]
    cluster = recording.one(CLUSTER)
    assert cluster.inputs["nodeConfig"]["serviceAccount"] == NODE_EMAIL
    assert cluster.ignore_changes == ("nodeConfig",)
    assert "clusterAutoscaling" not in cluster.inputs


@pytest.mark.parametrize("gpu,storage", [("b200", "lustre"), ("h200", "gcs")])
def test_autopilot_nodes_run_as_the_node_account(infra_run, gpu, storage):
    recording = infra_run("autopilot", gpu, storage)
    cluster = recording.one(CLUSTER)
    defaults = cluster.inputs["clusterAutoscaling"]["autoProvisioningDefaults"]
    assert defaults == {"serviceAccount": NODE_EMAIL, "oauthScopes": [CLOUD_PLATFORM_SCOPE]}
    assert "nodeConfig" not in cluster.inputs
    assert recording.by_type(POOL) == []


@pytest.mark.parametrize("mode", MODES)
def test_the_secrets_key_is_granted_to_the_gke_service_agent_before_the_cluster_uses_it(infra_run, mode):
    recording = infra_run(mode, "h200", "gcs", cluster={"secretsKmsKey": KEY})
    grant = recording.one(KEY_MEMBER)
    assert grant.inputs == {
        "cryptoKeyId": KEY,
        "role": "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        "member": "serviceAccount:service-123456789012@container-engine-robot.iam.gserviceaccount.com",
    }
    assert depends_on(recording, grant) == {"container", "cloudresourcemanager"}, "the agent exists once GKE is on"
    cluster = recording.one(CLUSTER)
    assert cluster.inputs["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": KEY}
    assert grant.name in depends_on(recording, cluster)


@pytest.mark.parametrize("mode", MODES)
def test_without_a_key_secrets_keep_google_managed_encryption(infra_run, mode):
    assert "databaseEncryption" not in infra_run(mode, "b200", "gcs").one(CLUSTER).inputs


GUARDIAN_EMAIL = "grpo-test-guardian@offline.iam.gserviceaccount.com"
"""The guardian's Google service account's email as the offline mocks compute it."""

PARKING = {"storage": {"parkWhenIdle": True}}
"""A Lustre stack's change that lets the guardian park the run."""


def test_the_guardians_account_id_and_park_role_id_fit_iam_and_follow_the_instance():
    assert names.guardian_account_id("grpo-dev") == "grpo-dev-guardian"
    longest = names.guardian_account_id("g" * 20 + "-" + "x" * 9)
    assert longest == "g" * 20 + "-guardian" and len(longest) == 29, "no double hyphen"
    uid = "0b5c4f1e-9d2a-4c3b-8e7f-112233445566"
    assert names.park_role_id("grpo-dev", uid) == "grpoGkePark_grpo_dev_0b5c4f1e9d2a"
    role = names.park_role_id("c" * 80, uid)
    assert len(role) == 64 and role.endswith("_0b5c4f1e9d2a")
    assert names.park_role_id("grpo-dev", "11111111-0000-0000-0000-000000000000") != names.park_role_id("grpo-dev", uid)


@pytest.mark.parametrize("mode", MODES)
def test_a_parking_lustre_stack_gives_the_guardian_a_google_account_that_may_export_and_nothing_more(infra_run, mode):
    recording = infra_run(mode, "b200", "lustre", **PARKING)
    account = recording.one(ACCOUNT, "grpo-test-guardian")
    assert (account.inputs["accountId"], account.inputs["project"]) == ("grpo-test-guardian", "my-grpo-project")
    role = recording.one("gcp:projects/iAMCustomRole:IAMCustomRole")
    lustre = recording.one("gcp:lustre/instance:Instance")
    assert role.inputs["permissions"] == [
        "lustre.instances.exportData",
        "lustre.operations.get",
        "lustre.operations.list",
    ]
    offline_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"gcp:lustre/instance:Instance/{lustre.name}"))  # plan/mocks.py
    assert role.inputs["roleId"] == names.park_role_id("grpo-test", offline_uid)
    assert lustre.name in depends_on(recording, role)
    member = f"serviceAccount:{GUARDIAN_EMAIL}"
    naming_it = {r.type: r for r in recording.resources if r.inputs.get("member") == member}
    assert naming_it.keys() == {PROJECT_MEMBER, "gcp:storage/bucketIAMMember:BucketIAMMember"}
    assert naming_it[PROJECT_MEMBER].inputs["role"] == f"projects/my-grpo-project/roles/{role.inputs['roleId']}"
    bucket_grant = naming_it["gcp:storage/bucketIAMMember:BucketIAMMember"]
    assert bucket_grant.inputs["bucket"] == recording.one("gcp:storage/bucket:Bucket").inputs["name"]
    assert bucket_grant.inputs["role"] == "roles/storage.objectUser"
    link = recording.one("gcp:serviceaccount/iAMMember:IAMMember")
    assert link.inputs == {
        "serviceAccountId": f"projects/my-grpo-project/serviceAccounts/{GUARDIAN_EMAIL}",
        "role": "roles/iam.workloadIdentityUser",
        "member": "serviceAccount:my-grpo-project.svc.id.goog[grpo/grpo-guardian]",
    }
    assert recording.one(CLUSTER).name in depends_on(recording, link), "the workload pool exists once the cluster does"


@pytest.mark.parametrize(
    "storage,sections",
    [("lustre", {}), ("lustre", {"storage": {"parkWhenIdle": True, "parked": True, "keepOnDestroy": False}})],
)
def test_no_guardian_account_without_parking_or_while_parked(infra_run, storage, sections):
    recording = infra_run("standard", "h200", storage, **sections)
    assert [account.inputs["accountId"] for account in recording.by_type(ACCOUNT)] == ["grpo-test-node-sa"]
    assert recording.by_type("gcp:projects/iAMCustomRole:IAMCustomRole") == []
    assert recording.by_type("gcp:serviceaccount/iAMMember:IAMMember") == []
