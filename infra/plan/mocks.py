"""Deterministic stand-ins for what Google Cloud and Kubernetes would compute.

Every value is fixed or derived from the resource's own inputs, so two runs of the same
config give byte-identical plans. Addresses come from the documentation ranges (RFC 5737).
"""

from __future__ import annotations

import uuid
from typing import Any

import pulumi

FAKE_PROJECT_NUMBER = "123456789012"
"""Project number returned for `gcp.organizations.get_project` offline."""

FAKE_ENDPOINT = "192.0.2.10"
"""Control-plane endpoint of the offline cluster (RFC 5737 documentation address)."""

FAKE_LUSTRE_IP = "192.0.2.20"
"""Address in the offline Lustre mount point (RFC 5737 documentation address)."""

FAKE_CA_CERTIFICATE = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCm9mZmxpbmUKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
"""Base64 of a placeholder PEM block standing for the cluster CA offline."""


def _computed_outputs(type_: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    physical = inputs.get("name") or name
    outputs: dict[str, Any] = {"name": physical}
    if type_ == "gcp:container/cluster:Cluster":
        outputs |= {
            "endpoint": FAKE_ENDPOINT,
            "masterAuth": {"clusterCaCertificate": FAKE_CA_CERTIFICATE},
            "selfLink": f"https://container.googleapis.com/v1/projects/offline/locations/offline/clusters/{physical}",
        }
    elif type_.startswith("gcp:compute/"):
        outputs["selfLink"] = f"https://www.googleapis.com/compute/v1/projects/offline/{physical}"
    elif type_ == "gcp:lustre/instance:Instance":
        outputs |= {"mountPoint": f"{FAKE_LUSTRE_IP}@tcp:/{inputs.get('filesystem', 'lustre')}", "state": "ACTIVE"}
    elif type_ == "gcp:storage/bucket:Bucket":
        outputs["url"] = f"gs://{physical}"
    elif type_.startswith("kubernetes:") and isinstance(inputs.get("metadata"), dict):
        outputs["metadata"] = {**inputs["metadata"], "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{type_}/{name}"))}
    elif type_ == "gcp:serviceaccount/account:Account":
        email = f"{inputs.get('accountId', name)}@offline.iam.gserviceaccount.com"
        outputs |= {"email": email, "member": f"serviceAccount:{email}"}
    return outputs


class OfflineMocks(pulumi.runtime.Mocks):
    """Mocks that echo inputs and add fixed computed outputs per resource type."""

    def __init__(self) -> None:
        self.invoked: set[str] = set()
        """Tokens of the provider functions the program called."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        """Give every resource a stable id and its inputs plus computed outputs."""
        computed = _computed_outputs(args.typ, args.name, args.inputs)
        state = {**computed, **args.inputs}
        if "metadata" in computed:
            # The API server adds the uid to the object's own metadata.
            state["metadata"] = computed["metadata"]
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
        """Answer the provider functions the program calls."""
        self.invoked.add(args.token)
        if args.token == "gcp:organizations/getProject:getProject":
            project = args.args.get("projectId") or "offline"
            return {"number": FAKE_PROJECT_NUMBER, "projectId": project, "name": project, "id": f"projects/{project}"}, []
        return {}, []
