"""The plan's security block: control plane, Ray head, node and workload identities, encryption, warnings."""

from __future__ import annotations

from jobs.spec.load import load_config
from plan.security import security_summary, workload_identity
from tests.conftest import combination_values
from tests.core.test_config import OPEN_CONTROL_PLANE

KEY = "projects/my-keys-1/locations/us-central1/keyRings/gke/cryptoKeys/secrets"
HEAD = (
    "  ray head: ports 6379 (gcs-server), 8265 (dashboard), 10001 (client) of grpo/grpo-head-svc only from the"
    " RayCluster's own pods (ray-cluster-internal); 8265 also from the run guardian"
    " (app.kubernetes.io/name=grpo-guardian) and kube-system's konnectivity agents (k8s-app=konnectivity-agent),"
    " the path of the API server's service proxy (ray-head-dashboard); every other pod is refused"
    " (default-deny-ingress); users reach the dashboard through the service proxy"
)


def block(mode: str, storage: str, **cluster) -> str:
    """The security block of one combination with these cluster keys."""
    return security_summary(load_config(combination_values(mode, "h200", storage, cluster=cluster), (), "test"))


def test_an_open_standard_gcs_stack():
    assert block("standard", "gcs") == "\n".join(
        [
            "Security:",
            "  control plane: public IP endpoint from any address (a Google identity with cluster access is still"
            " needed)",
            HEAD,
            "  nodes: grpo-test-node-sa@my-grpo-project.iam.gserviceaccount.com with"
            " roles/container.defaultNodeServiceAccount, roles/artifactregistry.reader on the stack's remote"
            " repositories and roles/serviceusage.serviceUsageConsumer on project my-grpo-project (image streaming"
            " from them); Shielded GKE Nodes with secure boot and integrity monitoring",
            "  workloads: Kubernetes service accounts grpo/ray-grpo and grpo/grpo-guardian through workload identity,"
            " roles/storage.objectUser on bucket my-grpo-project-grpo-test only",
            "  encryption: Secrets with Google-managed keys at rest; grpo-gke:cluster.secretsKmsKey adds a Cloud KMS key",
            f"  warning: {OPEN_CONTROL_PLANE}",
        ]
    )


def test_a_closed_autopilot_lustre_stack_with_its_own_key():
    text = block("autopilot", "lustre", authorizedNetworks=["203.0.113.0/24"], dnsEndpoint=True, secretsKmsKey=KEY)
    assert text == "\n".join(
        [
            "Security:",
            "  control plane: DNS endpoint for Google identities with container.clusters.connect; its public IP"
            " endpoint admits 203.0.113.0/24 only",
            HEAD,
            "  nodes: grpo-test-node-sa@my-grpo-project.iam.gserviceaccount.com with"
            " roles/container.defaultNodeServiceAccount, roles/artifactregistry.reader on the stack's remote"
            " repositories and roles/serviceusage.serviceUsageConsumer on project my-grpo-project (image streaming"
            " from them); Autopilot's Shielded GKE Nodes with secure boot",
            "  workloads: Kubernetes service accounts grpo/ray-grpo and grpo/grpo-guardian through workload identity,"
            " no Google role (Managed Lustre is reached over the VPC)",
            f"  encryption: Secrets at the application layer with {KEY} (roles/cloudkms.cryptoKeyEncrypterDecrypter"
            " to the GKE service agent)",
        ]
    )


def test_a_lustre_stack_that_parks_names_the_guardians_google_account_and_its_two_grants():
    values = combination_values("standard", "h200", "lustre", storage={"parkWhenIdle": True})
    config = load_config(values, (), "test").config
    workloads = workload_identity(config)
    assert workloads == (
        "Kubernetes service accounts grpo/ray-grpo and grpo/grpo-guardian through workload identity, no Google role"
        " (Managed Lustre is reached over the VPC); to park the run, grpo/grpo-guardian acts as"
        " grpo-test-guardian@my-grpo-project.iam.gserviceaccount.com with a custom role of"
        " lustre.instances.exportData and lustre.operations.get and lustre.operations.list alone on project"
        " my-grpo-project (no narrower grant exists: docs/security.md), so it may export every Managed Lustre instance"
        f" of the project into any bucket the project's Lustre service agent may write (this stack grants it bucket"
        f" {config.parked_bucket_name}) and read every Lustre operation there, and roles/storage.objectUser on bucket"
        f" {config.parked_bucket_name} only"
    )
    parked = {"parkWhenIdle": True, "parked": True, "keepOnDestroy": False}
    parked_config = load_config(combination_values("standard", "h200", "lustre", storage=parked), (), "test").config
    assert workload_identity(parked_config).endswith("no Google role (Managed Lustre is reached over the VPC)")


def test_control_plane_lines_for_each_setting():
    assert "  control plane: public IP endpoint from 198.51.100.7/32 only\n" in block(
        "standard", "gcs", authorizedNetworks=["198.51.100.7/32"]
    )
    dns_only = (
        "  control plane: DNS endpoint for Google identities with container.clusters.connect; its public IP"
        " endpoint admits no one\n"
    )
    assert dns_only in block("standard", "gcs", dnsEndpoint=True)


def test_make_plan_prints_the_block_and_the_warning(shipped_plan_command):
    """As the user runs it: exit 0, the block after the summary, the warning once in the whole output
    (issue 21 item 7: not again on stderr)."""
    result = shipped_plan_command("dev").result
    assert result.returncode == 0, result.stderr
    *security, wrote = result.stdout[result.stdout.index("Security:") :].rstrip("\n").splitlines()
    assert wrote.startswith("Wrote plan.json, "), "the files' place stays the last line"
    assert security[0] == "Security:" and security[-1] == f"  warning: {OPEN_CONTROL_PLANE}"
    assert [line.split(":", 1)[0] for line in security[1:-1]] == [
        "  control plane",
        "  ray head",
        "  nodes",
        "  workloads",
        "  encryption",
    ]
    assert result.stderr == ""
    assert result.stdout.count(OPEN_CONTROL_PLANE) == 1


