"""A real Spark standalone cluster (a master and two workers) and a Spark Connect server,
started from the pyspark package's own launcher (`bin/spark-class`, `bin/spark-submit`)
on loopback with free ports; logs, work and scratch dirs in a temp dir. Every process
runs in its own process group, killed whole (executors included) on stop."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from mailbus.extras import require
from mailbus.stacks.loopback import HOST, free_port, log_tail
from mailbus.stacks.waiting import eventually

START_TIMEOUT_S = 120.0  # JVMs start slowly on a shared 2-core machine
WORKERS = 2
WORKER_MEMORY = "1g"
POLL_S = 0.2  # JVMs take seconds to start: asking more often only loads them


def spark_home() -> Path:
    pyspark = require("pyspark", "spark", "a Spark cluster on loopback")

    return Path(str(pyspark.__file__)).parent


class SparkProcesses:
    """The cluster and the Connect server; `start()` launches all at once, then waits."""

    def __init__(
        self, root: Path, *, workers: int = WORKERS, worker_memory: str = WORKER_MEMORY
    ) -> None:
        """`workers` of one core and `worker_memory` each (Spark's size, "1g")."""
        self.root = root
        self.workers = workers
        self.worker_memory = worker_memory
        self.master_port = free_port()
        self.master_ui_port = free_port()
        self.connect_port = free_port()
        self.master_url = f"spark://{HOST}:{self.master_port}"
        self.remote_url = f"sc://{HOST}:{self.connect_port}"
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    def env(self) -> dict[str, str]:
        conf = self.root / "conf"  # no user or machine spark-defaults: only these
        conf.mkdir(exist_ok=True)
        # Tasks go to a free core at once instead of waiting up to 3 s for the one that
        # caches their block: on tiny test data the wait is nearly all of a stage.
        # No generated code: on a few hundred rows, compiling each stage's Java (seconds
        # per task in a cold executor, 33 s per run measured) costs far more than
        # interpreting it: the standalone run took 197 -> 126 s and 329 -> 171 s in two
        # alternated pairs on a loaded machine. The results are Spark's either way; the
        # parity test (test_analysis.py) keeps code generation on, as the product runs.
        (conf / "spark-defaults.conf").write_text(
            "spark.locality.wait 0s\n"
            "spark.sql.codegen.wholeStage false\n"
            "spark.sql.codegen.factoryMode NO_CODEGEN\n"
        )
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_CONF_DIR=str(conf),
            SPARK_LOCAL_IP=HOST,
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_PID_DIR=str(self.root / "pids"),
            SPARK_LOCAL_DIRS=str(self.root / "scratch"),
            SPARK_DAEMON_MEMORY="512m",
            # No REST submission server: it would bind a fixed port (6066).
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        )
        return env

    def _launch(self, name: str, command: list[str]) -> None:
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env(),
                cwd=self.root,
                start_new_session=True,  # its own process group, killed whole on stop
            )
        self.processes.append((name, process))

    def start(self) -> SparkProcesses:
        for d in ("logs", "pids", "scratch"):
            (self.root / d).mkdir(exist_ok=True)
        bin_dir = spark_home() / "bin"
        spark_class = str(bin_dir / "spark-class")
        self._launch(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                *("--host", HOST, "--port", str(self.master_port)),
                *("--webui-port", str(self.master_ui_port)),
            ],
        )
        for n in range(1, self.workers + 1):
            work = self.root / f"work{n}"
            work.mkdir(exist_ok=True)
            self._launch(
                f"worker{n}",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", HOST, "--port", "0", "--webui-port", "0"),
                    *("--cores", "1", "--memory", self.worker_memory, "--work-dir", str(work)),
                    self.master_url,
                ],
            )
        self._launch(
            "connect",
            [
                str(bin_dir / "spark-submit"),
                *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
                *("--master", "local[2]", "--name", "mailbus-connect-test"),
                *("--driver-memory", "1g"),
                *("--conf", f"spark.connect.grpc.binding.port={self.connect_port}"),
                *("--conf", f"spark.connect.grpc.binding.address={HOST}"),
                *(
                    "--conf",
                    f"spark.driver.host={HOST}",
                    "--conf",
                    f"spark.driver.bindAddress={HOST}",
                ),
                *("--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2"),
                *("--conf", "spark.sql.session.timeZone=UTC"),
                "spark-internal",
            ],
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _check_alive(self) -> None:
        for name, process in self.processes:
            if process.poll() is not None:
                raise AssertionError(
                    f"spark {name} exited with {process.returncode}:\n"
                    + log_tail(self.root / f"{name}.log", 40)
                )

    def master_state(self) -> dict[str, Any]:
        url = f"http://{HOST}:{self.master_ui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            state: dict[str, Any] = json.load(response)
        return state

    def _workers_alive(self) -> int:
        self._check_alive()
        try:
            return int(self.master_state()["aliveworkers"])
        except (OSError, ValueError):  # not listening yet, or a half-written answer
            return 0

    def _connect_listening(self) -> bool:
        self._check_alive()
        with contextlib.suppress(OSError), socket.create_connection((HOST, self.connect_port), 1):
            return True
        return False

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        eventually(
            lambda: self._workers_alive() == self.workers,
            deadline - time.monotonic(),
            f"{self.workers} workers to register with the master",
            longest_pause=POLL_S,
        )
        eventually(
            self._connect_listening,
            deadline - time.monotonic(),
            f"the Spark Connect server on port {self.connect_port}",
            longest_pause=POLL_S,
        )

    def stop(self) -> None:
        """SIGTERM to every process group, SIGKILL to what is left after a bound."""
        for _, process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for _, process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(deadline - time.monotonic(), 0.1))
            # The group may outlive its leader (executors), so it is killed either way.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        self.processes.clear()
