"""Every validation rule of the stack config: a good case and a bad case each.

Each case starts from BASE (a small valid stack in the raw form the engine passes: `ns:key` ->
string, objects JSON-encoded) and changes one thing; a bad case names the exact problem lines.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest

from core import names
from core.config.model import StackConfig
from core.config.problems import ConfigError, Problem
from core.facts.platform import (
    CUDA_MAJOR_DRIVER_BRANCH,
    DEFAULT_IMAGES,
    LATEST_DRIVER_FLOORS,
    VERL_VERSION,
    FrameworkImage,
    GkeVersion,
)
from jobs.spec.load import load_config
from plan.harness import REPO_ROOT

DELETE = object()
"""A change value that removes the key or field."""

BASE: dict[str, Any] = {
    "gcp:project": "my-grpo-project",
    "gcp:region": "us-central1",
    "grpo-gke:zone": "us-central1-b",
    "grpo-gke:gpu": {"type": "h200", "nodes": 1},
    "grpo-gke:storage": {"type": "gcs"},
    "grpo-gke:workload": {"framework": "verl", "model": "Qwen/Qwen2.5-0.5B-Instruct", "dataset": "gsm8k"},
}

LUSTRE = {"grpo-gke:storage": {"type": "lustre", "capacityGib": 9000, "throughput": 1000}}
"""Change to the smallest Managed Lustre instance."""

NEMO = {
    "grpo-gke:workload": {"framework": "nemo-rl", "model": "Qwen/Qwen2.5-1.5B-Instruct", "dataset": "deepscaler"},
    "grpo-gke:grpo": {"promptsPerStep": 32, "generationsPerPrompt": 8, "microBatchSizePerGpu": 4},
}
"""Change to a valid NeMo-RL workload (32 x 8 = 256 samples over 8 GPUs x 4 per micro-batch)."""

LIGHT = {"grpo-gke:grpo": {"microBatchSizePerGpu": 1}}
"""GRPO knobs whose range boundaries meet no cross-key rule (one micro-batch sample per GPU)."""

ANY_NODES = {"grpo-gke:grpo": {"promptsPerStep": 780, "microBatchSizePerGpu": 1}}
"""GRPO knobs that split evenly over 5, 12 or 13 nodes (780 x 8 samples)."""

OPEN_CONTROL_PLANE = (
    "grpo-gke:cluster.authorizedNetworks is empty and grpo-gke:cluster.dnsEndpoint is false: the control plane's"
    " public endpoint accepts connections from any address (each request still needs Google credentials); set"
    " grpo-gke:cluster.authorizedNetworks to the CIDRs of the machines that run pulumi and the job CLI, or"
    " grpo-gke:cluster.dnsEndpoint to true"
)
"""The warning of a stack whose control plane's public IP endpoint is open to any address."""

KNOWN_TOP = (
    "cluster, gpu, grpo, hfToken, job, network, pricing, secretEnv, storage, tracking, wandbApiKey, workload, zone"
)
KNOWN_GPU = "capacity, imageCacheDisk, nodes, provisioning, reservation, type"


def raw_values(changes: dict[str, Any]) -> dict[str, str]:
    """BASE with `changes` applied, JSON-encoded like core/stackfile.py does.

    A change key is a config key (`grpo-gke:gpu`, replaced whole) or a dotted path to a field of
    one (`grpo-gke:gpu.nodes`); whole keys apply first; DELETE removes the key or field.
    """
    data = copy.deepcopy(BASE)
    for path in sorted(changes, key=lambda path: "." in path):
        key, _, field = path.partition(".")
        value = changes[path]
        target, name = (data.setdefault(key, {}), field) if field else (data, key)
        if value is DELETE:
            target.pop(name, None)
        else:
            target[name] = copy.deepcopy(value)
    return {key: value if isinstance(value, str) else json.dumps(value, sort_keys=True) for key, value in data.items()}


def problem_lines(changes: dict[str, Any], secret_keys: tuple[str, ...] = (), stack: str = "test") -> list[str]:
    """The refused config's problem lines, or [] when it loads."""
    try:
        load_config(raw_values(changes), secret_keys, stack)
    except ConfigError as error:
        lines = [str(problem) for problem in error.problems]
        assert str(error) == "\n".join(lines)
        return lines
    return []


def ok(case_id: str, changes: dict[str, Any]) -> Any:
    """A case that must load."""
    return pytest.param(changes, [], id=f"ok-{case_id}")


def bad(case_id: str, changes: dict[str, Any], *lines: str) -> Any:
    """A case that must be refused with exactly `lines`."""
    return pytest.param(changes, list(lines), id=f"bad-{case_id}")


def bad_values(
    key: str, message: str, cases: tuple[tuple[str, Any], ...], base: dict[str, Any] | None = None
) -> list[Any]:
    """One bad case per (label, value) of `key` (a change path, which is also the problem path):
    each is refused with `<key>: <message>, got <value!r>`."""
    return [
        bad(f"{key.split(':')[1]}-{label}", {**(base or {}), key: value}, f"{key}: {message}, got {value!r}")
        for label, value in cases
    ]


# ---------------------------------------------------------------- provider keys, unknown keys, shapes

TOP_LEVEL = [
    ok("base", {}),
    bad("project-missing", {"gcp:project": DELETE}, "gcp:project: is required (pulumi config set gcp:project ...)"),
    bad("region-missing", {"gcp:region": DELETE}, "gcp:region: is required (pulumi config set gcp:region ...)"),
    ok("project-6-chars", {"gcp:project": "abcdef"}),
    ok("project-30-chars", {"gcp:project": "a" * 29 + "1"}),
    ok("project-digits", {"gcp:project": "my-project-42"}),
    *bad_values(
        "gcp:project",
        "must be a project id (6 to 30 lowercase letters, digits, hyphens)",
        (("5-chars", "abcde"), ("31-chars", "a" * 31), ("uppercase", "My-Project"), ("trailing-hyphen", "my-project-")),
    ),
    ok("region-other", {"gcp:region": "europe-west4", "grpo-gke:zone": "europe-west4-a"}),
    bad(
        "region-malformed",
        {"gcp:region": "us_central1"},
        "gcp:region: must be a region such as us-central1, got 'us_central1'",
    ),
    ok("other-gcp-keys-pass-through", {"gcp:impersonateServiceAccount": "deployer@p.iam.gserviceaccount.com"}),
    ok("other-namespaces-pass-through", {"kubernetes:context": "somewhere"}),
    bad("zone-missing", {"grpo-gke:zone": DELETE}, "grpo-gke:zone: is required"),
    ok("zone-with-the-gpu", {"grpo-gke:gpu.type": "b200", "grpo-gke:zone": "us-central1-a"}),
    bad(
        "zone-without-the-gpu",
        {"grpo-gke:zone": "us-central1-a"},
        "grpo-gke:zone: us-central1-a has no a3-ultragpu-8g (H200); zones of us-central1 that have it: us-central1-b"
        " (Compute Engine's GPU regions and zones, core/facts/zones.py, read 2026-12-01)",
    ),
    *bad_values(
        "grpo-gke:zone",
        "must be a zone of gcp:region us-central1 (such as us-central1-b)",
        (("other-region", "us-east1-b"), ("is-region", "us-central1"), ("two-letters", "us-central1-bb")),
    ),
    bad(
        "unknown-top-level-typo",
        {"grpo-gke:gpus": {"type": "h200", "nodes": 1}},
        f"grpo-gke:gpus: unknown key; did you mean 'grpo-gke:gpu'? (known: {KNOWN_TOP})",
    ),
    bad("unknown-top-level", {"grpo-gke:xyzzy": "1"}, f"grpo-gke:xyzzy: unknown key (known: {KNOWN_TOP})"),
    bad(
        "internal-stack-refused",
        {"grpo-gke:stack": "prod"},
        f"grpo-gke:stack: unknown key; did you mean 'grpo-gke:tracking'? (known: {KNOWN_TOP})",
    ),
    bad(
        "internal-secret-flag-refused",
        {"grpo-gke:hfTokenIsSecret": "true"},
        f"grpo-gke:hfTokenIsSecret: unknown key; did you mean 'grpo-gke:hfToken'? (known: {KNOWN_TOP})",
    ),
    bad(
        "provider-key-in-project-namespace",
        {"grpo-gke:project": "my-grpo-project"},
        f"grpo-gke:project: unknown key (known: {KNOWN_TOP})",
    ),
    bad(
        "unknown-section-key-typo",
        {"grpo-gke:gpu": {"tpye": "h200", "nodes": 1}},
        f"grpo-gke:gpu.tpye: unknown key; did you mean 'type'? (known: {KNOWN_GPU})",
        "grpo-gke:gpu.type: is required",
    ),
    bad(
        "unknown-section-key-snake-and-camel",
        {"grpo-gke:gpu.nodes_count": 2},
        f"grpo-gke:gpu.nodes_count: unknown key; did you mean 'nodes'? (known: {KNOWN_GPU})",
    ),
    bad(
        "unknown-key-and-cross-problem-together",
        {"grpo-gke:xyzzy": "1", "grpo-gke:zone": "us-east1-b"},
        f"grpo-gke:xyzzy: unknown key (known: {KNOWN_TOP})",
        "grpo-gke:zone: must be a zone of gcp:region us-central1 (such as us-central1-b), got 'us-east1-b'",
    ),
    bad("section-not-json", {"grpo-gke:gpu": "h200"}, "grpo-gke:gpu: must be an object of keys, got 'h200'"),
    bad("section-a-list", {"grpo-gke:gpu": "[1]"}, "grpo-gke:gpu: must be an object of keys, got [1]"),
    bad("section-null", {"grpo-gke:cluster": "null"}, "grpo-gke:cluster: must be an object of keys, got None"),
    bad("gpu-missing", {"grpo-gke:gpu": DELETE}, "grpo-gke:gpu: is required"),
    bad("storage-missing", {"grpo-gke:storage": DELETE}, "grpo-gke:storage: is required"),
    bad("workload-missing", {"grpo-gke:workload": DELETE}, "grpo-gke:workload: is required"),
    ok("optional-sections-empty", {f"grpo-gke:{name}": {} for name in ("cluster", "network", "grpo", "job")}),
]

# ---------------------------------------------------------------- grpo-gke:cluster

