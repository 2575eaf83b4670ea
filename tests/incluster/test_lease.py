"""One guardian at a time: the run guardian's Lease on the real API server of the test run (tests/conftest.py
`control_plane`: coordination.k8s.io/v1 Leases, real resourceVersions and 409 Conflicts), as the guardian's own
ServiceAccount with the Role the stack renders, in a namespace of the test's own, through a fault proxy
(tests/support/fault_proxy.py) that records each request and injects the boundary faults some tests name:
acquisition, renewal, a 409 race, loss to another holder after expiry and to an explicit take-over (the loser stops
acting within one renew interval), the foreground guardian's refusal (its whole output and exit status) and
`--take-over`. The guardian's clocks are fake (the API server only stores the times it is sent): no test waits."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from core import names
from incluster import job_client, lease
from incluster.endpoint import Endpoint
from incluster.guardian.command import hold_the_lease, main
from incluster.guardian.loop import Guardian, Hooks
from incluster.guardian.policy import Action, AttemptView, State
from incluster.guardian.settings import GuardError, Settings, settings_from
from incluster.lease import Lease, LeaseHeld, acquire_in_foreground, micro_time
from jobs.guardian import foreground
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of
from tests.support import control_plane as cp
from tests.support.fault_proxy import Fault, FaultProxy, fault_proxy

NAMESPACE, NAME = names.NAMESPACE, lease.LEASE_NAME
IN_CLUSTER = "in-cluster guardian grpo-guardian-7d9c5-x2x9k"
FOREGROUND = "python -m jobs guard of me@laptop pid 4242"


@dataclass
class FakeTime:
    """The wall clock and the monotonic clock of one process, moved by the test (and by a fake sleep)."""

    wall: float = 1796126400.0
    mono: float = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


@dataclass
class LeaseServer:
    """The test's namespace on the real API server, seen through a fault proxy: the Leases a test reads and writes as
    another client (the admin, straight to the API server), and every request the code under test sent."""

    plane: cp.ControlPlane
    """The shared control plane."""
    proxy: FaultProxy
    """The fault proxy in front of it, where the code under test sends."""
    namespace: str
    """The namespace of the test's Leases."""

    def path(self, name: str = NAME) -> str:
        """The API path of Lease `name` ("" for the collection)."""
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases" + (f"/{name}" if name else "")

    @property
    def requests(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        """Every request the code under test sent: (method, path without the query, JSON body or None)."""
        return [
            (method, path.split("?")[0], json.loads(body) if body else None) for method, path, body in self.proxy.sent
        ]

    def lease(self, name: str = NAME) -> dict[str, Any] | None:
        """The stored Lease, or None."""
        return self.plane.get(self.path(name))

    def spec(self, name: str = NAME) -> dict[str, Any] | None:
        """The stored Lease's spec, or None."""
        stored = self.lease(name)
        return stored["spec"] if stored else None

    def put_directly(self, spec: dict[str, Any], name: str = NAME) -> dict[str, Any]:
        """Another client's successful write of the Lease: created, or updated at its current resourceVersion."""
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": self.namespace}, "spec": spec}  # fmt: skip
        current = self.lease(name)
        if current is None:
            return self.plane.ok("POST", self.path(""), body)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self.plane.ok("PUT", self.path(name), body)

    def fault(self, kind: str) -> None:
        """The next request of the code under test gets a boundary fault instead of the API server's answer: "cut"
        (a promised body cut in half) or "html" (a 200 with an HTML page, as a proxy in front of it answers)."""
        self.proxy.inject(Fault({"cut": "cut", "html": "not-json"}[kind]))


@contextmanager
def lease_server(
    plane: cp.ControlPlane, namespace: str, moved: tuple[str, str] | None = None
) -> Iterator[tuple[Endpoint, LeaseServer]]:
    """The guardian's view of the API server in `namespace` (its ServiceAccount's token, through a fault proxy that
    moves the namespace `moved` names), and the LeaseServer a test inspects it with."""
    token = cp.guardian_in(plane, namespace)
    with fault_proxy(plane.address, str(plane.ca), moved) as proxy:
        yield Endpoint(proxy.url, {"Authorization": f"Bearer {token}"}), LeaseServer(plane, proxy, namespace)


@pytest.fixture
def api(control_plane, kube_namespace):
    with lease_server(control_plane, kube_namespace) as found:
        yield found


@pytest.fixture
def api_as_stack_namespace(control_plane, kube_namespace):
    """`api` for the foreground guardian (python -m jobs guard), which always looks for its Lease in the stack's
    namespace: the proxy sends its requests to the test's own namespace instead (tests/support/fault_proxy.py)."""
    with lease_server(control_plane, kube_namespace, (NAMESPACE, kube_namespace)) as found:
        yield found


def holder(api_store, identity: str, time: FakeTime) -> Lease:
    endpoint, store = api_store
    return Lease(endpoint, identity, namespace=store.namespace, clock=lambda: time.wall, monotonic=lambda: time.mono)


def test_the_first_guardian_creates_the_lease_and_renews_it_every_interval(api):
    namespace = api[1].namespace
    _, store = api
    time = FakeTime()
    first = holder(api, IN_CLUSTER, time)
    assert first.try_acquire_or_renew() and first.held()
    assert store.spec() == {
        "holderIdentity": IN_CLUSTER,
        "leaseDurationSeconds": 15,
        "acquireTime": micro_time(time.wall),
        "renewTime": micro_time(time.wall),
        "leaseTransitions": 0,
    }
    assert [(method, path) for method, path, _ in store.requests] == [
        ("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{NAME}"),
        ("POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"),
    ]
    created = store.lease()["metadata"]["resourceVersion"]
    acquired = micro_time(time.wall)
    time.advance(lease.RENEW_INTERVAL_SECONDS)
    assert first.try_acquire_or_renew() and first.held()
    renewed = store.spec()
    assert (renewed["acquireTime"], renewed["renewTime"], renewed["leaseTransitions"]) == (
        acquired,
        micro_time(time.wall),
        0,
    )
    method, _, body = store.requests[-1]
    assert method == "PUT" and body["metadata"]["resourceVersion"] == created


def test_a_candidate_does_not_take_a_lease_its_holder_renews(api):
    time, other_time = FakeTime(), FakeTime(wall=1796126400.0, mono=50.0)
    first, second = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, other_time)
    assert first.try_acquire_or_renew()
    for _ in range(20):
        time.advance(lease.RENEW_INTERVAL_SECONDS)
        other_time.advance(lease.RENEW_INTERVAL_SECONDS)
        assert first.try_acquire_or_renew() and first.held()
        assert not second.try_acquire_or_renew() and not second.held()
    assert second.observed.holder == IN_CLUSTER


