"""Reaching the dashboard through the API server's service proxy: URL, CA, token, context choice."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest
import yaml

from incluster.google_token import Credential
from infra.kubernetes import gke_kubeconfig
from jobs.cli.main import parser
from jobs.submit import access
from jobs.submit.target import endpoint_of
from tests.conftest import STACKS_DIR, config_of

CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJ0ZXN0Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"


def test_service_proxy_url_names_the_head_service_and_dashboard_port():
    assert access.service_proxy_url("https://34.1.2.3/") == (
        "https://34.1.2.3/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy"
    )
    assert access.service_proxy_url("https://h") == "https://h/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy"


def test_bearer_header():
    assert access.bearer_headers("ya29.t") == {"Authorization": "Bearer ya29.t"}


def test_kube_target_reads_the_current_or_the_named_context():
    document = yaml.safe_load(gke_kubeconfig("gke_p_us-central1_c", "34.1.2.3", CA))
    document["contexts"].append({"name": "other", "context": {"cluster": "x", "user": "y"}})
    document["clusters"].append(
        {"name": "x", "cluster": {"server": "https://10.0.0.1", "insecure-skip-tls-verify": True}}
    )
    target = access.kube_target(document)
    assert target.server == "https://34.1.2.3" and target.ca_data == CA
    assert target.user["exec"]["command"] == "gke-gcloud-auth-plugin"
    other = access.kube_target(document, "other")
    assert other.server == "https://10.0.0.1" and other.insecure and other.user == {}
    with pytest.raises(access.AccessError, match="has no context 'absent'"):
        access.kube_target(document, "absent")
    with pytest.raises(access.AccessError, match="no current context"):
        access.kube_target({**document, "current-context": ""})


def test_exec_credential_token_and_its_expiry_are_read_from_status():
    expiry = "2026-12-02T05:00:00Z"
    output = json.dumps({"kind": "ExecCredential", "status": {"token": "ya29.abc", "expirationTimestamp": expiry}})
    assert access.exec_credential(output) == Credential("ya29.abc", 1796187600.0)
    assert "ya29" not in repr(access.exec_credential(output))
    unstated = json.dumps({"kind": "ExecCredential", "status": {"token": "ya29.abc"}})
    assert access.exec_credential(unstated) == Credential("ya29.abc", None)
    unreadable = json.dumps({"status": {"token": "ya29.abc", "expirationTimestamp": "x"}})
    for bad in ("not json", json.dumps({"status": {}}), json.dumps({"status": {"token": ""}}), unreadable):
        with pytest.raises(access.AccessError):
            access.exec_credential(bad)


def test_a_plugin_token_near_its_stated_expiry_is_fetched_again_from_the_plugin_at_the_next_read(tmp_path):
    """gke-gcloud-auth-plugin states when its token ends (ExecCredential status.expirationTimestamp); a token within
    RENEW_BEFORE_SECONDS of it is not used again: the next read of the header runs the plugin again."""
    count = tmp_path / "count"
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
    plugin = fake_plugin(
        tmp_path,
        f'n=$(($(cat {count} 2>/dev/null || echo 0) + 1)); echo $n > {count}; echo \'{{"apiVersion":'
        f'"client.authentication.k8s.io/v1beta1","status":{{"token":"ya29.t\'$n\'",'
        f'"expirationTimestamp":"{soon}"}}}}\'',
    )
    endpoint = access.endpoint_from_kubeconfig(kubeconfig_with_plugin(plugin))
    assert endpoint.headers["Authorization"] == "Bearer ya29.t2"
    assert endpoint.headers.get("Authorization") == "Bearer ya29.t3"
    assert count.read_text().strip() == "3"


def test_a_token_written_in_the_kubeconfig_is_used_as_it_is():
    assert access.user_headers({"token": "ya29.static"}) == {"Authorization": "Bearer ya29.static"}
    assert type(access.user_headers({"token": "ya29.static"})) is dict


def fake_plugin(directory: Path, body: str) -> Path:
    """An executable that stands in for gke-gcloud-auth-plugin."""
    plugin = directory / "fake-auth-plugin"
    plugin.write_text(f"#!/bin/sh\n{body}\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    return plugin


def kubeconfig_with_plugin(plugin: Path) -> str:
    document = yaml.safe_load(gke_kubeconfig("gke_p_us-central1_c", "34.1.2.3", CA))
    document["users"][0]["user"]["exec"]["command"] = str(plugin)
    return yaml.safe_dump(document)


def test_endpoint_from_the_stack_kubeconfig_uses_the_proxy_the_plugin_token_and_the_cluster_ca(tmp_path):
    plugin = fake_plugin(
        tmp_path, """echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","status":{"token":"ya29.fake"}}'"""
    )
    endpoint = access.endpoint_from_kubeconfig(kubeconfig_with_plugin(plugin))
    assert endpoint.address == "https://34.1.2.3/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy"
    assert endpoint.headers == {"Authorization": "Bearer ya29.fake"}
    assert Path(endpoint.verify).read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
    assert "ya29" not in repr(endpoint)