CLUSTER = [
    ok("mode-standard", {"grpo-gke:cluster.mode": "standard"}),
    ok("mode-autopilot", {"grpo-gke:cluster.mode": "autopilot"}),
    bad(
        "mode-capitalised",
        {"grpo-gke:cluster.mode": "Standard"},
        "grpo-gke:cluster.mode: must be one of 'standard' or 'autopilot', got 'Standard'",
    ),
    ok("name-1-char", {"grpo-gke:cluster.name": "g"}),
    ok("name-2-chars", {"grpo-gke:cluster.name": "g7"}),
    ok("name-40-chars", {"grpo-gke:cluster.name": "g" * 39 + "1"}),
    ok("name-digits", {"grpo-gke:cluster.name": "grpo-9-8"}),
    *bad_values(
        "grpo-gke:cluster.name",
        "must be 1 to 40 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen",
        (
            ("41-chars", "g" * 41),
            ("digit-first", "1grpo"),
            ("trailing-hyphen", "grpo-"),
            ("uppercase", "Grpo"),
            ("empty", ""),
        ),
    ),
    *(
        ok(f"channel-{channel}", {"grpo-gke:cluster.releaseChannel": channel})
        for channel in ("RAPID", "REGULAR", "STABLE", "EXTENDED")
    ),
    ok("channel-none", {"grpo-gke:cluster.releaseChannel": None}),
    bad(
        "snake-case-key",
        {"grpo-gke:cluster.release_channel": "RAPID"},
        "grpo-gke:cluster.release_channel: unknown key; did you mean 'releaseChannel'? (known: authorizedNetworks,"
        " deletionProtection, dnsEndpoint, headMachineType, minVersion, mode, name, releaseChannel, secretsKmsKey)",
    ),
    bad(
        "channel-lowercase",
        {"grpo-gke:cluster.releaseChannel": "rapid"},
        "grpo-gke:cluster.releaseChannel: must be one of 'RAPID', 'REGULAR', 'STABLE' or 'EXTENDED', got 'rapid'",
    ),
    ok("min-version-full", {"grpo-gke:cluster.minVersion": "1.33.5-gke.1000000"}),
    *bad_values(
        "grpo-gke:cluster.minVersion",
        "must be a full GKE version such as 1.32.2-gke.1475000",
        (
            ("minor-only", "1.33"),
            ("no-gke-part", "1.33.5"),
            ("prefixed", "v1.33.5-gke.1000000"),
            ("trailing-newline", "1.33.5-gke.1000000\n"),
        ),
    ),
    ok("deletion-protection-on", {"grpo-gke:cluster.deletionProtection": True}),
    bad(
        "deletion-protection-not-bool",
        {"grpo-gke:cluster.deletionProtection": "maybe"},
        "grpo-gke:cluster.deletionProtection: must be true or false, got 'maybe'",
    ),
    ok("head-16-vcpus", {"grpo-gke:cluster.headMachineType": "n2-highmem-16"}),
    ok("autopilot-without-head-machine", {"grpo-gke:cluster.mode": "autopilot"}),
    bad(
        "autopilot-head-machine",
        {"grpo-gke:cluster.mode": "autopilot", "grpo-gke:cluster.headMachineType": "c2-standard-16"},
        "grpo-gke:cluster.headMachineType: is only for cluster.mode 'standard' (Autopilot chooses the head's machine)",
    ),
    ok("head-16-vcpus-standard", {"grpo-gke:cluster.headMachineType": "e2-standard-16"}),
    ok("head-highcpu-64", {"grpo-gke:cluster.headMachineType": "n2-highcpu-64"}),
    bad(
        "head-highcpu-16",
        {"grpo-gke:cluster.headMachineType": "n2-highcpu-16"},
        "grpo-gke:cluster.headMachineType: must have at least 48 GiB of memory (the Ray head asks for 32 GiB;"
        " a highcpu type may have as little as 0.9 GiB per vCPU), got 'n2-highcpu-16'",
    ),
    bad(
        "head-8-vcpus",
        {"grpo-gke:cluster.headMachineType": "c2-standard-8"},
        "grpo-gke:cluster.headMachineType: must have at least 16 vCPUs (the Ray head asks for 12), got 'c2-standard-8'",
    ),
    # A one-GPU stack (one L4) takes the small head (core/facts/pods.py SMALL_HEAD_REQUESTS) and its floor; two GPUs
    # go back to the 8-GPU head's.
    ok("one-l4-head-8-vcpus", {"grpo-gke:gpu.type": "l4", "grpo-gke:cluster.headMachineType": "e2-standard-8"}),
    ok("one-l4-head-n1-8-vcpus", {"grpo-gke:gpu.type": "l4", "grpo-gke:cluster.headMachineType": "n1-standard-8"}),
    bad(
        "one-l4-head-4-vcpus",
        {"grpo-gke:gpu.type": "l4", "grpo-gke:cluster.headMachineType": "e2-standard-4"},
        "grpo-gke:cluster.headMachineType: must have at least 8 vCPUs (the Ray head asks for 4), got 'e2-standard-4'",
    ),
    bad(
        "one-l4-head-highcpu-8",
        {"grpo-gke:gpu.type": "l4", "grpo-gke:cluster.headMachineType": "n2-highcpu-8"},
        "grpo-gke:cluster.headMachineType: must have at least 28 GiB of memory (the Ray head asks for 12 GiB;"
        " a highcpu type may have as little as 0.9 GiB per vCPU), got 'n2-highcpu-8'",
    ),
    bad(
        "two-l4-head-8-vcpus",
        {"grpo-gke:gpu.type": "l4", "grpo-gke:gpu.nodes": 2, "grpo-gke:cluster.headMachineType": "e2-standard-8"},
        "grpo-gke:cluster.headMachineType: must have at least 16 vCPUs (the Ray head asks for 12), got 'e2-standard-8'",
    ),
    bad(
        "head-not-a-machine-type",
        {"grpo-gke:cluster.headMachineType": "a3-ultragpu-8g"},
        "grpo-gke:cluster.headMachineType: must be a machine type such as c2-standard-16, got 'a3-ultragpu-8g'",
    ),
    ok("authorized-networks", {"grpo-gke:cluster.authorizedNetworks": ["203.0.113.0/24", "198.51.100.7/32"]}),
    ok("authorized-networks-empty", {"grpo-gke:cluster.authorizedNetworks": []}),
    *(
        bad(
            f"authorized-networks-{label}",
            {"grpo-gke:cluster.authorizedNetworks": ["203.0.113.0/24", cidr]},
            "grpo-gke:cluster.authorizedNetworks: each entry must be an IPv4 CIDR range such as 203.0.113.0/24,"
            f" got {cidr!r}",
        )
        for label, cidr in (
            ("no-prefix", "203.0.113.7"),
            ("host-bits-set", "203.0.113.7/24"),
            ("prefix-33", "203.0.113.0/33"),
            ("name", "office"),
            ("ipv6", "2001:db8::/32"),
        )
    ),
    bad(
        "authorized-networks-not-a-list",
        {"grpo-gke:cluster.authorizedNetworks": "203.0.113.0/24"},
        "grpo-gke:cluster.authorizedNetworks: must be a list, got '203.0.113.0/24'",
    ),
    ok("dns-endpoint", {"grpo-gke:cluster.dnsEndpoint": True}),
    bad(
        "dns-endpoint-not-bool",
        {"grpo-gke:cluster.dnsEndpoint": "yes"},
        "grpo-gke:cluster.dnsEndpoint: must be true or false, got 'yes'",
    ),
    ok(
        "secrets-kms-key",
        {"grpo-gke:cluster.secretsKmsKey": "projects/my-keys-1/locations/us-central1/keyRings/gke/cryptoKeys/secrets"},
    ),
    *bad_values(
        "grpo-gke:cluster.secretsKmsKey",
        "must be a key's full resource name projects/P/locations/L/keyRings/R/cryptoKeys/K",
        (
            ("key-name-only", "secrets"),
            ("key-ring-only", "projects/my-keys-1/locations/us-central1/keyRings/gke"),
            (
                "key-version",
                "projects/my-keys-1/locations/us-central1/keyRings/gke/cryptoKeys/secrets/cryptoKeyVersions/1",
            ),
            ("leading-slash", "/projects/my-keys-1/locations/us-central1/keyRings/gke/cryptoKeys/secrets"),
        ),
    ),
    bad(
        "secrets-kms-key-other-region",
        {"grpo-gke:cluster.secretsKmsKey": "projects/my-keys-1/locations/europe-west4/keyRings/gke/cryptoKeys/secrets"},
        "grpo-gke:cluster.secretsKmsKey: must be a key in the cluster's region gcp:region us-central1"
        " (locations/us-central1), got one in 'europe-west4'",
    ),
    bad(
        "secrets-kms-key-global",
        {"grpo-gke:cluster.secretsKmsKey": "projects/my-keys-1/locations/global/keyRings/gke/cryptoKeys/secrets"},
        "grpo-gke:cluster.secretsKmsKey: must be a key in the cluster's region gcp:region us-central1"
        " (locations/us-central1), got one in 'global'",
    ),
    bad(
        "unknown-key",
        {"grpo-gke:cluster.releaseChanel": "RAPID"},
        "grpo-gke:cluster.releaseChanel: unknown key; did you mean 'releaseChannel'? (known: authorizedNetworks,"
        " deletionProtection, dnsEndpoint, headMachineType, minVersion, mode, name, releaseChannel, secretsKmsKey)",
    ),
]


def _below(version: str) -> str:
    """The GKE version just below `version` (its gke build number minus one)."""
    parsed = GkeVersion.parse(version)
    return str(GkeVersion(parsed.major, parsed.minor, parsed.patch, parsed.gke - 1))


RDMA_FLOORS = [
    # gcp-infrastructure.md §3, "GKE min (GPUDirect RDMA)" (DOC-AIH): same floor in both modes.
    ("h200", "standard", "1.31.4-gke.1183000"),
    ("h200", "autopilot", "1.31.4-gke.1183000"),
    ("b200", "standard", "1.32.2-gke.1475000"),
    ("b200", "autopilot", "1.32.2-gke.1475000"),
]
LUSTRE_CSI_FLOOR = "1.33.2-gke.1111000"  # gcp-infrastructure.md §4
FLEX_START_FLOOR = "1.32.2-gke.1652000"  # CT gke-node-pool preconditions
RAY_OPERATOR_FLOOR = "1.29.8-gke.1054000"  # gcp-infrastructure.md §1 row 8


def _gpu_mode(gpu: str, mode: str) -> dict[str, Any]:
    return {"grpo-gke:gpu.type": gpu, "grpo-gke:cluster.mode": mode}


VERSION_FLOORS = [
    # The L4 has no RDMA floor: with a capacity ladder the compute classes' floor is checked itself, beside the LATEST
    # driver's that its DEFAULT R535 needs for the pinned images' CUDA 13.
    ok(
        "l4-ladder-at-1.31",
        {
            "grpo-gke:gpu.type": "l4",
            "grpo-gke:gpu.capacity": ["spot", "on-demand"],
            "grpo-gke:cluster.minVersion": "1.31.2-gke.1000",
        },
    ),
    bad(
        "l4-ladder-below-the-compute-class-floor",
        {
            "grpo-gke:gpu.type": "l4",
            "grpo-gke:gpu.capacity": ["spot", "on-demand"],
            "grpo-gke:cluster.minVersion": "1.30.2-gke.1000",
        },
        "grpo-gke:cluster.minVersion: must be at least 1.30.3-gke.1451000 for custom compute classes (gpu.capacity),"
        " got 1.30.2-gke.1000",
        "grpo-gke:cluster.minVersion: must be at least 1.31.0-gke.0 for GKE's LATEST GPU driver R580: CUDA 13.0 (the"
        " pinned verl image) needs R580, and the L4 DEFAULT driver is R535, got 1.30.2-gke.1000",
    ),
    *(
        ok(f"rdma-{gpu}-{mode}-at-floor", {**_gpu_mode(gpu, mode), "grpo-gke:cluster.minVersion": floor})
        for gpu, mode, floor in RDMA_FLOORS
    ),
    *(
        bad(
            f"rdma-{gpu}-{mode}-below-floor",
            {**_gpu_mode(gpu, mode), "grpo-gke:cluster.minVersion": _below(floor)},
            f"grpo-gke:cluster.minVersion: must be at least {floor} for GPUDirect RDMA on {gpu.upper()} ({mode}),"
            f" got {_below(floor)}",
        )
        for gpu, mode, floor in RDMA_FLOORS
    ),
    ok("lustre-at-floor", {**LUSTRE, "grpo-gke:cluster.minVersion": LUSTRE_CSI_FLOOR}),
    bad(
        "lustre-below-floor",
        {**LUSTRE, "grpo-gke:cluster.minVersion": _below(LUSTRE_CSI_FLOOR)},
        f"grpo-gke:cluster.minVersion: must be at least {LUSTRE_CSI_FLOOR} for the Managed Lustre CSI driver,"
        f" got {_below(LUSTRE_CSI_FLOOR)}",
    ),
    ok("gcs-ignores-lustre-floor", {"grpo-gke:cluster.minVersion": _below(LUSTRE_CSI_FLOOR)}),
    *(
        ok(
            f"flex-start-{gpu}-at-floor",
            {
                "grpo-gke:gpu.type": gpu,
                "grpo-gke:gpu.provisioning": "flex-start",
                "grpo-gke:cluster.minVersion": FLEX_START_FLOOR,
            },
        )
        for gpu in ("h200", "b200")
    ),
    *(
        bad(
            f"flex-start-{gpu}-below-floor",
            {
                "grpo-gke:gpu.type": gpu,
                "grpo-gke:gpu.provisioning": "flex-start",
                "grpo-gke:cluster.minVersion": _below(FLEX_START_FLOOR),
            },
            f"grpo-gke:cluster.minVersion: must be at least {FLEX_START_FLOOR} for flex-start node pools,"
            f" got {_below(FLEX_START_FLOOR)}",
        )
        for gpu in ("h200", "b200")
    ),
    ok("spot-ignores-flex-start-floor", {"grpo-gke:cluster.minVersion": _below(FLEX_START_FLOOR)}),
    bad(
        "ray-operator-and-every-floor",
        {**LUSTRE, "grpo-gke:cluster.minVersion": "1.29.8-gke.1053999"},
        f"grpo-gke:cluster.minVersion: must be at least {RAY_OPERATOR_FLOOR} for the Ray operator add-on, got 1.29.8-gke.1053999",
        "grpo-gke:cluster.minVersion: must be at least 1.31.0-gke.0 for GKE's LATEST GPU driver R580: CUDA 13.0 (the"
        " pinned verl image) needs R580, and the H200 DEFAULT driver is R550, got 1.29.8-gke.1053999",
        "grpo-gke:cluster.minVersion: must be at least 1.31.4-gke.1183000 for GPUDirect RDMA on H200 (standard), got 1.29.8-gke.1053999",
        f"grpo-gke:cluster.minVersion: must be at least {LUSTRE_CSI_FLOOR} for the Managed Lustre CSI driver, got 1.29.8-gke.1053999",
    ),
    ok("numeric-not-lexical-order", {"grpo-gke:cluster.minVersion": "1.100.0-gke.1"}),
]

# ---------------------------------------------------------------- grpo-gke:gpu