def test_of_two_writers_of_one_read_the_api_server_lets_one_win_with_409_for_the_other(api):
    _, store = api
    time = FakeTime()
    second = holder(api, FOREGROUND, time)

    def another_creates_it_first() -> None:
        store.put_directly({"holderIdentity": IN_CLUSTER, "leaseDurationSeconds": 15})

    store.proxy.before_write = another_creates_it_first
    assert not second.try_acquire_or_renew() and not second.held()
    assert second.observed.holder == IN_CLUSTER and store.spec()["holderIdentity"] == IN_CLUSTER

    time.advance(lease.LEASE_DURATION_SECONDS + 1)  # lapsed as this process sees it: the candidate updates it
    store.proxy.before_write = lambda: store.put_directly({"holderIdentity": IN_CLUSTER})
    assert not second.try_acquire_or_renew() and not second.held()
    assert store.requests[-2][0] == "PUT" and store.requests[-1][0] == "GET"  # the 409, then a look at the winner
    assert second.observed.holder == IN_CLUSTER and store.spec()["holderIdentity"] == IN_CLUSTER


def test_a_holder_that_stops_renewing_stops_acting_before_another_takes_the_lease_after_expiry(api):
    namespace = api[1].namespace
    _, store = api
    time, other_time = FakeTime(), FakeTime(mono=7.0)
    first, second = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, other_time)
    assert first.try_acquire_or_renew()
    assert not second.try_acquire_or_renew()
    # The holder's renewals stop (its API calls hang): it may act until RENEW_DEADLINE_SECONDS, not after.
    time.advance(lease.RENEW_DEADLINE_SECONDS - 0.5)
    assert first.held()
    time.advance(0.5)
    assert not first.held()
    # The candidate takes it once it has seen the Lease unchanged for leaseDurationSeconds (15 s > 10 s).
    other_time.advance(lease.LEASE_DURATION_SECONDS - 0.5)
    assert not second.try_acquire_or_renew()
    other_time.advance(0.5)
    assert second.try_acquire_or_renew() and second.held()
    assert store.spec()["leaseTransitions"] == 1
    assert store.spec()["holderIdentity"] == FOREGROUND
    # The old holder's renewals come back: they see the new holder and it never acts again.
    time.advance(lease.RENEW_INTERVAL_SECONDS)
    assert not first.try_acquire_or_renew() and not first.held()
    assert first.holder_line().startswith(f"{FOREGROUND} holds the Lease {namespace}/{NAME}")