def test_an_authorized_network_of_any_address_keeps_the_open_endpoint_warning():
    """Issue 34 item 4: `authorizedNetworks: [0.0.0.0/0]` admits every address as an empty list does, so the block
    says "any address" and warns; a /32 beside it changes nothing, a narrow range alone neither says nor warns it."""
    warning = (
        "  warning: grpo-gke:cluster.authorizedNetworks holds 0.0.0.0/0: the control plane's public IP endpoint"
        " accepts connections from any address (each request still needs Google credentials); list only the CIDRs"
        " of the machines that run pulumi and the job CLI"
    )
    for networks in (["0.0.0.0/0"], ["198.51.100.7/32", "0.0.0.0/0"]):
        text = block("standard", "gcs", authorizedNetworks=networks)
        assert (
            "  control plane: public IP endpoint from any address (0.0.0.0/0; a Google identity with cluster access is"
            " still needed)\n"
        ) in text
        assert text.endswith(f"\n{warning}") and text.count("warning:") == 1
    narrow = block("standard", "gcs", authorizedNetworks=["198.51.100.7/32"])
    assert "any address" not in narrow and "warning:" not in narrow


def test_a_gated_model_without_hf_token_is_warned_before_up():
    """Issue 34 item 4: a meta-llama model (gated on the Hub, core/facts/job.py GATED_MODEL_OWNERS) without
    grpo-gke:hfToken is a warning of the plan (and of `pulumi up`, which logs the same list) before anything is created;
    with the token, or with the shipped Qwen model, none."""
    from tests.conftest import SECRET_TOKEN, with_secrets

    llama = {"model": "meta-llama/Llama-3.1-8B-Instruct"}
    warning = (
        "  warning: grpo-gke:hfToken is not set and meta-llama/Llama-3.1-8B-Instruct needs it: meta-llama's"
        " repositories on the Hugging Face Hub are gated (access requests, huggingface.co/docs/hub/models-gated);"
        " without it the staging Job fails minutes into pulumi up. Request access on the model's page, then: pulumi"
        " config set --secret grpo-gke:hfToken hf_..."
    )
    values = combination_values("standard", "h200", "gcs", workload=llama, cluster={"dnsEndpoint": True})
    assert security_summary(load_config(values, (), "test")).endswith(f"\n{warning}")
    with_token = security_summary(load_config(*with_secrets(values, SECRET_TOKEN), "test"))
    qwen = security_summary(
        load_config(combination_values("standard", "h200", "gcs", cluster={"dnsEndpoint": True}), (), "test")
    )
    assert "warning:" not in with_token and "warning:" not in qwen


def test_a_gemma_model_without_hf_token_is_warned_too():
    """Issue 34 item 4: Google's Gemma repositories are gated as Meta's are (core/facts/job.py GATED_MODEL_OWNERS:
    their cards' extra_gated_heading); another owner's model named gemma is not."""
    from tests.conftest import SECRET_TOKEN, with_secrets

    gemma = combination_values("standard", "h200", "gcs", workload={"model": "google/gemma-2-9b-it"},
                               cluster={"dnsEndpoint": True})  # fmt: skip
    warning = (
        "  warning: grpo-gke:hfToken is not set and google/gemma-2-9b-it needs it: Google's Gemma repositories on the"
        " Hugging Face Hub are gated (its usage license is accepted on the model's page,"
        " huggingface.co/docs/hub/models-gated); without it the staging Job fails minutes into pulumi up. Request"
        " access on the model's page, then: pulumi config set --secret grpo-gke:hfToken hf_..."
    )
    assert security_summary(load_config(gemma, (), "test")).endswith(f"\n{warning}")
    assert "warning:" not in security_summary(load_config(*with_secrets(gemma, SECRET_TOKEN), "test"))
    other = combination_values("standard", "h200", "gcs", workload={"model": "someone/gemma-2-9b-it"},
                               cluster={"dnsEndpoint": True})  # fmt: skip
    assert "warning:" not in security_summary(load_config(other, (), "test"))


def test_a_registry_stack_names_the_nodes_repository_reads_and_the_streaming_role():
    """`workload.imageSource: registry` grants the nodes' account the reader role on the remote repositories and
    Service Usage Consumer on the project for image streaming (infra/registry.py); the summary says both."""
    values = combination_values("standard", "h200", "gcs", workload={"imageSource": "registry"})
    text = security_summary(load_config(values, (), "test"))
    [nodes] = [line for line in text.splitlines() if line.startswith("  nodes: ")]
    assert nodes == (
        "  nodes: grpo-test-node-sa@my-grpo-project.iam.gserviceaccount.com with"
        " roles/container.defaultNodeServiceAccount, roles/artifactregistry.reader on the stack's remote repositories"
        " and roles/serviceusage.serviceUsageConsumer on project my-grpo-project (image streaming from them);"
        " Shielded GKE Nodes with secure boot and integrity monitoring"
    )
    direct = combination_values("standard", "h200", "gcs", workload={"imageSource": "direct"})
    [nodes] = [line for line in security_summary(load_config(direct, (), "test")).splitlines() if "nodes: " in line]
    assert nodes == (
        "  nodes: grpo-test-node-sa@my-grpo-project.iam.gserviceaccount.com with"
        " roles/container.defaultNodeServiceAccount; Shielded GKE Nodes with secure boot and integrity monitoring"
    )