GPU = [
    ok("type-b200", {"grpo-gke:gpu.type": "b200"}),
    bad(
        "type-other",
        {"grpo-gke:gpu.type": "a100"},
        "grpo-gke:gpu.type: must be one of 'b200', 'h200' or 'l4', got 'a100'",
    ),
    bad("type-missing", {"grpo-gke:gpu.type": DELETE}, "grpo-gke:gpu.type: is required"),
    ok("nodes-64", {"grpo-gke:gpu.nodes": 64}),
    bad("nodes-0", {"grpo-gke:gpu.nodes": 0}, "grpo-gke:gpu.nodes: must be at least 1, got 0"),
    bad("nodes-65", {"grpo-gke:gpu.nodes": 65}, "grpo-gke:gpu.nodes: must be at most 64, got 65"),
    bad("nodes-fraction", {"grpo-gke:gpu.nodes": 1.5}, "grpo-gke:gpu.nodes: must be a whole number, got 1.5"),
    bad("nodes-text", {"grpo-gke:gpu.nodes": "two"}, "grpo-gke:gpu.nodes: must be a whole number, got 'two'"),
    ok("nodes-integral-float", {"grpo-gke:gpu.nodes": 1.0}),
    bad("nodes-boolean", {"grpo-gke:gpu.nodes": True}, "grpo-gke:gpu.nodes: must be a whole number, got True"),
    bad(
        "learning-rate-boolean",
        {"grpo-gke:grpo.learningRate": True},
        "grpo-gke:grpo.learningRate: must be a number, got True",
    ),
    ok("boolean-key-boolean", {"grpo-gke:storage.keepOnDestroy": False}),
    bad("nodes-missing", {"grpo-gke:gpu.nodes": DELETE}, "grpo-gke:gpu.nodes: is required"),
    ok("provisioning-on-demand", {"grpo-gke:gpu.provisioning": "on-demand"}),
    ok("provisioning-flex-start", {"grpo-gke:gpu.provisioning": "flex-start"}),
    bad(
        "provisioning-other",
        {"grpo-gke:gpu.provisioning": "preemptible"},
        "grpo-gke:gpu.provisioning: must be one of 'spot', 'on-demand', 'reservation' or 'flex-start', got 'preemptible'",
    ),
    *(
        ok(f"reservation-{label}", {"grpo-gke:gpu.provisioning": "reservation", "grpo-gke:gpu.reservation": name})
        for label, name in (("named", "my-a3u-res-9"), ("2-chars", "r9"), ("63-chars", "r" * 62 + "9"))
    ),
    bad(
        "reservation-64-chars",
        {"grpo-gke:gpu.provisioning": "reservation", "grpo-gke:gpu.reservation": "r" * 64},
        f"grpo-gke:gpu.reservation: must be a reservation name (lowercase letters, digits, hyphens), got {'r' * 64!r}",
    ),
    bad(
        "reservation-missing",
        {"grpo-gke:gpu.provisioning": "reservation"},
        "grpo-gke:gpu.reservation: is required when gpu.provisioning is 'reservation'",
    ),
    bad(
        "reservation-without-reservation-provisioning",
        {"grpo-gke:gpu.reservation": "my-a3u-res"},
        "grpo-gke:gpu.reservation: is only allowed when gpu.provisioning is 'reservation', not 'spot'",
    ),
    bad(
        "reservation-bad-name",
        {"grpo-gke:gpu.provisioning": "reservation", "grpo-gke:gpu.reservation": "My_Res"},
        "grpo-gke:gpu.reservation: must be a reservation name (lowercase letters, digits, hyphens), got 'My_Res'",
    ),
    ok(
        "reservation-hourly-with-reservation",
        {
            "grpo-gke:gpu.provisioning": "reservation",
            "grpo-gke:gpu.reservation": "my-a3u-res",
            "grpo-gke:pricing": {"reservationHourly": 61.5},
        },
    ),
    bad(
        "reservation-hourly-without-reservation",
        {"grpo-gke:pricing": {"reservationHourly": 61.5}},
        "grpo-gke:pricing.reservationHourly: is only for gpu.provisioning 'reservation', not 'spot'",
    ),
    *bad_values(
        "grpo-gke:pricing.reservationHourly",
        "must be greater than 0.0",
        (("zero", 0), ("negative", -1.5)),
        {"grpo-gke:gpu.provisioning": "reservation", "grpo-gke:gpu.reservation": "my-a3u-res"},
    ),
    ok("autopilot-on-demand", {"grpo-gke:cluster.mode": "autopilot", "grpo-gke:gpu.provisioning": "on-demand"}),
    bad(
        "autopilot-flex-start",
        {"grpo-gke:cluster.mode": "autopilot", "grpo-gke:gpu.provisioning": "flex-start"},
        "grpo-gke:gpu.provisioning: must be 'spot' or 'on-demand' on Autopilot, got 'flex-start'",
    ),
    bad(
        "autopilot-reservation",
        {
            "grpo-gke:cluster.mode": "autopilot",
            "grpo-gke:gpu.provisioning": "reservation",
            "grpo-gke:gpu.reservation": "my-a3u-res",
        },
        "grpo-gke:gpu.provisioning: must be 'spot' or 'on-demand' on Autopilot, got 'reservation'",
    ),
]

# ---------------------------------------------------------------- grpo-gke:storage

BUCKET_CHARS = "must use lowercase letters, digits, '-' and '_', starting and ending with a letter or digit"
BUCKET_DOTS = "must not contain dots (Cloud Storage creates a dotted name only after domain verification)"

STORAGE = [
    ok("type-lustre", LUSTRE),
    bad(
        "type-other",
        {"grpo-gke:storage.type": "nfs"},
        "grpo-gke:storage.type: must be one of 'gcs' or 'lustre', got 'nfs'",
    ),
    bad("type-missing", {"grpo-gke:storage.type": DELETE}, "grpo-gke:storage.type: is required"),
    ok("bucket-3-chars", {"grpo-gke:storage.bucket": "abc"}),
    ok("bucket-63-chars", {"grpo-gke:storage.bucket": "b" * 63}),
    ok("bucket-underscores-digits", {"grpo-gke:storage.bucket": "9my_data_bucket-9"}),
    bad(
        "bucket-dots",
        {"grpo-gke:storage.bucket": "data.example.com"},
        f"grpo-gke:storage.bucket: {BUCKET_DOTS}, got 'data.example.com'",
    ),
    bad(
        "bucket-2-chars",
        {"grpo-gke:storage.bucket": "ab"},
        "grpo-gke:storage.bucket: must be 3 to 63 characters, got 2 ('ab')",
    ),
    bad(
        "bucket-64-chars",
        {"grpo-gke:storage.bucket": "b" * 64},
        f"grpo-gke:storage.bucket: must be 3 to 63 characters, got 64 ({'b' * 64!r})",
    ),
    bad(
        "bucket-uppercase",
        {"grpo-gke:storage.bucket": "My-Bucket"},
        f"grpo-gke:storage.bucket: {BUCKET_CHARS}, got 'My-Bucket'",
    ),
    bad(
        "bucket-leading-hyphen",
        {"grpo-gke:storage.bucket": "-bucket"},
        f"grpo-gke:storage.bucket: {BUCKET_CHARS}, got '-bucket'",
    ),
    bad(
        "bucket-goog-prefix",
        {"grpo-gke:storage.bucket": "goog-data"},
        "grpo-gke:storage.bucket: must not start with 'goog' or contain 'google', got 'goog-data'",
    ),
    bad(
        "bucket-contains-google",
        {"grpo-gke:storage.bucket": "my-google-data"},
        "grpo-gke:storage.bucket: must not start with 'goog' or contain 'google', got 'my-google-data'",
    ),
    bad(
        "bucket-ip-address",
        {"grpo-gke:storage.bucket": "192.168.1.1"},
        f"grpo-gke:storage.bucket: {BUCKET_DOTS}, got '192.168.1.1'",
    ),
    ok("default-bucket-bad-but-bucket-set", {"gcp:project": "my-google-proj", "grpo-gke:storage.bucket": "my-bucket"}),
    ok("default-bucket-bad-but-lustre", {**LUSTRE, "gcp:project": "my-google-proj"}),
    bad(
        "default-bucket-invalid",
        {"gcp:project": "my-google-proj"},
        "grpo-gke:storage.bucket: the default name derived from project and stack is invalid (must not start with"
        " 'goog' or contain 'google', got 'my-google-proj-grpo-test'); set one",
    ),
    bad(
        "gcs-capacity",
        {"grpo-gke:storage.capacityGib": 9000},
        "grpo-gke:storage.capacityGib: is only for storage.type 'lustre'",
    ),
    bad(
        "gcs-throughput",
        {"grpo-gke:storage.throughput": 1000},
        "grpo-gke:storage.throughput: is only for storage.type 'lustre'",
    ),
    bad(
        "lustre-bucket",
        {**LUSTRE, "grpo-gke:storage.bucket": "my-bucket"},
        "grpo-gke:storage.bucket: is only for storage.type 'gcs'",
    ),
    bad(
        "lustre-throughput-missing",
        {**LUSTRE, "grpo-gke:storage.throughput": DELETE},
        "grpo-gke:storage.throughput: is required for Lustre: one of [125, 250, 500, 1000] MB/s per TiB",
    ),
    bad(
        "lustre-capacity-missing",
        {**LUSTRE, "grpo-gke:storage.capacityGib": DELETE},
        "grpo-gke:storage.capacityGib: is required for Lustre",
    ),
    ok("lustre-throughput-as-text", {**LUSTRE, "grpo-gke:storage.throughput": "1000"}),
    bad(
        "lustre-throughput-other",
        {**LUSTRE, "grpo-gke:storage.throughput": 300},
        "grpo-gke:storage.throughput: must be one of 125, 250, 500 or 1000, got 300",
    ),
    bad(
        "lustre-capacity-text",
        {**LUSTRE, "grpo-gke:storage.capacityGib": "lots"},
        "grpo-gke:storage.capacityGib: must be a whole number, got 'lots'",
    ),
    ok("keep-on-destroy-off", {"grpo-gke:storage.keepOnDestroy": False}),
    bad(
        "keep-on-destroy-not-bool",
        {"grpo-gke:storage.keepOnDestroy": "maybe"},
        "grpo-gke:storage.keepOnDestroy: must be true or false, got 'maybe'",
    ),
    bad(
        "keep-on-destroy-yes",
        {"grpo-gke:storage.keepOnDestroy": "yes"},
        "grpo-gke:storage.keepOnDestroy: must be true or false, got 'yes'",
    ),
    bad(
        "keep-on-destroy-one",
        {"grpo-gke:storage.keepOnDestroy": 1},
        "grpo-gke:storage.keepOnDestroy: must be true or false, got 1",
    ),
    ok("keep-on-destroy-text-false", {"grpo-gke:storage.keepOnDestroy": "false"}),
    ok(
        "lustre-parked",
        {"grpo-gke:storage": {**LUSTRE["grpo-gke:storage"], "keepOnDestroy": False, "parked": True}},
    ),
    ok("lustre-unparked", {"grpo-gke:storage": {**LUSTRE["grpo-gke:storage"], "parked": False}}),
    bad(
        "gcs-parked",
        {"grpo-gke:storage.parked": True, "grpo-gke:storage.keepOnDestroy": False},
        "grpo-gke:storage.parked: is only for storage.type 'lustre': a bucket bills only what it holds, so there is"
        " nothing to park",
    ),
    bad(
        "lustre-parked-kept-on-destroy",
        {"grpo-gke:storage": {**LUSTRE["grpo-gke:storage"], "parked": True}},
        "grpo-gke:storage.parked: needs storage.keepOnDestroy false, recorded by an earlier pulumi up: with it true"
        " Pulumi drops the Lustre instance from the state and leaves it billing; set keepOnDestroy false and run"
        " pulumi up (an in-place update), then set parked true",
    ),
    ok("lustre-park-when-idle", {"grpo-gke:storage": {**LUSTRE["grpo-gke:storage"], "parkWhenIdle": True}}),
    bad(
        "gcs-park-when-idle",
        {"grpo-gke:storage.parkWhenIdle": True},
        "grpo-gke:storage.parkWhenIdle: is only for storage.type 'lustre': a bucket bills only what it holds, so"
        " there is nothing to park",
    ),
    bad(
        "lustre-park-when-idle-without-guardian",
        {"grpo-gke:storage": {**LUSTRE["grpo-gke:storage"], "parkWhenIdle": True}, "grpo-gke:job.recover": False},
        "grpo-gke:storage.parkWhenIdle: needs job.recover true: the run guardian parks the run; set one of them",
    ),
    bad(
        "lustre-park-when-idle-never-idle",
        {"grpo-gke:storage": {**LUSTRE["grpo-gke:storage"], "parkWhenIdle": True}, "grpo-gke:job.idleMinutes": 0},
        "grpo-gke:storage.parkWhenIdle: needs job.idleMinutes above 0: the guardian parks the run after it scales"
        " the GPU workers to zero, which idleMinutes 0 never does",
    ),
    bad(
        "lustre-parked-bucket-name",
        {**LUSTRE, "grpo-gke:cluster": {"name": "my-google-grpo"}},
        "grpo-gke:cluster.name: the parked bucket's name derived from project and cluster is invalid (must not start"
        " with 'goog' or contain 'google', got 'my-google-grpo-parked-7b5ca2ad')",
    ),
]

LUSTRE_TIERS = [
    # gcp-infrastructure.md §4 (DOC-LUS): in the lower band the step equals the tier minimum.
    (1000, 9000),
    (500, 18000),
    (250, 36000),
    (125, 72000),
]


def _lustre(throughput: int, capacity: int) -> dict[str, Any]:
    return {"grpo-gke:storage": {"type": "lustre", "throughput": throughput, "capacityGib": capacity}}


