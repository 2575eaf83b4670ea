"""Facts of the image cache disk (`gpu.imageCacheDisk`): a disk image made with GKE's disk image builder,
attached to every GPU node as a secondary boot disk that holds the workload image, so a new or replacing node
does not pull it whole.

Sources, each read 2026-12-02 through the `search` tool's stored copies:
- SBD = GKE "Use secondary boot disks to preload data or container images"
  (cloud.google.com/kubernetes-engine/docs/how-to/data-container-image-preloading; its English, Japanese and
  Simplified Chinese copies, the last the newest): the Standard and Autopilot floors, "Requirements" (the node
  image and its version, "when you modify the disk image you must create a new node pool", "configure image
  streaming to use the secondary boot disk feature"), and "The secondary boot disk type is the same as the node
  boot disk".
- PGCP = pulumi-gcp 10.2.0 pulumi_gcp/container/_inputs.py (installed): NodePoolNodeConfigSecondaryBootDiskArgs
  (`disk_image` required, `mode` optional), and on ClusterNodeConfigArgs.secondary_boot_disks
  (L10322) "`gcfs_config` must be `enabled=true` for this feature to work".
- API = google.container.v1 SecondaryBootDisk (client reference pages, e.g. the Python google-cloud-container
  2.65.0 `SecondaryBootDisk`): `disk_image` "Fully-qualified resource ID for an existing disk image", `mode`
  MODE_UNSPECIFIED or CONTAINER_IMAGE_CACHE ("for using the secondary boot disk as a container image cache");
  no disk type field.
- TPG = hashicorp/terraform-provider-google google/services/container/node_config.go (stored copy @00b984c6,
  the same in the newest stored copy): `secondary_boot_disks` ForceNew: true, its `disk_image` and `mode` too.
- CCC = the ComputeClass CRD's OpenAPI schema, datreeio/CRDs-catalog cloud.google.com/computeclass_v1.json
  @2b295113: `priorities[].storage.secondaryBootDisks[]` {diskImageName (required), project, mode (enum
  MODE_UNSPECIFIED, CONTAINER_IMAGE_CACHE)}.
- BUILDER = ai-on-gke/tools gke-disk-image-builder README.md @5a279897 and cli/main.go @b41826fc (the tool
  moved there from GoogleCloudPlatform/ai-on-gke tools/gke-disk-image-builder, whose README says so): `go run
  ./cli` with --project-name, --image-name, --zone, --gcs-path, --disk-size-gb, --container-image (tag
  required), --image-pull-auth (None or ServiceAccountToken); it prints
  `projects/<project>/global/images/<image-name>`.
"""

from __future__ import annotations

CACHE_MODE = "CONTAINER_IMAGE_CACHE"
"""The secondary boot disk's mode: a container image cache (API, PGCP `mode`, CCC enum). The only other value,
MODE_UNSPECIFIED, attaches the disk as data, not as an image cache."""

IMAGE_CACHE_FLOORS = {"standard": "1.30.1-gke.1329000", "autopilot": "1.30.1-gke.1329000"}
"""Lowest GKE version with secondary boot disks on Container-Optimized OS nodes (SBD "Requirements", newest copy:
1.30.1-gke.1329000 for Standard and Autopilot; older copies gave 1.28.3-gke.1067000 for Standard). Below every
RDMA floor of core/facts/platform.py GPU_MACHINES, so an 8-GPU stack meets it whenever it meets those; the L4 has no
RDMA floor, and core/config/rules.py checks this floor itself."""

IMAGE_CACHE_NODE_IMAGE = "COS_CONTAINERD"
"""The node image the cache needs (SBD "Requirements": Container-Optimized OS with containerd; Ubuntu with
containerd only from 1.35.0-gke.1403000). The GPU pools use it anyway (core/facts/gcp.py NODE_IMAGE_TYPE)."""

IMAGE_CACHE_NEEDS_STREAMING = True
"""The cache works only with image streaming on (SBD "Requirements": configure image streaming to use the
secondary boot disk feature; PGCP: `gcfs_config` must be enabled): on Standard the stack turns streaming on for
the pools only with `workload.imageSource: registry` (core/config/model.py streams_images_on_pools)."""

IMAGE_CACHE_DISK_GB = 100
"""Size of the image cache's disk image as docs/before-first-up.md's builder command makes it (BUILDER
`--disk-size-gb=100`), at which the plan prices keeping it (core/prices.py image_cache_hourly): an upper bound if
Compute Engine bills an image's stored (archive) size, which no source read said."""

IMAGE_CACHE_DISK_TYPE = "the node's boot disk type"
"""The type of each node's cache disk: the same as the node's boot disk (SBD "How secondary boot disks work"), so
Hyperdisk Balanced on A3 Ultra (core/facts/platform.py GPU_MACHINES boot_disk_type) and GKE's default boot disk
on A4. Nothing to choose: the API's SecondaryBootDisk has no type field (API), so no config can break the rule."""

DISK_IMAGE_PATH = "projects/{project}/global/images/{name}"
"""The fully qualified disk image the pool's `disk_image` names (API "Fully-qualified resource ID"; the path
BUILDER prints)."""

DISK_IMAGE_NAME_PATTERN = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
"""A Compute Engine resource name, which a disk image's is (BUILDER cli/main.go checks its names against
`^[a-z]([-a-z0-9]*[a-z0-9])?$`; Compute Engine names are at most 63 characters)."""

IMAGE_CACHE_REPLACES_POOL = True
"""Changing the disk image replaces each GPU pool: `secondary_boot_disks` is ForceNew (TPG), as GKE itself asks
for a new node pool when the disk image changes (SBD "Requirements")."""

AUTOPILOT_IMAGE_CACHE_REFUSAL = (
    "is only for cluster.mode 'standard': on Autopilot the disk goes on a ComputeClass priority"
    " (priorities[].storage.secondaryBootDisks), and no GKE document read on 2026-12-02 shows an Autopilot"
    " ComputeClass priority making A4 or A3 Ultra nodes with their RDMA networks (the same gap that keeps"
    " gpu.capacity off Autopilot); unset gpu.imageCacheDisk, or use cluster.mode 'standard'"
)
"""Why an Autopilot stack gets no image cache: the class would need a priority with the GPU node's shape and its
storage (CCC), and its workers would select the class instead of the nodes they select today; the sources of
core/facts/capacity.py AUTOPILOT_LADDER_REFUSAL show no such priority with the RDMA networks the workers ask for."""

CROSS_PROJECT_REFUSAL = (
    "must be a disk image of gcp:project {project}: the pages read on 2026-12-02 do not say which of GKE's"
    " accounts needs roles/compute.imageUser on another project's image; copy it into {project} with"
    " `gcloud compute images create {name} --project={project} --source-image={name}"
    " --source-image-project={other}`, then set gpu.imageCacheDisk to {name}"
)
"""Why a disk image of another project is refused (format with project, name, other)."""