class Stop(Exception):
    """Ends a guardian loop in a test (raised by the fake sleep or the recording apply)."""


class OneDecision(Guardian):
    """A Guardian whose cluster is one fixed State (a FAILED attempt to judge): its actions are recorded."""

    def __init__(self, settings, the_lease: Lease, wait_for_lease: bool, lines: list[str], monkeypatch) -> None:
        monkeypatch.setattr(job_client, "connect", lambda endpoint: None)
        super().__init__(settings, Endpoint("http://127.0.0.1:9"), Hooks(), lines.append, lease=the_lease,
                         wait_for_lease=wait_for_lease)  # fmt: skip
        self.applied: list[Action] = []

    def observe(self) -> State:
        failed = AttemptView(1, "FAILED", start=1.0, end=2.0, message="ValueError: bad batch size")
        return State(now=10_000.0, settings=self.settings, newest=failed, settle=60)

    def apply(self, action: Action) -> None:
        self.applied.append(action)
        raise Stop


def _stop(_: float) -> None:
    raise Stop


@pytest.fixture
def settings() -> Settings:
    return settings_from(guardian_settings(config_of("dev")), "test")


def test_a_holder_whose_lease_is_taken_stops_acting_at_its_next_renewal_one_interval_later(api, settings, monkeypatch):
    namespace = api[1].namespace
    time, other_time = FakeTime(), FakeTime(mono=3.0)
    first, second = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, other_time)
    assert first.try_acquire_or_renew()
    lines: list[str] = []
    acting = OneDecision(settings, first, True, lines, monkeypatch)
    with pytest.raises(Stop):
        acting.run(sleep=_stop)
    assert [action.event for action in acting.applied] == ["failed"]

    second.take()  # `--take-over`: an explicit update with leaseTransitions + 1
    assert first.held()  # it has not looked yet: at most one renew interval of this
    time.advance(lease.RENEW_INTERVAL_SECONDS)
    assert not first.try_acquire_or_renew() and not first.held()
    with pytest.raises(Stop):
        acting.run(sleep=_stop)
    assert [action.event for action in acting.applied] == ["failed"]
    assert lines[-1] == f"{settings.run}: {FOREGROUND} holds the Lease {namespace}/{NAME}: this guardian waits to act"


def test_a_foreground_guardian_that_loses_the_lease_stops_with_one_line(api, settings, monkeypatch):
    namespace = api[1].namespace
    time = FakeTime()
    mine, theirs = holder(api, FOREGROUND, time), holder(api, IN_CLUSTER, FakeTime())
    assert mine.try_acquire_or_renew()
    theirs.take()
    time.advance(lease.RENEW_INTERVAL_SECONDS)
    assert not mine.try_acquire_or_renew()
    lines: list[str] = []
    with pytest.raises(GuardError) as stopped:
        OneDecision(settings, mine, False, lines, monkeypatch).run(sleep=_stop)
    assert str(stopped.value).startswith(
        f"this guardian lost the Lease: {IN_CLUSTER} holds the Lease {namespace}/{NAME}"
    )


def test_a_released_lease_is_taken_at_once_and_a_stale_one_after_its_duration_unchanged(api):
    namespace = api[1].namespace
    _, store = api
    time = FakeTime()
    first = holder(api, IN_CLUSTER, time)
    assert first.try_acquire_or_renew()
    first.stop()
    assert store.spec()["holderIdentity"] == "" and store.spec()["leaseDurationSeconds"] == 1
    follower = holder(api, FOREGROUND, FakeTime())
    acquire_in_foreground(follower, "run", take_over=False, report=print, sleep=lambda _: None)
    assert follower.held() and store.spec()["leaseTransitions"] == 1

    stale = FakeTime(wall=time.wall + 3600)  # its holder died an hour ago without releasing it
    store.put_directly({"holderIdentity": IN_CLUSTER, "leaseDurationSeconds": 15,
                                         "renewTime": micro_time(time.wall), "leaseTransitions": 4})  # fmt: skip
    late = holder(api, FOREGROUND + "-2", stale)
    reported: list[str] = []
    acquire_in_foreground(late, "run", take_over=False, report=reported.append, sleep=stale.advance)
    assert late.held() and store.spec()["leaseTransitions"] == 5
    assert reported == [
        f"run: {IN_CLUSTER} holds the Lease {namespace}/{NAME} (renewed 3600 s ago); it looks gone, so this guardian"
        " takes it once unchanged for 15 s"
    ]


