"""Audits on a real Dask distributed cluster (worker processes on loopback): identical findings.

The cluster is a ``LocalCluster`` with two single-threaded worker *processes* behind nannies, so
tasks are pickled to other processes exactly as on a remote cluster. Checked: the findings equal
the serial run's (for a registered policy and for a plug-in file that is not installed on the
workers, which dpaudit sends by value); a worker SIGKILLed mid-audit is survived (its nanny
restarts it and the scheduler reruns its pieces) with the same findings; a wrong address or a
cluster without workers is one sentence, never a hang.
"""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time

import pytest

distributed = pytest.importorskip("distributed")

from dpaudit.runner import check as audit_policy, findings_json  # noqa: E402
from dpaudit.engine import Engine, dask_executor  # noqa: E402
from dpaudit.errors import DPAuditError  # noqa: E402

KW = dict(runs=1000, horizon=10, seed=3)


_stable = findings_json  # the findings, without how the audit ran


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=50) as c:
        yield c


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """A plug-in file that is not importable on the workers (dpaudit sends it by value), and its serial findings."""
    src = tmp_path_factory.mktemp("plugin") / "mine_on_dask.py"
    src.write_text(textwrap.dedent("""
        from dpaudit.policies.ucb import AdaCUCB

        class Mine(AdaCUCB):
            pass
    """))
    spec = f"{src}:Mine"
    return spec, _stable(audit_policy(spec, {"n_arms": "3"}, workers=1, **KW))


@pytest.mark.tooling
def test_findings_on_a_dask_cluster_equal_the_serial_run(cluster, plugin):
    spec, serial = plugin
    remote = audit_policy(spec, {"n_arms": "3"}, scheduler=cluster.scheduler_address, **KW)
    assert remote["workers"] == f"Dask cluster {cluster.scheduler_address}"
    assert _stable(remote) == serial


@pytest.mark.tooling
def test_a_worker_killed_mid_audit_is_survived(cluster, plugin):
    from distributed import Client

    spec, serial = plugin
    with Client(cluster.scheduler_address, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
        pids = list(client.run(os.getpid).values())
        result: dict = {}

        def run() -> None:
            try:
                result["out"] = audit_policy(spec, {"n_arms": "3"}, scheduler=cluster.scheduler_address, **KW)
            except BaseException as exc:  # noqa: BLE001 - reported below
                result["exc"] = exc

        th = threading.Thread(target=run)
        th.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(client.processing().values()):
            time.sleep(0.01)
        assert th.is_alive(), "the audit finished before a worker could be killed"
        os.kill(pids[0], signal.SIGKILL)  # its nanny restarts it; the scheduler reruns its pieces
        th.join(180)
        assert not th.is_alive(), "the audit hung after a worker was killed"
        client.wait_for_workers(2, timeout=60)
    assert "exc" not in result, result.get("exc")
    assert _stable(result["out"]) == serial


@pytest.mark.tooling
def test_a_wrong_scheduler_address_is_one_sentence():
    with pytest.raises(DPAuditError, match="cannot connect to the Dask scheduler at tcp://127.0.0.1:9"):
        dask_executor("tcp://127.0.0.1:9", timeout=1)
    with pytest.raises(DPAuditError, match="must be a Dask scheduler address"):
        dask_executor("localhost")


@pytest.mark.tooling
def test_a_cluster_without_workers_is_reported_not_waited_on():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None, silence_logs=50) as empty:
        ex, health, close = dask_executor(empty.scheduler_address, no_workers_grace=0.5)
        try:
            eng = Engine(executor=ex, health=health, poll=0.2)
            t0 = time.monotonic()
            with pytest.raises(DPAuditError, match="has had no workers for 0.5 s"):
                eng.map(pow, [(2, 3)])
            assert time.monotonic() - t0 < 30
        finally:
            close()
