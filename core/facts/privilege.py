"""Least privilege (issue 11): the nodes' roles, shielded nodes, Cloud KMS, pool upgrades and flex-start.

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

NODE_SERVICE_ACCOUNT_ROLES = ("roles/container.defaultNodeServiceAccount",)
"""Project roles of the nodes' service account on every stack (with `workload.imageSource: registry`, the default for
a Docker Hub or nvcr.io image, infra/registry.py adds Service Usage Consumer on the project and the reader on the
stack's remote repositories, which image streaming from them needs): "At a minimum, these node service accounts
must have the Kubernetes Engine Default Node Service Account (roles/container.defaultNodeServiceAccount) role
on your project" (GKE docs, "Create an Autopilot cluster", "Set up IAM service accounts for GKE"; the hardening
guide's "Use least privilege IAM service accounts"; CIS GKE Benchmark v2.0.0 5.2.1: "the least privilege role
intended for GKE nodes", read 2026-12-01). The predefined role replaces the older hand-picked set (below); the
images the stack pulls are public (us-docker.pkg.dev/gce-ai-infra, nvcr.io, docker.io, gke.gcr.io), so no
Artifact Registry reader is granted on the project: a private `workload.image` in Artifact Registry needs
roles/artifactregistry.reader added by hand. Workloads reach Google APIs through workload identity only."""

NODE_ROLE_ALLOW_LIST = frozenset(
    {
        "roles/container.defaultNodeServiceAccount",
        # The documented minimal set the predefined role bundles (CIS GKE Benchmark v1.x 6.2.1 / 5.2.1:
        # monitoring.viewer, monitoring.metricWriter, logging.logWriter; terraform-google-kubernetes-engine
        # v29 upgrade notes: plus stackdriver.resourceMetadata.writer) and image pulls (artifactregistry.reader).
        "roles/logging.logWriter",
        "roles/monitoring.metricWriter",
        "roles/monitoring.viewer",
        "roles/stackdriver.resourceMetadata.writer",
        "roles/autoscaling.metricsWriter",
        "roles/artifactregistry.reader",
        # Image streaming with a custom node account (core/facts/gcp.py STREAMING_CONSUMER_ROLE, GKE "Use Image
        # streaming to pull container images", "Requirements", read 2026-12-07).
        "roles/serviceusage.serviceUsageConsumer",
    }
)
"""Every role GKE documents a node service account may need; the tests refuse a node role outside it."""

SHIELDED_SECURE_BOOT = True
"""Secure boot on both Standard pools. The NVIDIA driver GKE installs on COS GPU nodes
(`gpu_driver_installation_config`) is a signed module; only unsigned or custom kernel modules conflict with
secure boot (CT gke-node-pool `enable_secure_boot`, default true: "Keep enabled unless custom kernel modules need
to be loaded", the module CT's gke-a4 and gke-a3-ultragpu blueprints build their GPU pools with; GKE docs,
"Configure secure kernel module loading": GPU node images load the NVIDIA driver as an out-of-tree module). The
gIB NCCL plugin is a user-space library copied onto the host, and the RDMA NICs use the COS kernel's in-tree
driver, so neither loads a kernel module of its own."""

SHIELDED_INTEGRITY_MONITORING = True
"""Integrity monitoring on both Standard pools (GKE default for Shielded GKE Nodes; CT gke-node-pool sets it)."""

SERVICE_ACCOUNT_ID_MAX = 30
"""Longest service account id IAM accepts: 6 to 30 lowercase letters, digits and hyphens (IAM docs, "Create
service accounts"; pulumi-gcp 10.2.0 serviceaccount.Account `account_id`: "must be 6-30 characters long")."""

KMS_KEY_PATTERN = (
    r"projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])/locations/(?P<location>[a-z0-9-]+)"
    r"/keyRings/(?P<ring>[A-Za-z0-9_-]{1,63})/cryptoKeys/(?P<key>[A-Za-z0-9_-]{1,63})"
)
"""A Cloud KMS key's full resource name, as GKE's `databaseEncryption.keyName` takes it (GKE docs, "Encrypt
secrets at the application layer"; Cloud KMS resource names: key ring and key ids of letters, digits, _ and -,
at most 63)."""

KMS_ENCRYPTER_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
"""The role the GKE service agent needs on the key to encrypt Secrets (GKE docs, "Encrypt secrets at the
application layer": "give the GKE service account access to the key")."""

GKE_SERVICE_AGENT = "serviceAccount:service-{number}@container-engine-robot.iam.gserviceaccount.com"
"""The GKE service agent of a project, by project number (GKE docs, "Encrypt secrets at the application
layer", "Grant permission to use the key")."""

CUSTOM_ROLE_ID_MAX = 64
"""Longest custom role id IAM accepts: 3 to 64 letters, digits, underscores and periods (IAM REST reference,
projects.roles.create `roleId`)."""

LUSTRE_FILESYSTEM_MAX = 8
"""A Lustre filesystem name has at most 8 alphanumeric characters (DOC-LUS; CT managed-lustre)."""

GPU_POOL_MAX_SURGE = 0
"""Surge nodes a GPU pool upgrade may add. Surge nodes count against a specific reservation's capacity and
need scarce A4/A3 Ultra stock; with none to be had, an upgrade that may not take a node down fails, and GKE
retries it until it succeeds (GKE docs, how-to/node-upgrades-quota). So upgrades replace nodes in place (CT
gke-node-pool main.tf `upgrade_settings`: max_surge 0, max_unavailable 1)."""

GPU_POOL_MAX_UNAVAILABLE = 1
"""GPU nodes an upgrade may take down at once (CT gke-node-pool default; see GPU_POOL_MAX_SURGE)."""

FLEX_START_LOCATION_POLICY = "ANY"
"""Flex-start pools autoscale (location policy ANY) from 0 nodes, without a static node count,
auto-repair, spot or reservations (CT modules/compute/gke-node-pool/main.tf: autoscaling block and
the enable_flex_start preconditions; CT gke-consumption-options Option 4)."""


# ---------------------------------------------------------------- deploying identity (issue 13 item 6)

IAM_ROLES_DOC = "cloud.google.com/iam/docs/roles-permissions/<service> (Google's role and permission index)"
"""Where each role below is defined: one page per service (container, compute, iam, resourcemanager,
storage, lustre, servicenetworking, serviceusage, cloudkms, monitoring); read 2026-12-01."""

DEPLOYER_ROLES: dict[str, tuple[tuple[str, ...], str]] = {
    "gcp:projects/service:Service": (("roles/serviceusage.serviceUsageAdmin",), "serviceusage.services.enable"),
    "gcp:compute/network:Network": (("roles/compute.networkAdmin",), "compute.networks.create"),
    "gcp:compute/subnetwork:Subnetwork": (("roles/compute.networkAdmin",), "compute.subnetworks.create"),
    "gcp:compute/router:Router": (("roles/compute.networkAdmin",), "compute.routers.create"),
    "gcp:compute/routerNat:RouterNat": (("roles/compute.networkAdmin",), "compute.routers.update"),
    "gcp:compute/globalAddress:GlobalAddress": (("roles/compute.networkAdmin",), "compute.globalAddresses.create"),
    # Compute Network Admin manages networking resources "except for firewall rules and SSL certificates".
    "gcp:compute/firewall:Firewall": (("roles/compute.securityAdmin",), "compute.firewalls.create"),
    "gcp:servicenetworking/connection:Connection": (
        ("roles/servicenetworking.networksAdmin",),
        "servicenetworking.services.addPeering",
    ),
    "gcp:serviceaccount/account:Account": (("roles/iam.serviceAccountAdmin",), "iam.serviceAccounts.create"),
    "gcp:projects/iAMMember:IAMMember": (
        ("roles/resourcemanager.projectIamAdmin",),
        "resourcemanager.projects.setIamPolicy",
    ),
    # storage.parkWhenIdle: the guardian's park role, and its Kubernetes service account's use of its Google one.
    "gcp:projects/iAMCustomRole:IAMCustomRole": (("roles/iam.roleAdmin",), "iam.roles.create, iam.roles.undelete"),
    "gcp:serviceaccount/iAMMember:IAMMember": (
        ("roles/iam.serviceAccountAdmin",),
        "iam.serviceAccounts.setIamPolicy",
    ),
    # Nodes run as <cluster>-node-sa: creating them needs actAs on that account as well.
    "gcp:container/cluster:Cluster": (
        ("roles/container.admin", "roles/iam.serviceAccountUser"),
        "container.clusters.create, iam.serviceAccounts.actAs",
    ),
    "gcp:container/nodePool:NodePool": (
        ("roles/container.admin", "roles/iam.serviceAccountUser"),
        "container.clusters.update, iam.serviceAccounts.actAs",
    ),
    "gcp:storage/bucket:Bucket": (("roles/storage.admin",), "storage.buckets.create"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (("roles/storage.admin",), "storage.buckets.setIamPolicy"),
    "gcp:lustre/instance:Instance": (("roles/lustre.admin",), "lustre.instances.create"),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": (("roles/cloudkms.admin",), "cloudkms.cryptoKeys.setIamPolicy"),
    "gcp:monitoring/dashboard:Dashboard": (("roles/monitoring.dashboardEditor",), "monitoring.dashboards.create"),
    # Artifact Registry "Set up repositories with gcr.io domain support", Required roles (cloud.google.com/
    # artifact-registry/docs/transition/setup-gcr-repo, read 2026-12-01): "To create Artifact Registry repositories
    # and grant access to individual repositories: Artifact Registry Administrator (roles/artifactregistry.admin)".
    "gcp:artifactregistry/repository:Repository": (
        ("roles/artifactregistry.admin",),
        "artifactregistry.repositories.create",
    ),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (
        ("roles/artifactregistry.admin",),
        "artifactregistry.repositories.setIamPolicy",
    ),
    # Artifact Registry "Configure remote repository authentication to upstream sources", Required roles
    # (docs.cloud.google.com/artifact-registry/docs/repositories/configure-remote-authentication, read 2026-12-02):
    # Secret Manager Admin (roles/secretmanager.admin), for the service agent's grant on the secret.
    "gcp:secretmanager/secretIamMember:SecretIamMember": (
        ("roles/secretmanager.admin",),
        "secretmanager.secrets.setIamPolicy",
    ),
    # Every in-cluster object (namespace, service account, Secrets, DaemonSet, Job, NetworkPolicies, PV/PVC,
    # the GKE network objects and the RayCluster) goes through the Kubernetes API with the deployer's identity.
    "kubernetes:": (("roles/container.admin",), "container.<kind>.create in the cluster"),
    # The post-deploy step reaches the Ray head through the API server's service proxy.
    "pulumi-python:dynamic:Resource": (("roles/container.admin",), "container.services.proxy"),
}
"""The predefined roles that let the identity running `pulumi up` create each resource type the stack
registers, and the permissions it uses from them (IAM_ROLES_DOC; Managed Lustre's from
cloud.google.com/iam/docs/roles-permissions/lustre). A key ending in ':' covers a whole package."""