def _foreground_argv(make_stack, tmp_path, url: str) -> tuple[list[str], str]:
    """`python -m jobs guard`'s arguments as a user passes them, and the run: the stack's context in a kubeconfig of
    the cluster (the API server at `url`, the user's token: an admin's, as a GKE user with the cluster's admin
    role)."""
    from jobs.submit.target import load_stack, stack_context

    name, directory = make_stack("guard-lease")
    config = load_stack(name, directory)
    run = guardian_settings(config)["run"]
    context = stack_context(config)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": url}}],
        "users": [{"name": context, "user": {"token": cp.ADMIN_TOKEN}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
    }))  # fmt: skip
    argv = ["--stack", name, "--dir", str(directory), "--kubeconfig", str(kubeconfig), "--data-root", str(tmp_path)]
    return argv, run


def _in_cluster_holds(store, wall: float) -> None:
    store.put_directly({"holderIdentity": IN_CLUSTER, "leaseDurationSeconds": 15,
                                         "acquireTime": micro_time(wall - 600), "renewTime": micro_time(wall - 3),
                                         "leaseTransitions": 2})  # fmt: skip


def test_the_foreground_guardian_refuses_in_one_line_with_exit_2_while_the_in_cluster_one_holds_it(
    api_as_stack_namespace, make_stack, tmp_path, capsys
):
    import time as real_time

    endpoint, store = api_as_stack_namespace
    argv, run = _foreground_argv(make_stack, tmp_path, endpoint.address)
    _in_cluster_holds(store, real_time.time())
    assert foreground.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    pattern = (
        re.escape(f"error: {IN_CLUSTER} holds the Lease {NAMESPACE}/{NAME} (renewed ")
        + r"\d+"
        + re.escape(
            f" s ago) and guards run {run}: this guardian does not act beside it; follow that one"
            f" (kubectl -n {NAMESPACE} logs deploy/{names.GUARDIAN} -f), or pass --take-over to guard from here"
            " (the other one then waits until this one exits)\n"
        )
    )
    assert re.fullmatch(pattern, captured.err), captured.err
    assert store.spec()["holderIdentity"] == IN_CLUSTER
    assert all(method == "GET" for method, _, _ in store.requests)


