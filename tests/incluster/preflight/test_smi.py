"""nvidia-smi queries and their parsing, over what nvidia-smi printed on a real H200."""

from __future__ import annotations

import sys

import pytest

from incluster.preflight import smi
from tests.incluster.preflight.conftest import recorded

H200_LINE = recorded("h200-smi-query.csv").strip()
"""The recorded query line of one idle H200."""


def test_every_queried_field_is_one_the_h200_driver_knows():
    help_text = recorded("h200-help-query-gpu.txt")
    assert [name for name in smi.QUERY_FIELDS.values() if f'"{name}"' not in help_text] == []


def test_the_query_asks_for_every_field_as_csv_without_header_or_units():
    command = smi.query_command()
    assert command[0] == "nvidia-smi" and command[2] == "--format=csv,noheader,nounits"
    assert command[1] == "--query-gpu=" + ",".join(smi.QUERY_FIELDS.values())


def test_the_recorded_h200_line_parses_into_typed_values():
    assert smi.parse_query_csv(H200_LINE + "\n") == [
        {
            "index": 0,
            "uuid": "GPU-2333c02f-1b3f-69e3-b0fb-d54405098fce",
            "name": "NVIDIA H200",
            "pci_bus_id": "00000000:00:06.0",
            "driver_version": "580.159.04",
            "ecc_mode": "Enabled",
            "ecc_uncorrected_volatile": 0,
            "ecc_uncorrected_aggregate": 0,
            "retired_pages_pending": None,
            "remapped_rows_pending": False,
            "remapped_rows_failure": False,
            "clock_sm_mhz": 1980,
            "clock_memory_mhz": 3201,
            "clock_sm_max_mhz": 1980,
            "clock_memory_max_mhz": 3201,
            "temperature_c": 37,
            "power_draw_w": 123.6,
            "clock_events": [],
        }
    ]


def test_yes_flags_counts_and_active_clock_events_are_read():
    cells = H200_LINE.split(", ")
    keys = list(smi.QUERY_FIELDS)
    for key, value in {
        "ecc_uncorrected_volatile": "3",
        "remapped_rows_pending": "Yes",
        "retired_pages_pending": "Yes",
        "clock_event_sw_power_cap": "Active",
        "clock_event_hw_thermal_slowdown": "Active",
    }.items():
        cells[keys.index(key)] = value
    (gpu,) = smi.parse_query_csv(", ".join(cells))
    assert gpu["ecc_uncorrected_volatile"] == 3
    assert gpu["remapped_rows_pending"] is True and gpu["retired_pages_pending"] is True
    assert gpu["clock_events"] == ["sw_power_cap", "hw_thermal_slowdown"]


def test_a_line_with_the_wrong_number_of_fields_is_refused():
    with pytest.raises(smi.SmiError, match=r"printed 3 fields, expected 22"):
        smi.parse_query_csv("0, GPU-x, NVIDIA H200")


def test_the_xml_report_gives_the_driver_and_its_cuda_version():
    assert smi.parse_xml_versions(recorded("h200-smi.xml")) == {"driver_version": "580.159.04", "cuda_version": "13.0"}


def test_unreadable_xml_is_one_line_error():
    with pytest.raises(smi.SmiError, match="no readable XML"):
        smi.parse_xml_versions("Failed to initialize NVML: Driver/library version mismatch")


def test_pci_ids_of_nvidia_smi_and_the_kernel_log_meet():
    assert smi.pci_key("00000000:04:00.0") == smi.pci_key("0000:04:00") == "0000:04:00"
    assert smi.pci_key("00000000:9A:00.0") == "0000:9a:00"


def test_xid_events_are_read_from_the_kernel_log():
    log = "\n".join(
        [
            "[    0.018296] setup_percpu: NR_CPUS:256 nr_cpumask_bits:16",
            "[ 4711.12] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu.",
            "[ 4712.00] NVRM: Xid (PCI:0000:9A:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        ]
    )
    assert smi.parse_xid_events(log) == [
        {"pci": "0000:10:1c", "code": 63, "text": "pid=1896, Row Remapper: New row marked for remapping, reset gpu."},
        {"pci": "0000:9a:00", "code": 79, "text": "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
    ]


def test_a_missing_tool_a_failing_tool_and_a_hung_tool_each_give_one_line():
    with pytest.raises(smi.SmiError, match="^nvidia-smi-not-here is not installed on this node$"):
        smi.run(["nvidia-smi-not-here"])
    with pytest.raises(smi.SmiError, match=f"^{sys.executable} exited 6: Failed to initialize NVML$"):
        smi.run(
            [sys.executable, "-c", "import sys; sys.stderr.write('Failed to initialize NVML\\nmore\\n'); sys.exit(6)"]
        )
    with pytest.raises(smi.SmiError, match=r"did not answer within 0.2 s$"):
        smi.run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.2)


def test_a_tool_that_answers_gives_its_output():
    assert smi.run([sys.executable, "-c", "print('13.0')"]) == "13.0\n"