LUSTRE_SIZES = [
    *(ok(f"{tp}-at-minimum", _lustre(tp, minimum)) for tp, minimum in LUSTRE_TIERS),
    *(ok(f"{tp}-two-steps", _lustre(tp, 2 * minimum)) for tp, minimum in LUSTRE_TIERS),
    *(
        bad(
            f"{tp}-one-below-minimum",
            _lustre(tp, minimum - 1),
            f"grpo-gke:storage.capacityGib: must be at least {minimum} at {tp} MB/s per TiB, got {minimum - 1}",
        )
        for tp, minimum in LUSTRE_TIERS
    ),
    *(
        bad(
            f"{tp}-minimum-minus-step",
            _lustre(tp, 0),
            f"grpo-gke:storage.capacityGib: must be at least {minimum} at {tp} MB/s per TiB, got 0",
        )
        for tp, minimum in LUSTRE_TIERS
    ),
    *(
        bad(
            f"{tp}-not-a-multiple",
            _lustre(tp, minimum + minimum // 2),
            f"grpo-gke:storage.capacityGib: must be a multiple of {minimum} at {tp} MB/s per TiB,"
            f" got {minimum + minimum // 2}",
        )
        for tp, minimum in LUSTRE_TIERS
    ),
]

# ---------------------------------------------------------------- grpo-gke:network

RANGE_KEYS = ("nodeRange", "podRange", "serviceRange", "gvnicRange", "rdmaRange", "lustreRange")
DEFAULT_RANGES = {
    "nodeRange": "192.168.0.0/18",
    "podRange": "10.4.0.0/14",
    "serviceRange": "10.0.32.0/20",
    "gvnicRange": "192.168.64.0/18",
    "rdmaRange": "192.168.128.0/18",
    "lustreRange": "10.0.64.0/22",
}

NETWORK = [
    *(
        ok(f"{key}-custom", {**LUSTRE, f"grpo-gke:network.{key}": value})
        for key, value in (
            ("nodeRange", "172.16.0.0/20"),
            ("podRange", "10.8.0.0/14"),
            ("serviceRange", "10.1.0.0/20"),
            ("gvnicRange", "172.17.0.0/20"),
            ("rdmaRange", "172.18.0.0/16"),
            ("lustreRange", "172.20.0.0/22"),
        )
    ),
    *(
        bad(
            f"{key}-{label}",
            {**LUSTRE, f"grpo-gke:network.{key}": value},
            f"grpo-gke:network.{key}: {message}, got {value!r}",
        )
        for key in RANGE_KEYS
        for label, value, message in (
            ("not-cidr", "not-a-range", "must be an IPv4 CIDR range such as 10.0.0.0/20"),
            ("host-bits", "10.200.0.1/16", "must be an IPv4 CIDR range such as 10.0.0.0/20"),
            ("no-prefix", "10.200.0.0", "must be an IPv4 CIDR range such as 10.0.0.0/20"),
            ("ipv6", "fd00::/64", "must be an IPv4 CIDR range such as 10.0.0.0/20"),
            ("public", "8.8.8.0/24", "must be a private (RFC 1918) range"),
            ("loopback", "127.0.0.0/16", "must be a private (RFC 1918) range"),
            ("straddles-rfc1918", "172.0.0.0/8", "must be a private (RFC 1918) range"),
        )
    ),
    *(
        bad(
            f"{second}-overlaps-{first}",
            {**LUSTRE, f"grpo-gke:network.{second}": DEFAULT_RANGES[first]},
            f"grpo-gke:network.{second}: must not overlap network.{first} ({DEFAULT_RANGES[first]}),"
            f" got {DEFAULT_RANGES[first]}",
        )
        for index, first in enumerate(RANGE_KEYS)
        for second in RANGE_KEYS[index + 1 :]
    ),
    ok("rfc1918-upper-10", {"grpo-gke:network.podRange": "10.252.0.0/14"}),
    ok("rfc1918-upper-172", {"grpo-gke:network.nodeRange": "172.31.0.0/18"}),
    ok("gcs-ignores-lustre-range-overlap", {"grpo-gke:network.lustreRange": DEFAULT_RANGES["nodeRange"]}),
    ok("rdma-26", {"grpo-gke:network.rdmaRange": "192.168.128.0/26"}),
    bad(
        "rdma-27",
        {"grpo-gke:network.rdmaRange": "192.168.128.0/27"},
        "grpo-gke:network.rdmaRange: must be /26 or larger to hold 8 subnets of at least /29, got 192.168.128.0/27",
    ),
    bad(
        "lustre-23",
        {**LUSTRE, "grpo-gke:network.lustreRange": "10.0.64.0/23"},
        "grpo-gke:network.lustreRange: must be /22 or larger, got 10.0.64.0/23",
    ),
    ok("gcs-ignores-lustre-range-size", {"grpo-gke:network.lustreRange": "10.0.64.0/23"}),
    # One address per GPU node in each RDMA subnet and in the gVNIC subnet; Google Cloud keeps four of each.
    # (780 prompts x 8 split evenly over the GPUs of 5, 12 or 13 nodes.)
    ok("rdma-26-holds-4-nodes", {"grpo-gke:network.rdmaRange": "192.168.128.0/26", "grpo-gke:gpu.nodes": 4}),
    bad(
        "rdma-26-cannot-hold-5-nodes",
        {"grpo-gke:network.rdmaRange": "192.168.128.0/26", "grpo-gke:gpu.nodes": 5, **ANY_NODES},
        "grpo-gke:network.rdmaRange: must be /25 or larger: each RDMA subnet needs an address for each of the"
        " gpu.nodes=5 GPU nodes, got 192.168.128.0/26",
    ),
    ok(
        "gvnic-28-holds-12-nodes",
        {"grpo-gke:network.gvnicRange": "192.168.64.0/28", "grpo-gke:gpu.nodes": 12, **ANY_NODES},
    ),
    bad(
        "gvnic-28-cannot-hold-13-nodes",
        {"grpo-gke:network.gvnicRange": "192.168.64.0/28", "grpo-gke:gpu.nodes": 13, **ANY_NODES},
        "grpo-gke:network.gvnicRange: must be /27 or larger: the gVNIC subnet needs an address for each of the"
        " gpu.nodes=13 GPU nodes, got 192.168.64.0/28",
    ),
]

# ---------------------------------------------------------------- grpo-gke:workload

IMAGE = {"grpo-gke:workload.image": "example.com/verl:custom", "grpo-gke:workload.rayVersion": "2.49.2"}
NEMO_IMAGE = {
    **NEMO,
    "grpo-gke:workload.image": "example.com/nemo-rl:custom",
    "grpo-gke:workload.rayVersion": "2.55.1",
    "grpo-gke:workload.nemoRlRelease": "v0.7.0",
}

WORKLOAD = [
    ok("framework-nemo-rl", NEMO),
    bad(
        "framework-other",
        {"grpo-gke:workload.framework": "trl"},
        "grpo-gke:workload.framework: must be one of 'verl' or 'nemo-rl', got 'trl'",
    ),
    bad("framework-missing", {"grpo-gke:workload.framework": DELETE}, "grpo-gke:workload.framework: is required"),
    ok("model-dotted", {"grpo-gke:workload.model": "meta-llama/Llama-3.1-8B-Instruct"}),
    ok("model-digit-owner", {"grpo-gke:workload.model": "2noise/ChatTTS", "grpo-gke:workload.modelSizeB": 0.5}),
    bad(
        "model-of-unknown-size",
        {"grpo-gke:workload.model": "2noise/ChatTTS"},
        "grpo-gke:workload.modelSizeB: is required: the model id '2noise/ChatTTS' names no size such as 7B; set the"
        " parameters in billions (pulumi config set --path grpo-gke:workload.modelSizeB <N>)",
    ),
    *bad_values(
        "grpo-gke:workload.model",
        "must be a Hugging Face model id such as Qwen/Qwen2.5-7B-Instruct",
        (("empty", ""), ("no-owner", "Qwen2.5-7B"), ("three-parts", "a/b/c"), ("space", "Qwen/Qwen 7B")),
    ),
    bad("model-missing", {"grpo-gke:workload.model": DELETE}, "grpo-gke:workload.model: is required"),
    bad(
        "dataset-other",
        {"grpo-gke:workload.dataset": "math"},
        "grpo-gke:workload.dataset: must be one of 'gsm8k' or 'deepscaler', got 'math'",
    ),
    bad("dataset-missing", {"grpo-gke:workload.dataset": DELETE}, "grpo-gke:workload.dataset: is required"),
    bad(
        "verl-deepscaler",
        {"grpo-gke:workload.dataset": "deepscaler"},
        "grpo-gke:workload.dataset: workload.framework 'verl' with dataset 'deepscaler' has no staging or job"
        " mapping; use one of 'gsm8k'",
    ),
    bad(
        "nemo-rl-gsm8k",
        {**NEMO, "grpo-gke:workload.dataset": "gsm8k"},
        "grpo-gke:workload.dataset: workload.framework 'nemo-rl' with dataset 'gsm8k' has no staging or job"
        " mapping; use one of 'deepscaler'",
    ),
    ok("image-with-ray-version", IMAGE),
    bad(
        "image-without-ray-version",
        {**IMAGE, "grpo-gke:workload.rayVersion": DELETE},
        "grpo-gke:workload.rayVersion: is required with workload.image: the Ray version inside that image",
    ),
    bad(
        "ray-version-without-image",
        {**IMAGE, "grpo-gke:workload.image": DELETE},
        "grpo-gke:workload.rayVersion: is only allowed with workload.image (the default image's is known)",
    ),
    bad(
        "ray-version-malformed",
        {**IMAGE, "grpo-gke:workload.rayVersion": "2.49"},
        "grpo-gke:workload.rayVersion: must be a Ray version such as 2.55.1, got '2.49'",
    ),
    ok("nemo-rl-image-with-release", NEMO_IMAGE),
    bad(
        "nemo-rl-image-without-release",
        {**NEMO_IMAGE, "grpo-gke:workload.nemoRlRelease": DELETE},
        "grpo-gke:workload.nemoRlRelease: is required with workload.image for nemo-rl: one of v0.4.0, v0.5.0,"
        " v0.6.0, v0.7.0",
    ),
    bad(
        "release-without-image",
        {**NEMO, "grpo-gke:workload.nemoRlRelease": "v0.7.0"},
        "grpo-gke:workload.nemoRlRelease: is only allowed with framework 'nemo-rl' and workload.image",
    ),
    bad(
        "release-with-verl",
        {**IMAGE, "grpo-gke:workload.nemoRlRelease": "v0.7.0"},
        "grpo-gke:workload.nemoRlRelease: is only allowed with framework 'nemo-rl' and workload.image",
    ),
    bad(
        "release-unknown",
        {**NEMO_IMAGE, "grpo-gke:workload.nemoRlRelease": "v0.3.0"},
        "grpo-gke:workload.nemoRlRelease: must be one of v0.4.0, v0.5.0, v0.6.0, v0.7.0, got 'v0.3.0'",
    ),
    ok("model-size", {"grpo-gke:workload.modelSizeB": 0.5}),
    bad(
        "model-size-zero",
        {"grpo-gke:workload.modelSizeB": 0},
        "grpo-gke:workload.modelSizeB: must be greater than 0.0, got 0",
    ),
    ok("extra-env", {"grpo-gke:workload.extraEnv": {"NCCL_DEBUG": "INFO", "_X1": ""}}),
    bad(
        "extra-env-bad-name",
        {"grpo-gke:workload.extraEnv": {"1X": "a"}},
        "grpo-gke:workload.extraEnv: keys must be environment variable names (letters, digits and _, not starting"
        " with a digit), got '1X'",
    ),
    *(
        bad(
            f"extra-env-{name}",
            {"grpo-gke:workload.extraEnv": {name: "hf_x"}},
            f"grpo-gke:workload.extraEnv: must not set {name}: it comes from grpo-gke:hfToken, which keeps it secret",
        )
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
    ),
    bad(
        "extra-env-number-value",
        {"grpo-gke:workload.extraEnv": {"NCCL_DEBUG": 1}},
        "grpo-gke:workload.extraEnv.NCCL_DEBUG: must be a string, got 1",
    ),
]

# ---------------------------------------------------------------- grpo-gke:grpo


LLAMA_3 = "meta-llama/Meta-Llama-3-8B-Instruct"
"""A Meta Llama 3 model (8k context)."""


def _knob(name: str, value: Any) -> dict[str, Any]:
    return {**LIGHT, f"grpo-gke:grpo.{name}": value}


GRPO_RANGES = [
    ok("light-base", LIGHT),
    ok("prompts-1", _knob("promptsPerStep", 1)),
    ok("prompts-65536", _knob("promptsPerStep", 65536)),
    bad("prompts-0", _knob("promptsPerStep", 0), "grpo-gke:grpo.promptsPerStep: must be at least 1, got 0"),
    bad(
        "prompts-65537",
        _knob("promptsPerStep", 65537),
        "grpo-gke:grpo.promptsPerStep: must be at most 65536, got 65537",
    ),
    ok("generations-2", _knob("generationsPerPrompt", 2)),
    ok("generations-256", _knob("generationsPerPrompt", 256)),
    bad(
        "generations-1",
        _knob("generationsPerPrompt", 1),
        "grpo-gke:grpo.generationsPerPrompt: must be at least 2, got 1",
    ),
    bad(
        "generations-257",
        _knob("generationsPerPrompt", 257),
        "grpo-gke:grpo.generationsPerPrompt: must be at most 256, got 257",
    ),
    *(ok(f"tensor-parallel-{tp}", _knob("rolloutTensorParallel", tp)) for tp in (1, 2, 4, 8)),
    *(
        bad(
            f"tensor-parallel-{tp}",
            _knob("rolloutTensorParallel", tp),
            f"grpo-gke:grpo.rolloutTensorParallel: must divide 8 (1, 2, 4 or 8), got {tp}",
        )
        for tp in (3, 5, 6, 7)
    ),
    bad(
        "tensor-parallel-0",
        _knob("rolloutTensorParallel", 0),
        "grpo-gke:grpo.rolloutTensorParallel: must be at least 1, got 0",
    ),
    bad(
        "tensor-parallel-16",
        _knob("rolloutTensorParallel", 16),
        "grpo-gke:grpo.rolloutTensorParallel: must be at most 8, got 16",
    ),
    ok("learning-rate-max", _knob("learningRate", 1e-3)),
    ok("learning-rate-tiny", _knob("learningRate", 1e-9)),
    bad("learning-rate-0", _knob("learningRate", 0), "grpo-gke:grpo.learningRate: must be greater than 0.0, got 0"),
    bad(
        "learning-rate-above",
        _knob("learningRate", 0.002),
        "grpo-gke:grpo.learningRate: must be at most 0.001, got 0.002",
    ),
    bad(
        "learning-rate-text", _knob("learningRate", "fast"), "grpo-gke:grpo.learningRate: must be a number, got 'fast'"
    ),
    *(
        # The field's own range, on a model with no context fact (core/facts/job.py MODEL_CONTEXT_TOKENS): the dev
        # model's 32768-token context refuses 131072 (issue 34 item 4, the case below).
        ok(f"{key}-{value}", {**_knob(key, value), "grpo-gke:workload.model": "meta-llama/Llama-3.1-8B-Instruct"})
        for key in ("maxPromptLength", "maxResponseLength")
        for value in (16, 131072)
    ),
    bad(
        "prompt-beyond-the-context",
        _knob("maxPromptLength", 32768),
        "grpo-gke:grpo.maxResponseLength: maxPromptLength + maxResponseLength (32768 + 1024 = 33792 tokens) is more"
        " than the 32768 tokens of Qwen/Qwen2.5-0.5B-Instruct's context (Qwen2.5's config.json"
        " max_position_embeddings, vLLM's max_model_len); shorten them",
    ),
    # Issue 34 item 4: Meta Llama 3's 8k context (core/facts/job.py MODEL_CONTEXT_TOKENS).
    ok("llama-3-context-whole", {**_knob("maxResponseLength", 7680), "grpo-gke:workload.model": LLAMA_3}),
    bad(
        "llama-3-beyond-the-context",
        {**_knob("maxResponseLength", 7681), "grpo-gke:workload.model": LLAMA_3},
        "grpo-gke:grpo.maxResponseLength: maxPromptLength + maxResponseLength (512 + 7681 = 8193 tokens) is more than"
        " the 8192 tokens of meta-llama/Meta-Llama-3-8B-Instruct's context (the Meta Llama 3 card's 8k context);"
        " shorten them",
    ),
    *(
        bad(f"{key}-15", _knob(key, 15), f"grpo-gke:grpo.{key}: must be at least 16, got 15")
        for key in ("maxPromptLength", "maxResponseLength")
    ),
    *(
        bad(f"{key}-131073", _knob(key, 131073), f"grpo-gke:grpo.{key}: must be at most 131072, got 131073")
        for key in ("maxPromptLength", "maxResponseLength")
    ),
    ok("mini-batch-1", _knob("miniBatchSize", 1)),
    bad("mini-batch-0", _knob("miniBatchSize", 0), "grpo-gke:grpo.miniBatchSize: must be at least 1, got 0"),
    ok("micro-batch-1024", {**_knob("microBatchSizePerGpu", 1024), "grpo-gke:grpo.promptsPerStep": 1024}),
    bad(
        "micro-batch-0",
        _knob("microBatchSizePerGpu", 0),
        "grpo-gke:grpo.microBatchSizePerGpu: must be at least 1, got 0",
    ),
    bad(
        "micro-batch-1025",
        _knob("microBatchSizePerGpu", 1025),
        "grpo-gke:grpo.microBatchSizePerGpu: must be at most 1024, got 1025",
    ),
    ok("kl-0", _knob("klLossCoef", 0)),
    ok("kl-10", _knob("klLossCoef", 10)),
    bad("kl-negative", _knob("klLossCoef", -0.1), "grpo-gke:grpo.klLossCoef: must be at least 0.0, got -0.1"),
    bad("kl-above", _knob("klLossCoef", 10.5), "grpo-gke:grpo.klLossCoef: must be at most 10.0, got 10.5"),
    ok("gpu-memory-0.06", _knob("gpuMemoryUtilization", 0.06)),
    ok("gpu-memory-0.95", _knob("gpuMemoryUtilization", 0.95)),
    bad(
        "gpu-memory-0.05",
        _knob("gpuMemoryUtilization", 0.05),
        "grpo-gke:grpo.gpuMemoryUtilization: must be greater than 0.05, got 0.05",
    ),
    bad(
        "gpu-memory-0.96",
        _knob("gpuMemoryUtilization", 0.96),
        "grpo-gke:grpo.gpuMemoryUtilization: must be at most 0.95, got 0.96",
    ),
    ok("epochs-1000", _knob("epochs", 1000)),
    bad("epochs-0", _knob("epochs", 0), "grpo-gke:grpo.epochs: must be at least 1, got 0"),
    bad("epochs-1001", _knob("epochs", 1001), "grpo-gke:grpo.epochs: must be at most 1000, got 1001"),
    bad("epochs-fraction", _knob("epochs", 1.5), "grpo-gke:grpo.epochs: must be a whole number, got 1.5"),
    ok("max-steps-1", _knob("maxSteps", 1)),
    bad("max-steps-0", _knob("maxSteps", 0), "grpo-gke:grpo.maxSteps: must be at least 1, got 0"),
    ok("save-every-1", _knob("saveEvery", 1)),
    bad("save-every-0", _knob("saveEvery", 0), "grpo-gke:grpo.saveEvery: must be at least 1, got 0"),
    ok("validate-every-1", _knob("validateEvery", 1)),
    bad("validate-every-0", _knob("validateEvery", 0), "grpo-gke:grpo.validateEvery: must be at least 1, got 0"),
    ok("keep-checkpoints-1", _knob("keepCheckpoints", 1)),
    ok("keep-checkpoints-100", _knob("keepCheckpoints", 100)),
    bad("keep-checkpoints-0", _knob("keepCheckpoints", 0), "grpo-gke:grpo.keepCheckpoints: must be at least 1, got 0"),
    bad(
        "keep-checkpoints-101",
        _knob("keepCheckpoints", 101),
        "grpo-gke:grpo.keepCheckpoints: must be at most 100, got 101",
    ),
]


def _grpo(**knobs: Any) -> dict[str, Any]:
    return {"grpo-gke:grpo": knobs}


GRPO_CROSS = [
    ok("mini-equals-prompts", _grpo(promptsPerStep=64, miniBatchSize=64, microBatchSizePerGpu=1)),
    bad(
        "mini-above-prompts",
        _grpo(promptsPerStep=64, miniBatchSize=128, microBatchSizePerGpu=1),
        "grpo-gke:grpo.miniBatchSize: must be at most grpo.promptsPerStep (64), got 128",
    ),
    ok("mini-divides-prompts", _grpo(promptsPerStep=64, miniBatchSize=16, microBatchSizePerGpu=1)),
    bad(
        "mini-does-not-divide-prompts",
        _grpo(promptsPerStep=64, miniBatchSize=24, microBatchSizePerGpu=1),
        "grpo-gke:grpo.miniBatchSize: must divide grpo.promptsPerStep (64), got 24",
    ),
    ok("verl-samples-divide-gpus", {**_grpo(promptsPerStep=2, microBatchSizePerGpu=1), "grpo-gke:gpu.nodes": 2}),
    bad(
        "verl-samples-not-divisible-by-gpus",
        {**_grpo(promptsPerStep=1, microBatchSizePerGpu=1), "grpo-gke:gpu.nodes": 2},
        "grpo-gke:grpo.promptsPerStep: promptsPerStep x generationsPerPrompt (1 x 8 = 8) must be divisible by the"
        " 16 GPUs of gpu.nodes=2",
    ),
    ok(
        "verl-mini-divides-gpus",
        {**_grpo(promptsPerStep=4, miniBatchSize=2, microBatchSizePerGpu=1), "grpo-gke:gpu.nodes": 2},
    ),
    bad(
        "verl-mini-not-divisible-by-gpus",
        {**_grpo(promptsPerStep=4, miniBatchSize=1, microBatchSizePerGpu=1), "grpo-gke:gpu.nodes": 2},
        "grpo-gke:grpo.miniBatchSize: miniBatchSize x generationsPerPrompt (8) must be divisible by the 16 GPUs",
    ),
    ok("verl-micro-divides-share", {"grpo-gke:grpo.microBatchSizePerGpu": 4}),
    bad(
        "verl-micro-does-not-divide-share",
        {"grpo-gke:grpo.microBatchSizePerGpu": 3},
        "grpo-gke:grpo.microBatchSizePerGpu: must divide each GPU's share of a mini-batch (256), got 3",
    ),
    ok("nemo-rl-samples-divide-gpus-times-micro", NEMO),
    bad(
        "nemo-rl-samples-not-divisible",
        {**NEMO, "grpo-gke:grpo.microBatchSizePerGpu": 3},
        "grpo-gke:grpo.promptsPerStep: promptsPerStep x generationsPerPrompt (256) must be divisible by the 8 GPUs"
        " x microBatchSizePerGpu (3)",
    ),
    ok("nemo-rl-has-no-verl-share-rule", {**NEMO, "grpo-gke:grpo.miniBatchSize": 1}),
    bad(
        "verl-share-rule",
        {**NEMO, "grpo-gke:grpo.miniBatchSize": 1, "grpo-gke:workload": BASE["grpo-gke:workload"]},
        "grpo-gke:grpo.microBatchSizePerGpu: must divide each GPU's share of a mini-batch (1), got 4",
    ),
    bad(
        "unknown-knob",
        {"grpo-gke:grpo.prompts": 64},
        "grpo-gke:grpo.prompts: unknown key; did you mean 'promptsPerStep'? (known: cpuOffload, epochs, generationsPerPrompt,"
        " gpuMemoryUtilization, keepCheckpoints, klLossCoef, learningRate, maxPromptLength, maxResponseLength,"
        " maxSteps, microBatchSizePerGpu, miniBatchSize, promptsPerStep, rolloutTensorParallel, saveEvery,"
        " validateEvery)",
    ),
]

# ---------------------------------------------------------------- grpo-gke:job and grpo-gke:hfToken

JOB_AND_TOKEN = [
    ok("submit-off", {"grpo-gke:job.submit": False}),
    bad("submit-not-bool", {"grpo-gke:job.submit": "maybe"}, "grpo-gke:job.submit: must be true or false, got 'maybe'"),
    ok("timeout-10", {"grpo-gke:job.readyTimeoutSeconds": 10}),
    ok("timeout-86400", {"grpo-gke:job.readyTimeoutSeconds": 86400}),
    bad(
        "timeout-9",
        {"grpo-gke:job.readyTimeoutSeconds": 9},
        "grpo-gke:job.readyTimeoutSeconds: must be at least 10, got 9",
    ),
    bad(
        "timeout-86401",
        {"grpo-gke:job.readyTimeoutSeconds": 86401},
        "grpo-gke:job.readyTimeoutSeconds: must be at most 86400, got 86401",
    ),
    ok("recover-off", {"grpo-gke:job.recover": False}),
    bad("recover-not-bool", {"grpo-gke:job.recover": "yes"}, "grpo-gke:job.recover: must be true or false, got 'yes'"),
    ok("recoveries-0", {"grpo-gke:job.maxRecoveries": 0}),
    bad(
        "recoveries-negative",
        {"grpo-gke:job.maxRecoveries": -1},
        "grpo-gke:job.maxRecoveries: must be at least 0, got -1",
    ),
    bad(
        "recoveries-bool",
        {"grpo-gke:job.maxRecoveries": True},
        "grpo-gke:job.maxRecoveries: must be a whole number, got True",
    ),
    ok("idle-off", {"grpo-gke:job.idleMinutes": 0}),
    bad("idle-negative", {"grpo-gke:job.idleMinutes": -5}, "grpo-gke:job.idleMinutes: must be at least 0, got -5"),
    ok("preflight-gpu-on-one-node", {"grpo-gke:job.preflight": "gpu"}),
    ok("preflight-off", {"grpo-gke:job.preflight": "off"}),
    ok("preflight-full-on-two-nodes", {"grpo-gke:job.preflight": "full", "grpo-gke:gpu.nodes": 2}),
    bad(
        "preflight-other",
        {"grpo-gke:job.preflight": "nccl"},
        "grpo-gke:job.preflight: must be one of 'full', 'gpu' or 'off', got 'nccl'",
    ),
    bad(
        "preflight-full-on-one-node",
        {"grpo-gke:job.preflight": "full"},
        "grpo-gke:job.preflight: full tests the fabric between GPU nodes and needs gpu.nodes of 2 or more; use gpu"
        " on one node, got 'full'",
    ),
    bad(
        "preflight-full-without-rdma-nics",
        {"grpo-gke:job.preflight": "full", "grpo-gke:gpu.type": "l4", "grpo-gke:gpu.nodes": 2},
        "grpo-gke:job.preflight: full tests the RDMA fabric (gIB) between GPU nodes, and g2-standard-8 has no RDMA NICs;"
        " use gpu, got 'full'",
    ),
    ok(
        "preflight-gpu-without-rdma-nics",
        {"grpo-gke:job.preflight": "gpu", "grpo-gke:gpu.type": "l4", "grpo-gke:gpu.nodes": 2},
    ),
    ok("cordon-with-the-default-preflight", {"grpo-gke:job.cordonBadNodes": True}),
    bad(
        "cordon-not-bool",
        {"grpo-gke:job.cordonBadNodes": "yes please"},
        "grpo-gke:job.cordonBadNodes: must be true or false, got 'yes please'",
    ),
    bad(
        "cordon-without-preflight",
        {"grpo-gke:job.cordonBadNodes": True, "grpo-gke:job.preflight": "off"},
        "grpo-gke:job.cordonBadNodes: cordons the nodes a preflight names, and job.preflight is off; set"
        " job.preflight to gpu or full, or cordonBadNodes to false",
    ),
    ok("budget-cost-and-gpu-hours", {"grpo-gke:job.maxCost": 250.5, "grpo-gke:job.maxGpuHours": 64}),
    bad("budget-cost-0", {"grpo-gke:job.maxCost": 0}, "grpo-gke:job.maxCost: must be greater than 0.0, got 0"),
    bad(
        "budget-gpu-hours-negative",
        {"grpo-gke:job.maxGpuHours": -8},
        "grpo-gke:job.maxGpuHours: must be greater than 0.0, got -8",
    ),
    bad(
        "budget-without-the-guardian",
        {"grpo-gke:job.maxCost": 100, "grpo-gke:job.recover": False},
        "grpo-gke:job.maxCost: needs job.recover true: the run guardian keeps the budget; set job.recover true or"
        " unset the key",
    ),
    bad(
        "budget-on-nemo-rl",
        {**NEMO, "grpo-gke:job.maxGpuHours": 16},
        "grpo-gke:job.maxGpuHours: is kept for verl runs only: the guardian stops a verl attempt right after a save,"
        " and NeMo-RL's saves are not read yet; unset the key",
    ),
    ok("token-set", {"grpo-gke:hfToken": "hf_abc"}),
    *(
        bad(
            f"token-{label}",
            {"grpo-gke:hfToken": token},
            "grpo-gke:hfToken: must not be empty; unset it for public models (pulumi config rm grpo-gke:hfToken)",
        )
        for label, token in (("empty", ""), ("blank", "  "))
    ),
    ok("wandb-key-set", {"grpo-gke:wandbApiKey": "wandb-abc"}),
    bad(
        "wandb-key-blank",
        {"grpo-gke:wandbApiKey": " "},
        "grpo-gke:wandbApiKey: must not be empty; unset it to turn W&B off (pulumi config rm grpo-gke:wandbApiKey)",
    ),
    ok(
        "tracking-project-entity",
        {"grpo-gke:tracking.wandbProject": "my-grpo_1.x", "grpo-gke:tracking.wandbEntity": "my-team"},
    ),
    *bad_values(
        "grpo-gke:tracking.wandbProject",
        "must be 1 to 128 letters, digits, '.', '_' or '-'",
        (("empty", ""), ("slash", "team/project"), ("space", "my project")),
    ),
    *bad_values(
        "grpo-gke:tracking.wandbEntity", "must be 1 to 128 letters, digits, '.', '_' or '-'", (("slash", "a/b"),)
    ),
    bad(
        "tracking-typo",
        {"grpo-gke:tracking.wandbProjekt": "p"},
        "grpo-gke:tracking.wandbProjekt: unknown key; did you mean 'wandbProject'? (known: wandbEntity, wandbProject)",
    ),
    ok("wandb-key-in-secret-env-without-wandbapikey", {"grpo-gke:secretEnv": {"WANDB_API_KEY": "k"}}),
    bad(
        "wandb-key-twice",
        {"grpo-gke:wandbApiKey": "wandb-abc", "grpo-gke:secretEnv": {"WANDB_API_KEY": "k"}},
        "grpo-gke:secretEnv: WANDB_API_KEY comes from grpo-gke:wandbApiKey; remove it here:"
        " pulumi config rm --path 'grpo-gke:secretEnv.WANDB_API_KEY'",
    ),
]


# ---------------------------------------------------------------- the GPU driver and the image's CUDA

OLD_1_30 = {"grpo-gke:cluster.minVersion": "1.30.9-gke.1000000"}
"""A pin below every GPU floor and below the GKE versions whose LATEST driver is R580."""

OLD_1_30_FLOORS = [
    "grpo-gke:cluster.minVersion: must be at least 1.31.4-gke.1183000 for GPUDirect RDMA on H200 (standard),"
    " got 1.30.9-gke.1000000",
]

DRIVER = [
    ok("cuda-12-user-image", {**IMAGE, "grpo-gke:workload.cudaVersion": "12.8"}),
    ok("cuda-13-user-image", {**IMAGE, "grpo-gke:workload.cudaVersion": "13.0"}),
    *bad_values(
        "grpo-gke:workload.cudaVersion",
        "must be a CUDA version such as 12.8",
        (("no-minor", "13"), ("text", "cuda13"), ("patch", "12.8.1")),
        base=IMAGE,
    ),
    *bad_values(
        "grpo-gke:workload.cudaVersion",
        "must be a CUDA 12 or 13 version (the driver branches known here)",
        (("unknown-major", "14.0"), ("old-major", "11.8")),
        base=IMAGE,
    ),
    bad(
        "cuda-without-image",
        {"grpo-gke:workload.cudaVersion": "12.8"},
        "grpo-gke:workload.cudaVersion: is only allowed with workload.image (the default image's is known)",
    ),
    # A pinned CUDA 13 image on a cluster pinned below R580: refused, naming the image.
    bad(
        "pinned-image-below-r580",
        OLD_1_30,
        "grpo-gke:cluster.minVersion: must be at least 1.31.0-gke.0 for GKE's LATEST GPU driver R580: CUDA 13.0"
        " (the pinned verl image) needs R580, and the H200 DEFAULT driver is R550, got 1.30.9-gke.1000000",
        *OLD_1_30_FLOORS,
    ),
    bad(
        "user-cuda-13-below-r580",
        {**IMAGE, "grpo-gke:workload.cudaVersion": "13.0", **OLD_1_30},
        "grpo-gke:cluster.minVersion: must be at least 1.31.0-gke.0 for GKE's LATEST GPU driver R580: CUDA 13.0"
        " (workload.cudaVersion) needs R580, and the H200 DEFAULT driver is R550, got 1.30.9-gke.1000000",
        *OLD_1_30_FLOORS,
    ),
    # CUDA 12 fits the DEFAULT driver from its version on; below it LATEST serves, which has R580.
    bad(
        "user-cuda-12-old-pin-only-rdma",
        {**IMAGE, "grpo-gke:workload.cudaVersion": "12.8", **OLD_1_30},
        *OLD_1_30_FLOORS,
    ),
]


# ---------------------------------------------------------------- grpo-gke:workload.imageSource

NEMO_RL = {"grpo-gke:workload.framework": "nemo-rl", "grpo-gke:workload.dataset": "deepscaler"}
"""The NeMo-RL workload on its pinned image (nvcr.io)."""

IMAGE_SOURCE = [
    ok("image-source-direct", {"grpo-gke:workload.imageSource": "direct"}),
    # unset, an image of a registry the stack cannot proxy is pulled directly, not refused
    ok("image-source-unset-other-registry", IMAGE),
    ok(
        "image-source-unset-artifact-registry",
        {**IMAGE, "grpo-gke:workload.image": "us-central1-docker.pkg.dev/my-grpo-project/images/verl:custom"},
    ),
    ok("image-source-registry-docker-hub", {"grpo-gke:workload.imageSource": "registry"}),
    ok("image-source-registry-nvcr", {**NEMO_RL, "grpo-gke:workload.imageSource": "registry"}),
    ok(
        "image-source-registry-user-docker-hub",
        {**IMAGE, "grpo-gke:workload.image": "myteam/verl:custom", "grpo-gke:workload.imageSource": "registry"},
    ),
    bad(
        "image-source-other",
        {"grpo-gke:workload.imageSource": "mirror"},
        "grpo-gke:workload.imageSource: must be one of 'direct' or 'registry', got 'mirror'",
    ),
    bad(
        "image-source-registry-unknown-upstream",
        {**IMAGE, "grpo-gke:workload.imageSource": "registry"},
        "grpo-gke:workload.imageSource: 'registry' proxies docker.io, nvcr.io only; workload.image comes from"
        " example.com: set workload.imageSource to 'direct', or push the image to Artifact Registry and name it"
        " there",
    ),
    bad(
        "image-source-registry-already-artifact-registry",
        {
            **IMAGE,
            "grpo-gke:workload.image": "us-central1-docker.pkg.dev/my-grpo-project/images/verl:custom",
            "grpo-gke:workload.imageSource": "registry",
        },
        "grpo-gke:workload.imageSource: workload.image is already in Artifact Registry"
        " (us-central1-docker.pkg.dev), which GKE streams from directly; set workload.imageSource to 'direct'",
    ),
]


@pytest.mark.parametrize(
    ("changes", "source"),
    [
        pytest.param({}, "registry", id="unset-docker-hub"),
        pytest.param(NEMO_RL, "registry", id="unset-nvcr"),
        pytest.param(
            {**IMAGE, "grpo-gke:workload.image": "myteam/verl:custom"}, "registry", id="unset-user-docker-hub"
        ),
        pytest.param(IMAGE, "direct", id="unset-other-registry"),
        pytest.param(
            {**IMAGE, "grpo-gke:workload.image": "us-central1-docker.pkg.dev/my-grpo-project/images/verl:custom"},
            "direct",
            id="unset-artifact-registry",
        ),
        pytest.param({"grpo-gke:workload.imageSource": "direct"}, "direct", id="direct"),
        pytest.param({**NEMO_RL, "grpo-gke:workload.imageSource": "direct"}, "direct", id="direct-nvcr"),
    ],
)
def test_image_source_unset_streams_what_a_remote_repository_can_proxy(changes: dict[str, Any], source: str) -> None:
    """Images are streamed by default (issue 33 item 4): unset, workload.imageSource is `registry` for a Docker Hub or
    nvcr.io image (core/facts/gcp.py UPSTREAMS) and `direct` for any other; a value set is kept."""
    config = load_config(raw_values(changes), (), "test").config
    assert config.workload.resolved_image_source() == source
    expected_upstreams = (
        (names.parse_image(config.workload.resolved_image().image).host,) if source == "registry" else ()
    )
    assert config.image_upstreams() == expected_upstreams


# ---------------------------------------------------------------- grpo-gke:workload.ngcApiKeySecretVersion

NGC_KEY = "grpo-gke:workload.ngcApiKeySecretVersion"
NGC_VERSION = "projects/my-grpo-project/secrets/ngc-api-key/versions/3"
NVCR_REGISTRY = {**NEMO_RL, "grpo-gke:workload.imageSource": "registry"}
"""The NeMo-RL workload pulled through the stack's nvcr.io remote repository."""
NGC_LOOKALIKE = "nvapi-0123456789abcdefABCDEF_0123456789abcdefABCDEF-0123456789abcdef"
"""A string shaped like an NGC personal API key (made up): what a user might paste instead of the name."""
NOT_A_VERSION = (
    "grpo-gke:workload.ngcApiKeySecretVersion: must be a Secret Manager secret version's resource name"
    " projects/P/secrets/S/versions/N, N a version number (the value is not shown)"
)

NGC_KEY_CASES = [
    ok("ngc-key-nvcr-registry", {**NVCR_REGISTRY, NGC_KEY: NGC_VERSION}),
    ok("ngc-key-project-number", {**NVCR_REGISTRY, NGC_KEY: "projects/123456789012/secrets/ngc/versions/1"}),
    ok(
        "ngc-key-user-nvcr-image",
        {
            **NEMO_IMAGE,
            **NVCR_REGISTRY,
            "grpo-gke:workload.image": "nvcr.io/my-org/nemo-rl:custom",
            NGC_KEY: NGC_VERSION,
        },
    ),
    bad(
        "ngc-key-is-the-key",
        {**NVCR_REGISTRY, NGC_KEY: NGC_LOOKALIKE},
        f"{NGC_KEY}: looks like the key itself, not a resource name (the value is not shown): keep the key out of"
        " the stack config; store it in Secret Manager and set this to the version's resource name"
        " projects/P/secrets/S/versions/N (docs/configuration.md, Images)",
    ),
    *[
        bad(f"ngc-key-{label}", {**NVCR_REGISTRY, NGC_KEY: value}, NOT_A_VERSION)
        for label, value in (
            ("secret-not-version", "projects/my-grpo-project/secrets/ngc-api-key"),
            ("latest-alias", "projects/my-grpo-project/secrets/ngc-api-key/versions/latest"),
            ("version-zero", "projects/my-grpo-project/secrets/ngc-api-key/versions/0"),
            ("no-projects", "my-grpo-project/secrets/ngc-api-key/versions/1"),
            ("url", "https://secretmanager.googleapis.com/v1/projects/p-123456/secrets/s/versions/1"),
            ("uppercase-project", "projects/My-Project/secrets/ngc/versions/1"),
        )
    ],
    # unset, an nvcr.io image goes through the stack's nvcr.io remote repository, which takes the key
    ok("ngc-key-nvcr-default-source", {**NEMO_RL, NGC_KEY: NGC_VERSION}),
    bad(
        "ngc-key-direct",
        {**NEMO_RL, "grpo-gke:workload.imageSource": "direct", NGC_KEY: NGC_VERSION},
        f"{NGC_KEY}: is the credentials of the stack's nvcr.io remote repository, which workload.imageSource"
        " 'direct' goes without (the nodes pull from nvcr.io themselves, anonymously): unset workload.imageSource"
        " (an nvcr.io image's default is 'registry'), or remove this key",
    ),
    bad(
        "ngc-key-other-registry-default-source",
        {**NEMO_IMAGE, NGC_KEY: NGC_VERSION},
        f"{NGC_KEY}: is the credentials of the stack's nvcr.io remote repository, but workload.image comes from"
        " example.com: remove this key, or name an nvcr.io image",
    ),
    bad(
        "ngc-key-other-registry-image",
        {**NEMO_IMAGE, **NVCR_REGISTRY, NGC_KEY: NGC_VERSION},
        "grpo-gke:workload.imageSource: 'registry' proxies docker.io, nvcr.io only; workload.image comes from"
        " example.com: set workload.imageSource to 'direct', or push the image to Artifact Registry and name it"
        " there",
        f"{NGC_KEY}: is the credentials of the stack's nvcr.io remote repository, but workload.image comes from"
        " example.com: remove this key, or name an nvcr.io image",
    ),
    bad(
        "ngc-key-docker-hub-image",
        {"grpo-gke:workload.imageSource": "registry", NGC_KEY: NGC_VERSION},
        f"{NGC_KEY}: is the credentials of the stack's nvcr.io remote repository, but workload.image comes from"
        " docker.io: remove this key, or name an nvcr.io image",
    ),
]


def test_a_pasted_ngc_key_is_never_shown_in_the_problems() -> None:
    """The key pasted as the value, in clear or as a Pulumi secret: neither message repeats it."""
    lines = problem_lines({**NVCR_REGISTRY, NGC_KEY: NGC_LOOKALIKE})
    assert lines and NGC_LOOKALIKE not in "\n".join(lines)
    lines = problem_lines({**NVCR_REGISTRY, NGC_KEY: NGC_LOOKALIKE}, ("grpo-gke:workload",))
    assert NGC_LOOKALIKE not in "\n".join(lines)
    assert lines[0] == (
        "grpo-gke:workload: is a secret, but only grpo-gke:hfToken, grpo-gke:wandbApiKey and grpo-gke:secretEnv keep"
        " secrets out of the manifests and the state: for an environment variable, pulumi config rm --path"
        " 'grpo-gke:workload.extraEnv.<NAME>', then pulumi config set --secret --path 'grpo-gke:secretEnv.<NAME>'"
        " <value>; set any other field of grpo-gke:workload in plaintext"
    )


def test_an_ngc_key_set_as_a_pulumi_secret_is_sent_to_secret_manager() -> None:
    """`pulumi config set --secret --path grpo-gke:workload.ngcApiKeySecretVersion <key>`: offline the secret leaf
    is known, and the advice is Secret Manager, not the same key in plaintext."""
    lines = problem_lines({**NVCR_REGISTRY, NGC_KEY: SECURE}, ("grpo-gke:workload",))
    assert lines[0] == (
        f"{NGC_KEY}: is a secret, but only grpo-gke:hfToken, grpo-gke:wandbApiKey and grpo-gke:secretEnv keep secrets"
        " out of the manifests and the state: an NGC API key belongs in Secret Manager, not in the stack config:"
        f" store it there, then pulumi config set --path '{NGC_KEY}' projects/P/secrets/S/versions/N (its"
        " version's resource name, in plaintext)"
    )


def test_every_cuda_major_has_a_latest_driver_that_runs_it() -> None:
    """The driver facts agree: each known CUDA major's branch is carried by some GKE LATEST driver, and the
    pinned images' CUDA versions are of known majors."""
    for major, branch in CUDA_MAJOR_DRIVER_BRANCH.items():
        assert any(known >= branch for known in LATEST_DRIVER_FLOORS), major
    for image in DEFAULT_IMAGES.values():
        assert image.cuda_version is not None and int(image.cuda_version.split(".")[0]) in CUDA_MAJOR_DRIVER_BRANCH


# ---------------------------------------------------------------- grpo-gke:secretEnv and secrets elsewhere

SECRET_ENV = [
    ok("secret-env", {"grpo-gke:secretEnv": {"WANDB_API_KEY": "k", "_OTHER1": "v"}}),
    bad(
        "secret-env-name",
        {"grpo-gke:secretEnv": {"1BAD": "v"}},
        "grpo-gke:secretEnv: keys must be environment variable names (letters, digits and _, not starting with a"
        " digit), got '1BAD'",
    ),
    bad(
        "secret-env-token",
        {"grpo-gke:secretEnv": {"HF_TOKEN": "v"}},
        "grpo-gke:secretEnv: must not set HF_TOKEN: it comes from grpo-gke:hfToken, which keeps it secret",
    ),
    bad(
        "secret-env-empty",
        {"grpo-gke:secretEnv": {"WANDB_API_KEY": " "}},
        "grpo-gke:secretEnv: WANDB_API_KEY must not be empty; unset it with"
        " pulumi config rm --path 'grpo-gke:secretEnv.WANDB_API_KEY'",
    ),
    bad(
        "secret-env-not-a-map",
        {"grpo-gke:secretEnv": "v"},
        "grpo-gke:secretEnv: must be an object of keys, got '[secret]'",
    ),
    bad(
        "secret-env-also-extra-env",
        {"grpo-gke:secretEnv": {"WANDB_API_KEY": "k"}, "grpo-gke:workload.extraEnv": {"WANDB_API_KEY": "k"}},
        "grpo-gke:workload.extraEnv: WANDB_API_KEY is also in grpo-gke:secretEnv; keep it only there:"
        " pulumi config rm --path 'grpo-gke:workload.extraEnv.WANDB_API_KEY'",
    ),
]


@pytest.mark.parametrize(
    ("changes", "expected"),
    TOP_LEVEL
    + CLUSTER
    + VERSION_FLOORS
    + GPU
    + STORAGE
    + LUSTRE_SIZES
    + NETWORK
    + WORKLOAD
    + GRPO_RANGES
    + GRPO_CROSS
    + JOB_AND_TOKEN
    + DRIVER
    + IMAGE_SOURCE
    + NGC_KEY_CASES
    + SECRET_ENV,
)
def test_rule(changes: dict[str, Any], expected: list[str]) -> None:
    """Each rule: the good case loads, the bad case gives exactly the expected problem lines."""
    assert problem_lines(changes) == expected


# ---------------------------------------------------------------- reporting, defaults, secrets


def test_every_problem_on_its_own_line_sorted() -> None:
    """Independent mistakes are all reported, one line each, sorted by key path."""
    changes = {
        "gcp:project": "BAD",
        "grpo-gke:gpu.nodes": 0,
        "grpo-gke:workload.model": "",
        "grpo-gke:grpo": {"epochs": 0},
        "grpo-gke:xyzzy": "1",
    }
    assert problem_lines(changes) == [
        "gcp:project: must be a project id (6 to 30 lowercase letters, digits, hyphens), got 'BAD'",
        "grpo-gke:gpu.nodes: must be at least 1, got 0",
        "grpo-gke:grpo.epochs: must be at least 1, got 0",
        "grpo-gke:workload.model: must be a Hugging Face model id such as Qwen/Qwen2.5-7B-Instruct, got ''",
        f"grpo-gke:xyzzy: unknown key (known: {KNOWN_TOP})",
    ]


def test_a_flat_key_set_without_path_says_how_to_set_the_field() -> None:
    """`pulumi config set grpo-gke:gpu.nodes 2` (no --path) stores a flat key; the problem says what to run.
    A dotted key under an unstructured one stays an unknown key."""
    values = raw_values({})
    values["grpo-gke:gpu.nodes"] = "2"
    values["grpo-gke:zone.x"] = "1"
    with pytest.raises(ConfigError) as caught:
        load_config(values, (), "t")
    assert [str(problem) for problem in caught.value.problems] == [
        "grpo-gke:gpu.nodes: is a flat key, not a field of grpo-gke:gpu: pulumi config rm grpo-gke:gpu.nodes,"
        " then pulumi config set --path grpo-gke:gpu.nodes <value>",
        f"grpo-gke:zone.x: unknown key; did you mean 'grpo-gke:zone'? (known: {KNOWN_TOP})",
    ]


def test_cross_problems_all_reported() -> None:
    """Cross-key problems of different sections come together, sorted."""
    changes = {
        "grpo-gke:zone": "us-east1-b",
        "grpo-gke:gpu.reservation": "res",
        "grpo-gke:workload.dataset": "deepscaler",
    }
    assert [line.split(":", 2)[1] for line in problem_lines(changes)] == [
        "gpu.reservation",
        "workload.dataset",
        "zone",
    ]


def test_config_error_deduplicates() -> None:
    """The same problem twice is one line."""
    problem = Problem("grpo-gke:gpu.nodes", "must be at least 1, got 0")
    assert ConfigError([problem, problem]).problems == [problem]


def test_base_config_defaults() -> None:
    """The documented defaults: Standard on REGULAR, spot, keepOnDestroy, derived names, pinned image."""
    loaded = load_config(raw_values({}), (), "test")
    config = loaded.config
    assert loaded.warnings == (OPEN_CONTROL_PLANE,)
    assert (config.stack, config.project, config.region, config.zone) == (
        "test",
        "my-grpo-project",
        "us-central1",
        "us-central1-b",
    )
    assert (config.cluster.mode, config.cluster.release_channel, config.cluster.min_version) == (
        "standard",
        "REGULAR",
        None,
    )
    assert config.cluster.deletion_protection is False
    assert (config.gpu.provisioning, config.gpu.reservation) == ("spot", None)
    assert config.storage.keep_on_destroy is True
    assert config.cluster_name == "grpo-test"
    assert config.bucket_name == "my-grpo-project-grpo-test"
    assert config.total_gpus == 8
    assert config.gpu_machine.machine_type == "a3-ultragpu-8g"
    assert config.hf_token is None
    assert config.workload.resolved_image() == DEFAULT_IMAGES["verl"]
    assert config.grpo.effective_mini_batch() == config.grpo.prompts_per_step == 256
    assert config.job.submit is True


def test_section_defaults() -> None:
    """The defaults of the optional sections, as users see them (camelCase)."""
    config = load_config(raw_values({}), (), "test").config
    assert config.cluster.model_dump(by_alias=True) == {
        "mode": "standard",
        "name": None,
        "releaseChannel": "REGULAR",
        "minVersion": None,
        "deletionProtection": False,
        "headMachineType": "c2-standard-16",
        "authorizedNetworks": [],
        "dnsEndpoint": False,
        "secretsKmsKey": None,
    }
    assert config.network.model_dump(by_alias=True) == {
        "nodeRange": "192.168.0.0/18",
        "podRange": "10.4.0.0/14",
        "serviceRange": "10.0.32.0/20",
        "gvnicRange": "192.168.64.0/18",
        "rdmaRange": "192.168.128.0/18",
        "lustreRange": "10.0.64.0/22",
    }
    # rolloutTensorParallel and microBatchSizePerGpu are derived (jobs/spec/defaults.py): a 0.5B model fits
    # one GPU, and 8 samples of 1536 tokens are the most within 16384 tokens that divide 256 x 8 / 8 GPUs.
    assert config.grpo.model_dump(by_alias=True) == {
        "promptsPerStep": 256,
        "generationsPerPrompt": 8,
        "rolloutTensorParallel": 1,
        "learningRate": 1e-6,
        "maxPromptLength": 512,
        "maxResponseLength": 1024,
        "miniBatchSize": None,
        "microBatchSizePerGpu": 8,
        "klLossCoef": 0.001,
        "gpuMemoryUtilization": 0.6,
        "cpuOffload": False,
        "epochs": 1,
        "maxSteps": None,
        "saveEvery": 10,
        "validateEvery": 10,
        "keepCheckpoints": 2,
    }
    assert config.job.model_dump(by_alias=True) == {
        "submit": True,
        "readyTimeoutSeconds": 1800,
        "runGeneration": 0,
        "recover": True,
        "maxRecoveries": 20,
        "idleMinutes": 15,
        "preflight": None,
        "cordonBadNodes": False,
        "maxCost": None,
        "maxGpuHours": None,
    }


def test_derived_names_are_sanitised() -> None:
    """A stack name with capitals and dots still yields valid cluster and bucket names."""
    config = load_config(raw_values({}), (), "My.Stack_9").config
    assert config.cluster_name == "grpo-my-stack-9"
    assert config.bucket_name == "my-grpo-project-grpo-my-stack-9"


def test_derived_names_are_truncated() -> None:
    """A long stack name is cut to the 40-character cluster and 63-character bucket limits."""
    config = load_config(raw_values({}), (), "s" * 100).config
    assert config.cluster_name == "grpo-" + "s" * 35
    assert config.bucket_name == "my-grpo-project-grpo-" + "s" * 42


def test_configured_names_win() -> None:
    """Configured cluster and bucket names are used as given."""
    config = load_config(
        raw_values({"grpo-gke:cluster.name": "mine", "grpo-gke:storage.bucket": "my-bucket"}), (), "test"
    ).config
    assert (config.cluster_name, config.bucket_name) == ("mine", "my-bucket")


def test_custom_image_resolution() -> None:
    """A configured image carries its Ray version, and NeMo-RL's release."""
    verl = load_config(raw_values(IMAGE), (), "t").config.workload.resolved_image()
    assert verl == FrameworkImage("example.com/verl:custom", "2.49.2", VERL_VERSION)
    nemo = load_config(raw_values(NEMO_IMAGE), (), "t").config.workload.resolved_image()
    assert nemo == FrameworkImage("example.com/nemo-rl:custom", "2.55.1", "v0.7.0")
    assert load_config(raw_values(NEMO), (), "t").config.workload.resolved_image() == DEFAULT_IMAGES["nemo-rl"]


def test_rdma_subnets() -> None:
    """The RDMA range splits into eight equal subnets, in order."""
    config = load_config(raw_values({"grpo-gke:network.rdmaRange": "192.168.128.0/26"}), (), "t").config
    assert config.network.rdma_subnets() == [f"192.168.128.{8 * index}/29" for index in range(8)]


def test_config_is_frozen() -> None:
    """The config cannot be changed after validation."""
    config = load_config(raw_values({}), (), "t").config
    with pytest.raises(ValueError):
        config.gpu.nodes = 2  # type: ignore[misc]


def test_secret_token_loads_without_warning() -> None:
    """A token stored as a secret loads quietly."""
    loaded = load_config(raw_values({"grpo-gke:hfToken": "hf_s3cr3t"}), ("grpo-gke:hfToken",), "t")
    assert loaded.warnings == (OPEN_CONTROL_PLANE,)
    assert loaded.config.hf_token is not None
    assert loaded.config.hf_token.get_secret_value() == "hf_s3cr3t"


@pytest.mark.parametrize(
    "changes",
    [{"grpo-gke:cluster.authorizedNetworks": ["203.0.113.0/24"]}, {"grpo-gke:cluster.dnsEndpoint": True}],
    ids=["authorized-networks", "dns-endpoint"],
)
def test_a_closed_control_plane_loads_without_warning(changes: dict[str, Any]) -> None:
    """Either authorized networks or the DNS endpoint closes the public IP endpoint: no warning."""
    assert load_config(raw_values(changes), (), "t").warnings == ()


CLOSED = {"grpo-gke:cluster.dnsEndpoint": True}
"""A closed control plane: no warning of its own."""

LUSTRE_STORAGE = {"type": "lustre", "capacityGib": 18000, "throughput": 1000}


def test_a_lustre_instance_deleted_on_destroy_warns_what_guards_the_run_and_what_to_set_back() -> None:
    """storage.keepOnDestroy false on Lustre (what parking needs): one warning naming the guard and the key."""
    loaded = load_config(
        raw_values({**CLOSED, "grpo-gke:storage": {**LUSTRE_STORAGE, "keepOnDestroy": False}}), (), "t"
    )
    assert loaded.warnings == (
        "grpo-gke:storage.keepOnDestroy is false: pulumi destroy, or an edit that replaces the Lustre instance (such as"
        " grpo-gke:storage.throughput or capacityGib), deletes the instance and the run on it; the park guard refuses"
        f" that until gs://{loaded.config.parked_bucket_name}/parked/marker.json says the run is parked (python -m"
        " jobs park); once the run is back on the instance (storage.parked false), set grpo-gke:storage.keepOnDestroy"
        " true again",
    )


@pytest.mark.parametrize(
    "storage",
    [
        LUSTRE_STORAGE,
        {**LUSTRE_STORAGE, "keepOnDestroy": False, "parked": True},
        {"type": "gcs", "keepOnDestroy": False},
    ],
    ids=["lustre-kept", "lustre-parked", "gcs"],
)
def test_storage_kept_parked_or_a_bucket_loads_without_the_destroy_warning(storage: dict[str, Any]) -> None:
    """A kept instance, one parked away, or a bucket: destroy deletes no run unasked."""
    assert load_config(raw_values({**CLOSED, "grpo-gke:storage": storage}), (), "t").warnings == ()


def test_plaintext_token_works_but_warns() -> None:
    """A plaintext token loads and yields one warning saying how to fix it."""
    loaded = load_config(raw_values({"grpo-gke:hfToken": "hf_s3cr3t"}), (), "t")
    assert loaded.config.hf_token is not None
    assert loaded.warnings == (
        "grpo-gke:hfToken is set in plaintext; store it as a secret: pulumi config set --secret grpo-gke:hfToken <token>",
        OPEN_CONTROL_PLANE,
    )
    assert all("hf_s3cr3t" not in warning for warning in loaded.warnings)


def test_token_never_in_config_text() -> None:
    """str and repr of the config (and its dump) never show the token."""
    config = load_config(raw_values({"grpo-gke:hfToken": "hf_s3cr3t"}), ("grpo-gke:hfToken",), "t").config
    for text in (str(config), repr(config), str(config.model_dump()), config.model_dump_json()):
        assert "hf_s3cr3t" not in text


@pytest.mark.parametrize("token", ["hf_s3cr3t", 123456789])
def test_token_never_in_error_text(token: Any) -> None:
    """When the config is refused, the error shows no token, even a token of the wrong type."""
    values = raw_values({"grpo-gke:gpu.nodes": 0})
    values["grpo-gke:hfToken"] = token
    with pytest.raises(ConfigError) as caught:
        load_config(values, ("grpo-gke:hfToken",), "t")
    for text in (str(caught.value), repr(caught.value), repr(caught.value.problems)):
        assert str(token) not in text
    assert "grpo-gke:gpu.nodes: must be at least 1, got 0" in str(caught.value)


def test_problem_paths_use_camel_case() -> None:
    """Problem paths use the camelCase keys users write, never the Python field names."""
    lines = problem_lines({"grpo-gke:grpo.miniBatchSize": 0, "grpo-gke:storage.keepOnDestroy": "maybe"})
    assert [line.split(":", 2)[1] for line in lines] == ["grpo.miniBatchSize", "storage.keepOnDestroy"]


def test_cross_checks_run_beside_field_errors_where_their_keys_validated() -> None:
    """One run reports the field errors and every cross rule whose keys validated; a rule that reads
    a refused key (the version floor of an unknown GPU, GPU counts of a refused node count) stays silent."""
    lines = problem_lines(
        {
            "grpo-gke:gpu.type": "a100",
            "grpo-gke:zone": "europe-west4-a",
            "grpo-gke:cluster": {"minVersion": "1.30.0-gke.1000"},
            "grpo-gke:workload.dataset": "deepscaler",
        }
    )
    assert lines == [
        "grpo-gke:gpu.type: must be one of 'b200', 'h200' or 'l4', got 'a100'",
        "grpo-gke:workload.dataset: workload.framework 'verl' with dataset 'deepscaler' has no staging or job"
        " mapping; use one of 'gsm8k'",
        "grpo-gke:zone: must be a zone of gcp:region us-central1 (such as us-central1-b), got 'europe-west4-a'",
    ]
    lines = problem_lines({"grpo-gke:gpu.nodes": 0, "grpo-gke:grpo": {"promptsPerStep": 3}})
    assert lines == ["grpo-gke:gpu.nodes: must be at least 1, got 0"]
    assert problem_lines({"grpo-gke:gpu.type": "a100", "grpo-gke:cluster": {"minVersion": "1.30.0-gke.1000"}}) == [
        "grpo-gke:gpu.type: must be one of 'b200', 'h200' or 'l4', got 'a100'"
    ]
    assert "grpo-gke:cluster.minVersion: must be at least" in "\n".join(
        problem_lines({"grpo-gke:gpu.nodes": 0, "grpo-gke:cluster": {"minVersion": "1.30.0-gke.1000"}})
    )


def test_model_is_strict() -> None:
    """StackConfig and its sections refuse extra keys and are frozen (the contract other code relies on)."""
    for model in (
        StackConfig,
        *(StackConfig.model_fields[name].annotation for name in ("gpu", "storage", "workload", "grpo")),
    ):
        assert model.model_config["extra"] == "forbid"  # type: ignore[union-attr]
        assert model.model_config["frozen"] is True  # type: ignore[union-attr]


# ---------------------------------------------------------------- secrets under other keys

SECURE = "[secret]"
"""What core/stackfile.py reads a `secure:` leaf as, offline."""


def test_a_secret_extra_env_value_is_refused_with_the_commands_that_move_it() -> None:
    """Offline the secret leaf is known: the problem names it and the two commands."""
    changes = {"grpo-gke:workload.extraEnv": {"WANDB_API_KEY": SECURE, "PLAIN": "1"}}
    assert problem_lines(changes, ("grpo-gke:workload",)) == [
        "grpo-gke:workload.extraEnv.WANDB_API_KEY: is a secret, but only grpo-gke:hfToken, grpo-gke:wandbApiKey and grpo-gke:secretEnv"
        " keep secrets out of the manifests and the state: pulumi config rm --path"
        " 'grpo-gke:workload.extraEnv.WANDB_API_KEY', then pulumi config set --secret --path"
        " 'grpo-gke:secretEnv.WANDB_API_KEY' <value>",
    ]


def test_a_secret_elsewhere_is_refused_and_its_value_never_shown() -> None:
    """Under the engine the key is secret and its value decrypted: the problem names the key only, and
    a field error inside it does not echo the value."""
    decrypted = "s3cr3t-model-id-value"
    lines = problem_lines({"grpo-gke:workload.model": decrypted}, ("grpo-gke:workload",))
    assert lines == [
        "grpo-gke:workload: is a secret, but only grpo-gke:hfToken, grpo-gke:wandbApiKey and grpo-gke:secretEnv keep secrets out of the"
        " manifests and the state: for an environment variable, pulumi config rm --path"
        " 'grpo-gke:workload.extraEnv.<NAME>', then pulumi config set --secret --path 'grpo-gke:secretEnv.<NAME>'"
        " <value>; set any other field of grpo-gke:workload in plaintext",
        "grpo-gke:workload.model: must be a Hugging Face model id such as Qwen/Qwen2.5-7B-Instruct, got '[secret]'",
    ]
    assert decrypted not in "\n".join(lines)
    assert problem_lines({"grpo-gke:zone": "europe-west4-q"}, ("grpo-gke:zone",)) == [
        "grpo-gke:zone: is a secret, but only grpo-gke:hfToken, grpo-gke:wandbApiKey and grpo-gke:secretEnv keep secrets out of the"
        " manifests and the state: pulumi config set grpo-gke:zone <value> (in plaintext)"
    ], "and the zone cross-check, which would quote the decrypted value, is not run"
    assert problem_lines({"grpo-gke:gpu.nodes": SECURE}, ("grpo-gke:gpu",))[0] == (
        "grpo-gke:gpu.nodes: is a secret, but only grpo-gke:hfToken, grpo-gke:wandbApiKey and grpo-gke:secretEnv keep secrets out of the"
        " manifests and the state: pulumi config set --path 'grpo-gke:gpu.nodes' <value> (in plaintext)"
    )


def test_a_flat_secret_env_key_says_how_to_set_it_as_a_secret() -> None:
    """`pulumi config set --secret grpo-gke:secretEnv.X v` without --path: the advice keeps --secret."""
    values = raw_values({})
    values["grpo-gke:secretEnv.WANDB_API_KEY"] = SECURE
    with pytest.raises(ConfigError) as caught:
        load_config(values, ("grpo-gke:secretEnv.WANDB_API_KEY",), "t")
    assert [str(problem) for problem in caught.value.problems] == [
        "grpo-gke:secretEnv.WANDB_API_KEY: is a flat key, not a field of grpo-gke:secretEnv: pulumi config rm"
        " grpo-gke:secretEnv.WANDB_API_KEY, then pulumi config set --secret --path grpo-gke:secretEnv.WANDB_API_KEY"
        " <value>",
    ]


def test_secret_env_loads_as_secrets_and_warns_in_plaintext() -> None:
    """A secret secretEnv loads quietly with its values hidden; a plaintext one loads with a warning."""
    changes = {"grpo-gke:secretEnv": {"WANDB_API_KEY": "wandb-value"}}
    loaded = load_config(raw_values(changes), ("grpo-gke:secretEnv",), "t")
    assert loaded.warnings == (OPEN_CONTROL_PLANE,)
    assert loaded.config.secret_env["WANDB_API_KEY"].get_secret_value() == "wandb-value"
    assert "wandb-value" not in repr(loaded.config) and "wandb-value" not in str(loaded.config)
    plain = load_config(raw_values(changes), (), "t")
    assert plain.warnings == (
        "grpo-gke:secretEnv is set in plaintext; store each value as a secret:"
        " pulumi config set --secret --path 'grpo-gke:secretEnv.<NAME>' <value>",
        OPEN_CONTROL_PLANE,
    )


MISPLACED_SECRET_STACK = """\
config:
  gcp:project: my-grpo-project
  gcp:region: us-central1
  grpo-gke:zone: us-central1-b
  grpo-gke:gpu:
    type: h200
    nodes: 1
  grpo-gke:storage:
    type: gcs
  grpo-gke:workload:
    framework: verl
    model: Qwen/Qwen2.5-0.5B-Instruct
    dataset: gsm8k
    extraEnv:
      WANDB_API_KEY:
        secure: v1:c2VjcmV0LWNpcGhlcnRleHQ=
"""
"""A stack whose W&B key is a secret under workload.extraEnv, as `pulumi config set --secret --path` writes it."""


def test_the_plan_refuses_a_secret_under_another_key_in_one_line_exit_2(tmp_path) -> None:
    """As the user meets it: the command, its exit status and its whole output."""
    path = tmp_path / "Pulumi.misplaced.yaml"
    path.write_text(MISPLACED_SECRET_STACK)
    result = subprocess.run(
        [sys.executable, "-m", "plan", "--config", str(path), "--out", str(tmp_path / "out")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: the config of stack 'misplaced' ({path}) was refused:\n"
        "  grpo-gke:workload.extraEnv.WANDB_API_KEY: is a secret, but only grpo-gke:hfToken, grpo-gke:wandbApiKey and grpo-gke:secretEnv"
        " keep secrets out of the manifests and the state: pulumi config rm --path"
        " 'grpo-gke:workload.extraEnv.WANDB_API_KEY', then pulumi config set --secret --path"
        " 'grpo-gke:secretEnv.WANDB_API_KEY' <value>\n"
    )
    moved = MISPLACED_SECRET_STACK.replace("    extraEnv:\n", "  grpo-gke:secretEnv:\n").replace(
        "      WANDB", "    WANDB"
    )
    moved = moved.replace("        secure:", "      secure:")
    path.write_text(moved)
    result = subprocess.run(
        [sys.executable, "-m", "plan", "--config", str(path), "--out", str(tmp_path / "out")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (0, "")  # the warning is in the Security block, once