def test_take_over_takes_the_lease_explicitly_then_releases_it_on_exit(
    api_as_stack_namespace, make_stack, tmp_path, capsys, monkeypatch
):
    import time as real_time

    endpoint, store = api_as_stack_namespace
    argv, run = _foreground_argv(make_stack, tmp_path, endpoint.address)
    _in_cluster_holds(store, real_time.time())
    monkeypatch.setattr(lease, "TAKE_OVER_WAIT_SECONDS", 0.01)
    # No Ray dashboard is behind the API server's service proxy here (the control plane's pods run nothing): after
    # the take-over the guardian stops at its first look at Ray, with the dashboard's one line, and gives the Lease back.
    assert foreground.main([*argv, "--take-over"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert re.fullmatch(
        re.escape(f"{run}: --take-over: {IN_CLUSTER} holds the Lease {NAMESPACE}/{NAME} (renewed ")
        + r"\d+"
        + re.escape(
            " s ago); took it, and acts in 0.01 s, once that guardian has seen at its next renewal (every 2 s) that it lost it"
        ),
        err[0],
    ), err[0]
    assert err[1].startswith(f"error: no Ray dashboard at {endpoint.address}/api/v1/"), err[1]
    taken = [body["spec"] for method, _, body in store.requests if method == "PUT"]
    assert taken[0]["holderIdentity"].startswith("python -m jobs guard of ") and taken[0]["leaseTransitions"] == 3
    assert store.spec()["holderIdentity"] == "" and store.spec()["leaseTransitions"] == 3


def test_take_over_is_refused_for_the_in_cluster_form(tmp_path, capsys):
    assert main(["--settings", str(tmp_path / "s.json"), "--address", "http://x:8265", "--take-over"]) == 2
    assert capsys.readouterr().err == (
        "error: --take-over is for the foreground guardian (--stack); the in-cluster one waits for the Lease\n"
    )


def test_without_an_api_server_at_hand_there_is_no_lease(settings):
    assert hold_the_lease(settings, Endpoint("http://127.0.0.1:8265"), in_cluster=False, take_over=False) is None


def test_a_lease_held_by_another_raises_the_refusal_from_acquire(api):
    _, store = api
    time = FakeTime()
    _in_cluster_holds(store, time.wall)
    with pytest.raises(LeaseHeld, match=f"^{re.escape(IN_CLUSTER)} holds the Lease"):
        acquire_in_foreground(holder(api, FOREGROUND, time), "run", take_over=False, report=print, sleep=time.advance)


def _allowed(rules: list[dict], verb: str, name: str) -> bool:
    """Whether RBAC rules allow `verb` on the Lease `name` (a create has no name at authorization time, so only a
    rule without resourceNames allows it: kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources)."""
    for rule in rules:
        if (
            "coordination.k8s.io" not in rule["apiGroups"]
            or "leases" not in rule["resources"]
            or verb not in rule["verbs"]
        ):
            continue
        if "resourceNames" not in rule or (verb != "create" and name in rule["resourceNames"]):
            return True
    return False


def test_the_role_allows_every_lease_call_the_guardian_makes_and_no_other_leases_reads_or_writes(api):
    from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs

    from jobs.guardian.objects import render_role

    def plain(rule: PolicyRuleArgs) -> dict:
        values = {"apiGroups": rule.api_groups, "resources": rule.resources, "verbs": rule.verbs}
        return {**values, **({"resourceNames": rule.resource_names} if rule.resource_names else {})}

    rules = [plain(rule) for rule in render_role(cordon_bad_nodes=False).rules]
    _, store = api
    time, other_time = FakeTime(), FakeTime(mono=1.0)
    first, second = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, other_time)
    assert first.try_acquire_or_renew()
    time.advance(2)
    assert first.try_acquire_or_renew()
    second.take()
    first.try_acquire_or_renew()
    second.stop()
    verbs = {"GET": "get", "POST": "create", "PUT": "update"}
    calls = sorted({(verbs[method], path.rsplit("/", 1)[1]) for method, path, _ in store.requests})
    assert calls == [("create", "leases"), ("get", NAME), ("update", NAME)]
    assert all(_allowed(rules, verb, NAME) for verb, _ in calls)
    assert not any(_allowed(rules, verb, "another-lease") for verb in ("get", "update", "delete", "patch"))


def test_a_guardian_that_cannot_reach_the_lease_says_why_it_waits(api, settings, monkeypatch):
    time = FakeTime()
    closed = Lease(Endpoint("http://127.0.0.1:9"), IN_CLUSTER, clock=lambda: time.wall, monotonic=lambda: time.mono)
    assert not closed.renew_once() and not closed.held()
    reason = "the API server at http://127.0.0.1:9 did not answer about the Lease grpo/grpo-guardian"
    assert closed.last_error == reason
    lines: list[str] = []
    waiting = OneDecision(settings, closed, True, lines, monkeypatch)
    with pytest.raises(Stop):
        waiting.run(sleep=_stop)
    assert waiting.applied == [] and lines[-1] == f"{settings.run}: {reason}: this guardian waits to act"
    reachable = holder(api, IN_CLUSTER, time)
    assert reachable.renew_once() and reachable.last_error == ""


# client-go's defaults and NewLeaderElector's rules, read from kubernetes/client-go v0.36.3
# tools/leaderelection/leaderelection.go: LeaseDuration 15 s (L132), RenewDeadline 10 s (L137), RetryPeriod 2 s (L142),
# JitterFactor 1.2 (L72); refused: leaseDuration <= renewDeadline (L77), renewDeadline <= JitterFactor * retryPeriod
# (L80). Written here, not read from incluster/lease.py, so that a wrong constant there is seen.
CLIENT_GO_DEFAULTS = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}
CLIENT_GO_JITTER_FACTOR = 1.2


def client_go_refusal(lease_duration: float, renew_deadline: float, retry_period: float) -> str | None:
    """What client-go's NewLeaderElector refuses in these timings (its error text), or None."""
    if lease_duration <= renew_deadline:
        return "leaseDuration must be greater than renewDeadline"
    if renew_deadline <= CLIENT_GO_JITTER_FACTOR * retry_period:
        return "renewDeadline must be greater than retryPeriod*JitterFactor"
    if min(lease_duration, renew_deadline, retry_period) <= 0:
        return "must be greater than zero"
    return None


