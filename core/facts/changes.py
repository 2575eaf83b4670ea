"""What a change does to a deployed stack: the order Kubernetes objects apply in, the inputs that replace a
resource (ForceNew), the Kubernetes provider's identity. The blast radius of `python -m plan --against`.

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

KUBERNETES_APPLY_ORDER = (
    # Helm v3 pkg/release/util/kind_sorter.go InstallOrder (read 2026-12-01); Helm applies kinds it does
    # not list (custom resources) after all of these.
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
    "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
    "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole", "ClusterRoleList",
    "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList",
    "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
    "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
)  # fmt: skip
"""Kubernetes kinds in the order they are applied: namespaces and what pods need before workloads;
custom resources (GKE networks, the RayCluster) come after every listed kind."""
# ForceNew inputs of every resource type the stack registers, as wire-form (camelCase) input paths
# without list indices: a change at or below a path replaces the resource; a path not listed updates
# in place. Google Cloud types: the `ForceNew: true` fields of the Terraform Google provider's schemas
# under google/services/ (hashicorp/terraform-provider-google @e03b762, 2026-08-21; pulumi-gcp
# bridges them): container/resource_container_cluster.go, container/resource_container_node_pool.go
# and container/node_config.go (node_config itself is ForceNew only as a whole block, so machine type,
# disk type, image type, taints, gVNIC and workload metadata update in place), compute/
# resource_compute_{network,subnetwork,firewall,router,router_nat,global_address}.go,
# lustre/resource_lustre_instance.go, servicenetworking/resource_service_networking_connection.go,
# storage/resource_storage_bucket.go, storage/iam_storage_bucket.go with tpgiamresource/
# resource_iam_member.go, resourcemanager/resource_google_project_service.go. Kubernetes types: the
# `forceNew` table of pulumi/pulumi-kubernetes provider/pkg/provider/diff.go (@94977969, v4.32.0+27,
# 2026-07-01), whose metadata.name and metadata.namespace replace every object; a custom resource
# (RayCluster, the GKE network objects) has only those, plus the replaceOnChanges the program records.
KUBERNETES_IDENTITY_INPUTS = ("metadata.name", "metadata.namespace")
"""Inputs whose change replaces any Kubernetes object (pulumi-kubernetes diff.go metadataForceNewProperties)."""

FORCE_NEW_INPUTS: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": (
        "datapathProvider",
        "defaultMaxPodsPerNode",
        "description",
        "enableAutopilot",
        "enableKubernetesAlpha",
        "enableTpu",
        "initialNodeCount",
        "ipAllocationPolicy.clusterIpv4CidrBlock",
        "ipAllocationPolicy.clusterSecondaryRangeName",
        "ipAllocationPolicy.servicesIpv4CidrBlock",
        "ipAllocationPolicy.servicesSecondaryRangeName",
        "location",
        "name",
        "network",
        "networkingMode",
        "privateClusterConfig.masterIpv4CidrBlock",
        "project",
        "subnetwork",
    ),
    "gcp:container/nodePool:NodePool": (
        "cluster",
        "initialNodeCount",
        "location",
        "maxPodsPerNode",
        "name",
        "networkConfig.additionalNodeNetworkConfigs",
        "networkConfig.additionalPodNetworkConfigs",
        "networkConfig.createPodRange",
        "networkConfig.podIpv4CidrBlock",
        "networkConfig.podRange",
        "nodeConfig.bootDiskKmsKey",
        "nodeConfig.ephemeralStorageLocalSsdConfig",
        "nodeConfig.flexStart",
        "nodeConfig.guestAccelerators",
        "nodeConfig.localSsdCount",
        "nodeConfig.maxRunDuration",
        "nodeConfig.metadata",
        "nodeConfig.minCpuPlatform",
        "nodeConfig.oauthScopes",
        "nodeConfig.preemptible",
        "nodeConfig.reservationAffinity",
        # node_config.go: secondary_boot_disks and its disk_image and mode are ForceNew (stored copy @00b984c6,
        # the same in the newest stored copy; core/facts/imagecache.py IMAGE_CACHE_REPLACES_POOL).
        "nodeConfig.secondaryBootDisks",
        "nodeConfig.serviceAccount",
        "nodeConfig.shieldedInstanceConfig",
        "nodeConfig.spot",
        "placementPolicy",
        "project",
        "queuedProvisioning",
    ),
    "gcp:compute/network:Network": (
        "autoCreateSubnetworks",
        "description",
        "internalIpv6Range",
        "name",
        "networkProfile",
        "project",
    ),
    "gcp:compute/subnetwork:Subnetwork": ("description", "name", "network", "project", "region"),
    "gcp:compute/firewall:Firewall": ("direction", "name", "project"),
    "gcp:compute/router:Router": ("name", "network", "project", "region"),
    "gcp:compute/routerNat:RouterNat": ("initialNatIps", "name", "project", "region", "router", "type"),
    "gcp:compute/globalAddress:GlobalAddress": (
        "address",
        "addressType",
        "description",
        "ipVersion",
        "name",
        "network",
        "prefixLength",
        "project",
        "purpose",
    ),
    "gcp:lustre/instance:Instance": (
        "filesystem",
        "instanceId",
        "kmsKey",
        "location",
        "network",
        "perUnitStorageThroughput",
        "project",
    ),
    "gcp:servicenetworking/connection:Connection": ("network", "service"),
    "gcp:storage/bucket:Bucket": ("hierarchicalNamespace", "location", "name", "project"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("bucket", "condition", "member", "role"),
    "gcp:projects/service:Service": ("project", "service"),
    # resourcemanager/resource_google_service_account.go: account_id and project are ForceNew (display name and
    # description update in place); tpgiamresource/resource_iam_member.go: every field of an IAM member is ForceNew
    # (project IAM and KMS crypto key IAM members alike).
    "gcp:serviceaccount/account:Account": ("accountId", "project"),
    "gcp:projects/iAMMember:IAMMember": ("condition", "member", "project", "role"),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": ("condition", "cryptoKeyId", "member", "role"),
    # node_config.gcfs_config (image streaming) is not ForceNew: GoogleCloudPlatform/magic-modules PR #11553
    # ("Remove force replacement from gcfs_config", merged 2024-08) and PR #11717 (its in-place update, merged
    # 2024-09), both before the provider commit above; an older copy (node_config.go @8da4e915) still had
    # schemaGcfsConfig(true). The cluster's node_pool_defaults is not listed either: it updates in place.
    # artifactregistry/resource_artifact_registry_repository.go (read at 07fc8657, 2026-12-01): format,
    # repository_id, kms_key_name, location, mode and the remote_repository_config block are ForceNew, and so is
    # each field in that block but disable_upstream_validation (the update function sends no
    # remoteRepositoryConfig at all): upstream_credentials with its username and password_secret_version included,
    # so turning workload.ngcApiKeySecretVersion on or off, or changing it, replaces the repository;
    # description and labels update in place. iam_artifact_registry_repository.go (0937ec5b): project, location,
    # repository ForceNew; member, role, condition as every tpgiamresource member.
    "gcp:artifactregistry/repository:Repository": (
        "format",
        "kmsKeyName",
        "location",
        "mode",
        "project",
        "remoteRepositoryConfig.aptRepository",
        "remoteRepositoryConfig.commonRepository",
        "remoteRepositoryConfig.description",
        "remoteRepositoryConfig.dockerRepository",
        "remoteRepositoryConfig.mavenRepository",
        "remoteRepositoryConfig.npmRepository",
        "remoteRepositoryConfig.pythonRepository",
        "remoteRepositoryConfig.upstreamCredentials",
        "remoteRepositoryConfig.yumRepository",
        "repositoryId",
    ),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (
        "condition",
        "location",
        "member",
        "project",
        "repository",
        "role",
    ),
    # secretmanager/iam_secret_manager_secret.go (read at 1babe97f, 2026-12-02): project and secret_id ForceNew;
    # member, role, condition as every tpgiamresource member.
    "gcp:secretmanager/secretIamMember:SecretIamMember": ("condition", "member", "project", "role", "secretId"),
    # monitoring/resource_monitoring_dashboard.go: only `project` is ForceNew; dashboard_json updates in place.
    "gcp:monitoring/dashboard:Dashboard": ("project",),
    "kubernetes:apps/v1:DaemonSet": KUBERNETES_IDENTITY_INPUTS + ("spec.selector",),
    "kubernetes:apps/v1:Deployment": KUBERNETES_IDENTITY_INPUTS + ("spec.selector",),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": KUBERNETES_IDENTITY_INPUTS + ("roleRef",),
    "kubernetes:rbac.authorization.k8s.io/v1:Role": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": KUBERNETES_IDENTITY_INPUTS + ("roleRef",),
    "kubernetes:batch/v1:Job": KUBERNETES_IDENTITY_INPUTS
    + ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
    "kubernetes:core/v1:ConfigMap": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:core/v1:Namespace": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:core/v1:PersistentVolume": KUBERNETES_IDENTITY_INPUTS + ("spec.csi",),
    "kubernetes:core/v1:PersistentVolumeClaim": KUBERNETES_IDENTITY_INPUTS
    + ("spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"),
    "kubernetes:core/v1:Secret": KUBERNETES_IDENTITY_INPUTS + ("type",),
    "kubernetes:core/v1:ServiceAccount": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:networking.gke.io/v1:GKENetworkParamSet": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:networking.gke.io/v1:Network": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:ray.io/v1:RayCluster": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:cloud.google.com/v1:ComputeClass": KUBERNETES_IDENTITY_INPUTS,
}
"""Resource type -> the input paths whose change replaces the resource (sources above)."""

FORCE_NEW_UNLESS_WIDENED: dict[str, tuple[str, ...]] = {"gcp:compute/subnetwork:Subnetwork": ("ipCidrRange",)}
"""CIDR inputs that update in place when the new range contains the old and replace otherwise
(resource_compute_subnetwork.go: `customdiff.ForceNewIfChange("ip_cidr_range", IsShrinkageIpCidr)`)."""

KUBERNETES_PROVIDER_IDENTITY = "clusterIdentifier"
"""The Kubernetes provider input that, when set and unchanged, keeps the provider (and so every object
it manages) through a changed kubeconfig; a changed value replaces it (pulumi-kubernetes provider.go
DiffConfig, @94977969). Without it, a kubeconfig that is unknown or points elsewhere replaces it."""
