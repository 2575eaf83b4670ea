"""What nvidia-smi reports about each GPU: the queries, running them with a deadline, parsing their text.

The per-GPU figures come from one `--query-gpu` CSV query (field names as `nvidia-smi --help-query-gpu`
lists them); the CUDA version the driver supports appears only in the XML report (`nvidia-smi -q -x`,
`<cuda_version>`); XID events only in the kernel log (`NVRM: Xid (PCI:...): code, ...`), which a
container often may not read. Parsing is pure: text in, plain data out.
"""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ElementTree
from typing import Any

QUERY_FIELDS: dict[str, str] = {
    "index": "index",
    "uuid": "uuid",
    "name": "name",
    "pci_bus_id": "pci.bus_id",
    "driver_version": "driver_version",
    "ecc_mode": "ecc.mode.current",
    "ecc_uncorrected_volatile": "ecc.errors.uncorrected.volatile.total",
    "ecc_uncorrected_aggregate": "ecc.errors.uncorrected.aggregate.total",
    "retired_pages_pending": "retired_pages.pending",
    "remapped_rows_pending": "remapped_rows.pending",
    "remapped_rows_failure": "remapped_rows.failure",
    "clock_sm_mhz": "clocks.current.sm",
    "clock_memory_mhz": "clocks.current.memory",
    "clock_sm_max_mhz": "clocks.max.sm",
    "clock_memory_max_mhz": "clocks.max.memory",
    "clock_event_sw_power_cap": "clocks_event_reasons.sw_power_cap",
    "clock_event_sw_thermal_slowdown": "clocks_event_reasons.sw_thermal_slowdown",
    "clock_event_hw_slowdown": "clocks_event_reasons.hw_slowdown",
    "clock_event_hw_thermal_slowdown": "clocks_event_reasons.hw_thermal_slowdown",
    "clock_event_hw_power_brake_slowdown": "clocks_event_reasons.hw_power_brake_slowdown",
    "temperature_c": "temperature.gpu",
    "power_draw_w": "power.draw",
}
"""Report key -> nvidia-smi `--query-gpu` field, in query order."""

INTEGER_KEYS = frozenset(
    {
        "index",
        "ecc_uncorrected_volatile",
        "ecc_uncorrected_aggregate",
        "clock_sm_mhz",
        "clock_memory_mhz",
        "clock_sm_max_mhz",
        "clock_memory_max_mhz",
        "temperature_c",
    }
)
"""Keys whose values are whole numbers."""

FLOAT_KEYS = frozenset({"power_draw_w"})
"""Keys whose values are decimal numbers."""

FLAG_KEYS = frozenset({"retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure"})
"""Keys whose values are Yes/No (True/False)."""

CLOCK_EVENT_PREFIX = "clock_event_"
"""Keys of the clock-event reasons (`Active` / `Not Active`), collected into `clock_events`."""

UNAVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "")
"""Values nvidia-smi prints for a field the GPU or driver does not report (parsed as None)."""

SMI_TIMEOUT_SECONDS = 60
"""Deadline of one nvidia-smi or dmesg call; a wedged GPU can make nvidia-smi hang."""

XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+)[^)]*\): (\d+),?\s*(.*)")
"""One XID event in the kernel log: `NVRM: Xid (PCI:0000:04:00): 79, pid=..., GPU has fallen off the bus.`"""


class SmiError(Exception):
    """nvidia-smi (or the kernel log) could not be read; the message is one line."""


def query_command() -> list[str]:
    """The nvidia-smi command that prints QUERY_FIELDS of every GPU as CSV without header or units."""
    return ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS.values())}", "--format=csv,noheader,nounits"]


def xml_command() -> list[str]:
    """The nvidia-smi command that prints the full XML report (driver and CUDA versions)."""
    return ["nvidia-smi", "-q", "-x"]


def kernel_log_command() -> list[str]:
    """The command that prints the kernel log, where the driver writes XID events."""
    return ["dmesg"]


def run(command: list[str], timeout: float = SMI_TIMEOUT_SECONDS) -> str:
    """Run `command` with a deadline and return its standard output; SmiError says why it failed."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SmiError(f"{command[0]} is not installed on this node") from None
    except subprocess.TimeoutExpired:
        raise SmiError(f"{' '.join(command[:2])} did not answer within {timeout:g} s") from None
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise SmiError(f"{command[0]} exited {result.returncode}: {detail[0] if detail else 'no output'}")
    return result.stdout


def _value(key: str, text: str) -> Any:
    text = text.strip()
    if text in UNAVAILABLE:
        return None
    if key in INTEGER_KEYS:
        return int(text)
    if key in FLOAT_KEYS:
        return float(text)
    if key in FLAG_KEYS:
        return text.lower() == "yes"
    if key.startswith(CLOCK_EVENT_PREFIX):
        return text.lower() == "active"
    return text


def parse_query_csv(text: str) -> list[dict[str, Any]]:
    """Each GPU's QUERY_FIELDS from the query's CSV text; active clock-event reasons listed in `clock_events`."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(QUERY_FIELDS):
            raise SmiError(f"nvidia-smi printed {len(cells)} fields, expected {len(QUERY_FIELDS)}: {line.strip()!r}")
        gpu: dict[str, Any] = {}
        events = []
        for key, cell in zip(QUERY_FIELDS, cells, strict=False):
            value = _value(key, cell)
            if key.startswith(CLOCK_EVENT_PREFIX):
                if value:
                    events.append(key[len(CLOCK_EVENT_PREFIX) :])
            else:
                gpu[key] = value
        gpu["clock_events"] = events
        gpus.append(gpu)
    return gpus


def parse_xml_versions(text: str) -> dict[str, str | None]:
    """The driver version and the CUDA version the driver supports, from the XML report."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as error:
        raise SmiError(f"nvidia-smi -q -x printed no readable XML: {error}") from None
    return {"driver_version": root.findtext("driver_version"), "cuda_version": root.findtext("cuda_version")}


def pci_key(bus_id: str) -> str:
    """`0000:04:00` from nvidia-smi's `00000000:04:00.0` or the kernel log's `0000:04:00` (domain:bus:device)."""
    domain, bus, device = bus_id.split(".")[0].split(":")[-3:]
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}"


def parse_xid_events(text: str) -> list[dict[str, Any]]:
    """Every XID event in kernel log text: the GPU's PCI key, the XID code and the driver's message."""
    events = []
    for line in text.splitlines():
        match = XID_LINE.search(line)
        if match:
            events.append({"pci": pci_key(match.group(1)), "code": int(match.group(2)), "text": match.group(3).strip()})
    return events