def test_client_go_would_accept_the_guardians_timings_and_refuses_a_renew_deadline_past_the_lease():
    assert client_go_refusal(**CLIENT_GO_DEFAULTS) is None
    assert client_go_refusal(15, 20, 2) == "leaseDuration must be greater than renewDeadline"
    assert client_go_refusal(15, 2, 2) == "renewDeadline must be greater than retryPeriod*JitterFactor"
    ours = {
        "lease_duration": lease.LEASE_DURATION_SECONDS,
        "renew_deadline": lease.RENEW_DEADLINE_SECONDS,
        "retry_period": lease.RENEW_INTERVAL_SECONDS,
    }
    assert client_go_refusal(**ours) is None, ours


def test_the_holder_whose_renewals_fail_never_acts_while_a_candidate_may_take_the_lease(api):
    _, store = api
    time, other_time = FakeTime(), FakeTime(mono=7.0)
    first, second = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, other_time)
    assert first.try_acquire_or_renew() and not second.try_acquire_or_renew()
    # From here every request of the holder fails (its answers cut: a fault at the boundary); the candidate's go
    # through. Both clocks advance together, second by second, for client-go's lease duration twice over.
    taken_at = None
    for second_passed in range(1, 2 * int(CLIENT_GO_DEFAULTS["lease_duration"]) + 1):
        time.advance(1.0)
        other_time.advance(1.0)
        store.fault("cut")
        first.renew_once()
        if second.try_acquire_or_renew() and taken_at is None:
            taken_at = second_passed
        assert not (first.held() and second.held()), f"both act {second_passed} s after the last renewal"
    assert taken_at == CLIENT_GO_DEFAULTS["lease_duration"]


def test_stop_releases_only_a_lease_this_guardian_holds(api):
    _, store = api
    time = FakeTime()
    first, second = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, FakeTime())
    assert first.try_acquire_or_renew() and not second.try_acquire_or_renew()
    second.stop()
    assert store.spec()["holderIdentity"] == IN_CLUSTER
    assert store.spec()["leaseDurationSeconds"] == 15
    # The holder's own stop after another took the Lease leaves it to the taker too.
    second.take()
    first.stop()
    assert store.spec()["holderIdentity"] == FOREGROUND


@pytest.mark.parametrize("fault", ["cut", "html"])
def test_a_renewal_answered_with_a_cut_body_or_html_is_one_failed_try_kept_as_the_last_error(api, fault):
    namespace = api[1].namespace
    endpoint, store = api
    time = FakeTime()
    first = holder(api, IN_CLUSTER, time)
    assert first.renew_once()
    store.fault(fault)
    time.advance(lease.RENEW_INTERVAL_SECONDS)
    assert not first.renew_once()
    expected = {
        "cut": f"the API server at {endpoint.address} answered no whole answer about the Lease {namespace}/{NAME}"
        " (ChunkedEncodingError)",
        "html": f"the API server answered HTTP 200 reading the Lease {namespace}/{NAME} with no Lease (text/html:",
    }[fault]
    assert first.last_error.startswith(expected), first.last_error
    assert first.held()  # within the renew deadline of the last renewal
    time.advance(lease.RENEW_INTERVAL_SECONDS)
    assert first.renew_once() and first.last_error == "" and first.held()


def test_the_renewing_thread_outlives_every_answer_of_the_api_server(api, monkeypatch):
    import time as real_time

    _, store = api
    monkeypatch.setattr(lease, "RENEW_INTERVAL_SECONDS", 0.01)
    renewing = Lease(api[0], IN_CLUSTER, namespace=store.namespace)
    for fault in ("html", "cut", "html"):
        store.fault(fault)
    renewing.start_renewing()
    try:
        deadline = real_time.monotonic() + 10
        while (store.proxy.faults_left() or len(store.requests) < 8) and real_time.monotonic() < deadline:
            real_time.sleep(0.01)
        assert renewing._thread is not None and renewing._thread.is_alive()
        assert renewing.held() and renewing.failure() is None
    finally:
        renewing.stop()
    assert store.spec()["holderIdentity"] == ""