def test_a_failing_or_missing_plugin_is_one_clear_error(tmp_path):
    plugin = fake_plugin(tmp_path, "echo 'ERROR: gcloud auth login required' >&2; exit 1")
    with pytest.raises(
        access.AccessError, match="got no Google access token: ERROR: gcloud auth login required; check"
    ):
        access.endpoint_from_kubeconfig(kubeconfig_with_plugin(plugin))
    with pytest.raises(access.AccessError, match="is not installed"):
        access.endpoint_from_kubeconfig(kubeconfig_with_plugin(tmp_path / "absent-plugin"))
    with pytest.raises(access.AccessError, match="cannot read the kubeconfig"):
        access.endpoint_from_kubeconfig_file(tmp_path / "missing")


def test_cli_without_address_prefers_the_stacks_gcloud_context_over_the_current_one(tmp_path):
    config = config_of("dev")
    stack_name = f"gke_{config.project}_{config.region}_{config.cluster_name}"
    document = yaml.safe_load(gke_kubeconfig(stack_name, "34.9.9.9", CA))
    document["users"][0]["user"] = {"token": "static-token"}
    document["clusters"].append({"name": "elsewhere", "cluster": {"server": "https://10.1.1.1"}})
    document["users"].append({"name": "elsewhere", "user": {"token": "other"}})
    document["contexts"].append({"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "elsewhere"}})
    document["current-context"] = "elsewhere"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    args = parser().parse_args(["status", "--stack", "dev", "--kubeconfig", str(path)])
    endpoint = endpoint_of(args, config)
    assert endpoint.address.startswith("https://34.9.9.9/api/v1/namespaces/grpo/services/")
    assert endpoint.headers == {"Authorization": "Bearer static-token"}
    args = parser().parse_args(["status", "--stack", "dev", "--kubeconfig", str(path), "--context", "elsewhere"])
    assert endpoint_of(args, config).address.startswith("https://10.1.1.1/")
    args = parser().parse_args(["status", "--stack", "dev", "--address", "127.0.0.1:8265"])
    assert endpoint_of(args, config).address == "http://127.0.0.1:8265"


@pytest.mark.parametrize(("text", "reason"), [("a: [unclosed\n", "not valid YAML"), ("- a\n- b\n", "not a kubeconfig")])
def test_cli_with_a_broken_kubeconfig_exits_2_with_one_line(tmp_path, capsys, text, reason):
    from jobs.cli.main import main

    path = tmp_path / "kubeconfig"
    path.write_text(text)
    code = main(["status", "--stack", "dev", "--dir", str(STACKS_DIR), "--kubeconfig", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert reason in err and err.count("\n") == 1, err


def test_the_post_deploy_gate_reads_the_ladder_through_the_kubeconfigs_api_server():
    from jobs.submit import provider

    document = yaml.safe_load(gke_kubeconfig("gke_p_us-central1_c", "34.9.9.9", CA))
    document["users"][0]["user"] = {"token": "static-token"}
    groups = {"gke-grpo-dev-gpu-1a2b3c4d-grp": "spot"}
    props = {"kubeconfig": yaml.safe_dump(document), "address": "", "gpu_instance_groups": groups}
    capacity = provider._capacity(props)
    assert (capacity.api.address, capacity.groups) == ("https://34.9.9.9", groups)
    assert capacity.api.headers == {"Authorization": "Bearer static-token"} and capacity.namespace == "grpo"
    assert provider._capacity({**props, "address": "http://127.0.0.1:8265"}) is None  # a plain dashboard: no API
