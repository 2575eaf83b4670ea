"""Deterministic stand-ins for what Google Cloud and Kubernetes would compute.

Every value is fixed or derived from the resource's own inputs, so two runs of the same
config give byte-identical plans. Addresses come from the documentation ranges (RFC 5737).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pulumi

FAKE_PROJECT_NUMBER = "123456789012"
"""Project number returned for `gcp.organizations.get_project` offline."""

FAKE_ENDPOINT = "192.0.2.10"
"""Control-plane endpoint of the offline cluster (RFC 5737 documentation address)."""

FAKE_DNS_ENDPOINT = "gke-offline-0000000000000000.us-central1.gke.goog"
"""The cluster's DNS-based control-plane endpoint offline (the form GKE gives it: gke-<id>.<location>.gke.goog)."""

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
        if "dnsEndpointConfig" in (inputs.get("controlPlaneEndpointsConfig") or {}):
            outputs["controlPlaneEndpointsConfig"] = {"dnsEndpointConfig": {"endpoint": FAKE_DNS_ENDPOINT}}
    elif type_.startswith("gcp:compute/"):
        outputs["selfLink"] = f"https://www.googleapis.com/compute/v1/projects/offline/{physical}"
    elif type_ == "gcp:lustre/instance:Instance":
        outputs |= {
            "mountPoint": f"{FAKE_LUSTRE_IP}@tcp:/{inputs.get('filesystem', 'lustre')}",
            "state": "ACTIVE",
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{type_}/{name}")),
        }
    elif type_ == "gcp:container/nodePool:NodePool":
        # The pool's one MIG per zone, as the GKE API's NodePool.instanceGroupUrls names its manager
        # (incluster/capacity_events.py): `gke-<cluster>-<pool>-<8 hex>-grp`, the hex fixed from the pool's name.
        hex8 = uuid.uuid5(uuid.NAMESPACE_URL, f"{type_}/{name}").hex[:8]
        outputs["instanceGroupUrls"] = [
            f"https://www.googleapis.com/compute/v1/projects/{inputs.get('project', 'offline')}/zones/{zone}"
            f"/instanceGroupManagers/gke-{inputs.get('cluster')}-{physical}-{hex8}-grp"
            for zone in inputs.get("nodeLocations") or [inputs.get("location", "offline")]
        ]
    elif type_ == "gcp:projects/iAMCustomRole:IAMCustomRole":
        outputs["name"] = f"projects/{inputs.get('project', 'offline')}/roles/{inputs.get('roleId', name)}"
    elif type_ == "gcp:storage/bucket:Bucket":
        outputs["url"] = f"gs://{physical}"
    elif type_.startswith("kubernetes:") and isinstance(inputs.get("metadata"), dict):
        outputs["metadata"] = {**inputs["metadata"], "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{type_}/{name}"))}
    elif type_ == "gcp:serviceaccount/account:Account":
        email = f"{inputs.get('accountId', name)}@offline.iam.gserviceaccount.com"
        outputs |= {
            "email": email,
            "member": f"serviceAccount:{email}",
            "name": f"projects/{inputs.get('project', 'offline')}/serviceAccounts/{email}",
        }
    return outputs


def _merged(computed: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """`given` (the inputs) over `computed`, object by object: an input never loses to a stand-in, and a
    computed field inside an input object (such as the DNS endpoint's address) is added."""
    state = dict(computed)
    for key, value in given.items():
        both_objects = isinstance(value, dict) and isinstance(state.get(key), dict)
        state[key] = _merged(state[key], value) if both_objects else value
    return state


FAKE_PARK_MARKER = '{"run": "<run>", "runs": ["<run>"], "stack": "<stack>", "state": "parked", "step": 1}\n'
"""The parked bucket's marker offline (incluster/park.py writes the real one), `<stack>` and `<run>` filled in for
the planned stack (fake_park_marker): a parked stack plans as parked."""


def fake_park_marker(stack: str, run: str) -> str:
    """FAKE_PARK_MARKER of `stack`'s run `run` (infra/storage.py park_refusal asks for the config's exact run)."""
    return FAKE_PARK_MARKER.replace("<stack>", stack).replace("<run>", run)


PARK_MARKER_TOKEN = "gcp:storage/getBucketObjectContent:getBucketObjectContent"
"""The provider function the program reads the park marker with (infra/storage.py read_park_marker)."""


class OfflineMocks(pulumi.runtime.Mocks):
    """Mocks that echo inputs and add fixed computed outputs per resource type."""

    def __init__(self, park_marker: str | Callable[[], str] | None = FAKE_PARK_MARKER) -> None:
        self.invoked: set[str] = set()
        """Tokens of the provider functions the program called."""
        self.park_marker = park_marker
        """The parked bucket's marker object's text, or what makes it when the program reads it; None: there is none
        (the provider's read fails)."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        """Give every resource a stable id and its inputs plus computed outputs."""
        return f"{args.name}-id", _merged(_computed_outputs(args.typ, args.name, args.inputs), dict(args.inputs))

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
        """Answer the provider functions the program calls."""
        self.invoked.add(args.token)
        if args.token == "gcp:organizations/getProject:getProject":
            project = args.args.get("projectId") or "offline"
            return {
                "number": FAKE_PROJECT_NUMBER,
                "projectId": project,
                "name": project,
                "id": f"projects/{project}",
            }, []
        if args.token == PARK_MARKER_TOKEN:
            if self.park_marker is None:
                # As the engine answers a failed provider function: a failure, which the SDK raises in the program.
                missing = f"googleapi: Error 404: No such object: {args.args.get('bucket')}/{args.args.get('name')}"
                return {}, [("name", missing)]
            content = self.park_marker() if callable(self.park_marker) else self.park_marker
            return {"bucket": args.args.get("bucket"), "name": args.args.get("name"), "content": content}, []
        return {}, []