def test_a_holder_that_has_not_renewed_for_the_lease_duration_must_exit_and_a_waiting_one_need_not(api):
    namespace = api[1].namespace
    _, store = api
    time, other_time = FakeTime(), FakeTime(mono=3.0)
    first, second = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, other_time)
    assert first.renew_once() and not second.renew_once()
    for _ in range(int(CLIENT_GO_DEFAULTS["lease_duration"] / 2)):  # 14 s of renewals answered with HTML
        time.advance(2.0)
        store.fault("html")
        assert not first.renew_once()
        assert first.failure() is None
    time.advance(2.0)  # 16 s
    store.fault("html")
    first.renew_once()
    assert first.failure() == (
        f"this guardian held the Lease {namespace}/{NAME} and has not renewed it for 16 s, longer than its 15 s"
        f" ({first.last_error})"
    )
    # The candidate never held it: however long it waits, it need not exit.
    other_time.advance(3600)
    store.fault("cut")
    second.renew_once()
    assert second.failure() is None


def test_a_guardian_whose_renewing_thread_ended_must_exit(api, monkeypatch):
    namespace = api[1].namespace
    renewing = holder(api, IN_CLUSTER, FakeTime())
    monkeypatch.setattr(renewing, "renew_forever", lambda: None)  # it ends without `stop`
    renewing.start_renewing()
    assert renewing._thread is not None
    renewing._thread.join(5)
    assert renewing.failure() == f"the renewing thread of the Lease {namespace}/{NAME} ended (no error kept)"


def test_a_guardian_that_cannot_renew_its_lease_stops_with_its_heartbeat_one_waiting_for_another_waits_on(
    api, settings, monkeypatch, tmp_path
):
    namespace = api[1].namespace
    from incluster.heartbeat import Heartbeat

    _, store = api
    time = FakeTime()
    first = holder(api, IN_CLUSTER, time)
    assert first.renew_once()
    lines: list[str] = []
    beating = Heartbeat(lines.append, str(tmp_path / "heartbeat"), failure=first.failure, clock=lambda: time.wall)
    acting = OneDecision(settings, first, True, [], monkeypatch)
    acting.report = beating
    beating("started")
    beaten = (tmp_path / "heartbeat").stat().st_mtime
    for _ in range(8):  # 16 s of renewals answered with HTML by something in front of the API server
        time.advance(2.0)
        store.fault("html")
        first.renew_once()
    beating("a line after the Lease lapsed")
    assert (tmp_path / "heartbeat").stat().st_mtime == beaten  # the liveness probe's file is left to age
    with pytest.raises(GuardError) as stopped:
        acting.run(sleep=_stop)
    assert str(stopped.value) == (
        f"this guardian held the Lease {namespace}/{NAME} and has not renewed it for 16 s, longer than its 15 s"
        f" ({first.last_error}): this guardian stops (in the cluster, Kubernetes restarts its pod)"
    )
    assert acting.applied == []

    # One that only waits for another holder keeps waiting, its renewals failing for hours.
    other_time, second_time = FakeTime(mono=5.0), FakeTime(mono=9.0)
    theirs, second = holder(api, FOREGROUND, other_time), holder(api, IN_CLUSTER + "-2", second_time)
    assert theirs.take() is not None and not second.renew_once()
    waiting_lines: list[str] = []
    waiting = OneDecision(settings, second, True, waiting_lines, monkeypatch)
    for _ in range(3):
        other_time.advance(3600)
        second_time.advance(3600)
        assert theirs.renew_once()
        store.fault("cut")
        second.renew_once()
        with pytest.raises(Stop):
            waiting.run(sleep=_stop)
    assert waiting.applied == [] and waiting_lines[-1].endswith(": this guardian waits to act")


def test_a_park_that_outlives_the_lease_is_reported_and_not_recorded_beside_the_new_holders_refusal(
    api, tmp_path, monkeypatch
):
    namespace = api[1].namespace
    from incluster import record
    from incluster.google_token import Credential
    from incluster.guardian import command
    from incluster.guardian.command import cluster_hooks
    from tests.incluster.test_guardian_park import PARK, parking_settings
    from tests.support.lustre_stand_in import BUCKET, INSTANCE, StandInLustre, StandInObjects, a_run

    time, other_time = FakeTime(), FakeTime(mono=4.0)
    mine, theirs = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, other_time)
    assert mine.renew_once()
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    settings = parking_settings(lustre)
    monkeypatch.setattr(job_client, "connect", lambda endpoint: None)
    monkeypatch.setattr(command.lustre_transfer, "POLL_SECONDS", 0)
    lines: list[str] = []
    later = Guardian(settings, Endpoint("http://grpo-head-svc:8265"), Hooks(), lines.append, lease=theirs,
                     wait_for_lease=False, clock=lambda: other_time.wall)  # fmt: skip

    class TakenMidPark(StandInLustre):
        """The stand-in instance, during whose export the foreground guardian takes the Lease (`--take-over`) and
        has its own park refused (the Managed Lustre API queues no second operation while one runs)."""

        def export_data(self, instance: str, lustre_path: str, gcs_uri: str) -> dict:
            if theirs.observed is None or theirs.observed.holder != FOREGROUND:
                theirs.take()
                later.append(1, "park-failed", "unable to queue the operation; python -m jobs park parks it by hand")
            return super().export_data(instance, lustre_path, gcs_uri)

    monkeypatch.setattr(command, "RestTransfers", lambda headers: TakenMidPark(lustre, bucket, BUCKET, INSTANCE))
    monkeypatch.setattr(command, "RestObjects", lambda name, headers: StandInObjects(bucket))
    endpoint = Endpoint(address="http://grpo-head-svc:8265")
    hooks = cluster_hooks(settings, endpoint, lambda: Credential("ya29.guardian", None), lambda line: None)
    parking = Guardian(settings, endpoint, hooks, lines.append, lease=mine, clock=lambda: time.wall)
    assert parking.may_act()  # the check before the action: it holds the Lease
    # The park goes on to its end (the export runs in the cloud), its Lease taken meanwhile; by its last renewal
    # (no renewal came in between) it still holds it: only the read just before the entry shows the loss.
    parking.apply(PARK)
    entries = record.read(settings.run_dir)
    assert [(item["event"], item.get("lease")) for item in entries] == [
        ("submitted", None),  # the run's record as it stood (tests/support/lustre_stand_in.py a_run)
        ("park-failed", {"holder": FOREGROUND, "transitions": 1}),
    ]
    marker = json.loads((bucket / names.PARK_MARKER).read_text())
    objects = sum(marker["objects"].values())
    assert lines[-1] == (
        f"{settings.run}: attempt 1 parked: {objects} objects (step 6) in gs://{BUCKET}/{marker['prefix']}; the Lustre"
        " instance bills on"
        f" until storage.parked true and pulumi up delete it (not recorded: this guardian lost the Lease; {FOREGROUND}"
        f" holds the Lease {namespace}/{NAME} (renewed 0 s ago))"
    )


def test_a_reader_drops_an_entry_its_writer_made_after_another_term_had_written(api, settings, monkeypatch, tmp_path):
    from dataclasses import replace

    from incluster import record

    runtime = settings.submission["runtime_env"]
    env = {**runtime["env_vars"], "GRPO_RUN_DIR": str(tmp_path / "run")}
    settings = replace(settings, submission={**settings.submission, "runtime_env": {**runtime, "env_vars": env}})

    time, other_time = FakeTime(), FakeTime(mono=4.0)
    first, second = holder(api, IN_CLUSTER, time), holder(api, FOREGROUND, other_time)
    assert first.renew_once()
    monkeypatch.setattr(job_client, "connect", lambda endpoint: None)
    lines: list[str] = []
    old = Guardian(settings, Endpoint("http://127.0.0.1:9"), Hooks(), lines.append, lease=first)
    new = Guardian(settings, Endpoint("http://127.0.0.1:9"), Hooks(), lines.append, lease=second)
    old.append(1, "submitted", "the first attempt")
    second.take()
    new.append(1, "failed", "the GPU node went away")
    # The old holder's check passed just before the take-over (the race no check closes): its entry lands after.
    monkeypatch.setattr(first, "confirm", lambda: {"holder": IN_CLUSTER, "transitions": 0})
    old.append(1, "recovering", "a late decision of the deposed guardian", details={"backoff_s": 30})
    new.append(1, "gave-up", "the new holder's decision")
    written = record.read(settings.run_dir)
    assert [item["event"] for item in written] == ["submitted", "failed", "recovering", "gave-up"]
    assert [item["event"] for item in lease.current_entries(written)] == ["submitted", "failed", "gave-up"]
    assert [item["event"] for item in lease.current_entries([*written, {"event": "unstamped"}])][-1] == "unstamped"
