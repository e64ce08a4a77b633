"""Spark for the analysis: a local or standalone-cluster session (classic, a JVM in this
process) or a Spark Connect thin client (`sc://host:port`, no JVM here), and the sessions
read as one Spark DataFrame.

Whatever runs the queries reads the session files itself: on a cluster every executor
opens the parts by the absolute path this process gives, so sessions must live on a
filesystem every worker mounts at the same path.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mailbus.sessions.reader import Session

DEFAULT_CONNECT_PORT = 15002
DEFAULT_MASTER_PORT = 7077
# How long to wait for a master or a Connect server to accept a TCP connection.
REACH_TIMEOUT_S = 10.0


class SparkUnreachableError(ValueError):
    """The Spark master or Connect server named by the user cannot be reached."""


def _endpoints(url: str, scheme: str, default_port: int) -> list[tuple[str, int]]:
    """(host, port) pairs of `scheme://h1:p1,h2:p2/...`; a clear ValueError otherwise."""
    prefix = f"{scheme}://"
    if not url.startswith(prefix):
        raise ValueError(f"{url!r} is not a {prefix}HOST:PORT URL")
    authority = url[len(prefix) :].split("/", 1)[0]
    if not authority:
        raise ValueError(f"{url!r} names no host (expected {prefix}HOST:PORT)")
    endpoints = []
    for item in authority.split(","):
        parts = urlsplit(f"//{item}")
        try:
            port = parts.port or default_port
        except ValueError:
            raise ValueError(f"{url!r}: {item!r} has no valid port") from None
        if not parts.hostname:
            raise ValueError(f"{url!r}: {item!r} names no host")
        endpoints.append((parts.hostname, port))
    return endpoints


def check_remote(url: str) -> tuple[str, int]:
    """The (host, port) of a Spark Connect URL `sc://HOST[:PORT][/;params]`."""
    endpoints = _endpoints(url, "sc", DEFAULT_CONNECT_PORT)
    if len(endpoints) != 1:
        raise ValueError(f"{url!r}: a Spark Connect URL names one server")
    return endpoints[0]


def check_master(master: str) -> list[tuple[str, int]]:
    """The masters' (host, port) of a `spark://` URL; [] for local, yarn, k8s and the rest
    (Spark checks those itself)."""
    if not master.strip():
        raise ValueError("the Spark master URL is empty")
    if master.startswith("spark://"):
        return _endpoints(master, "spark", DEFAULT_MASTER_PORT)
    return []


def reach(url: str, endpoints: Sequence[tuple[str, int]], timeout: float = REACH_TIMEOUT_S) -> None:
    """Raise SparkUnreachableError unless one endpoint accepts a TCP connection within
    `timeout`: a wrong URL fails at once with its reason instead of Spark's long retries."""
    reasons = []
    for host, port in endpoints:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise SparkUnreachableError(f"cannot reach {url} ({'; '.join(reasons)})")


def is_loopback(endpoints: Sequence[tuple[str, int]]) -> bool:
    """Whether every endpoint is this machine's loopback (by name or address)."""

    def loopback(host: str) -> bool:
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    return bool(endpoints) and all(loopback(host) for host, _ in endpoints)


def spark_session(
    master: str = "local[*]",
    *,
    remote: str | None = None,
    shuffle_partitions: int = 4,
    driver_memory: str = "2g",
    app_name: str = "mailbus-analyze",
) -> SparkSession:
    """A SparkSession for the analysis (getOrCreate: an existing one is reused).

    With `remote` (`sc://HOST:PORT`) it is a Spark Connect client: the queries run in the
    server's driver and this process starts no JVM. Otherwise `master` is `local[N]`, a
    standalone cluster `spark://HOST:PORT` or any master Spark knows.
    """
    if remote is not None:
        return connect(remote)
    endpoints = check_master(master)
    if endpoints:
        reach(master, endpoints)
    from pyspark.sql import SparkSession

    builder: Any = SparkSession.builder
    spark = (
        builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local") or is_loopback(endpoints):
        # A driver for a local run or a cluster on loopback listens on loopback only
        # (executors there must reach it at 127.0.0.1, never the machine's interfaces).
        spark = spark.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    spark = spark.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session: SparkSession = spark
    return session


def connect(remote: str, timeout: float = REACH_TIMEOUT_S) -> SparkSession:
    """A Spark Connect session on `remote` (thin client: gRPC, no JVM in this process)."""
    host, port = check_remote(remote)
    reach(remote, [(host, port)], timeout)
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:
        raise ImportError(
            f"Spark Connect needs the client libraries ({exc}); install mailbus[spark]"
        ) from None
    session: Any = ConnectSession.builder.remote(remote).getOrCreate()
    return session  # type: ignore[no-any-return]


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect client session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def cancel(spark: Any) -> None:
    """Cancel the jobs running for `spark` (from any thread)."""
    if is_connect(spark):
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


def task_progress(spark: Any) -> tuple[int, int] | None:
    """(completed, total) tasks of the running stages of a classic session, from Spark's
    status tracker; None through Connect (see on_connect_progress)."""
    if is_connect(spark):
        return None
    tracker = spark.sparkContext.statusTracker()
    done = total = 0
    for stage in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return done, total


def on_connect_progress(spark: Any, report: Callable[[int, int], None]) -> Callable[[], None]:
    """Call `report(completed, total)` tasks as a Connect server streams its progress;
    returns the function that stops it."""

    def handler(*args: Any, **kwargs: Any) -> None:
        stages = kwargs.get("stages", args[0] if args else None) or []
        report(
            sum(s.num_completed_tasks for s in stages),
            sum(s.num_tasks for s in stages),
        )

    spark.registerProgressHandler(handler)
    return lambda: spark.removeProgressHandler(handler)


def _local_path(uri: str) -> Path:
    """The local path of a file URI as Spark reports it (`file:/a%20b/c` or a plain path)."""
    parts = urlsplit(uri)
    if parts.scheme not in ("", "file"):
        raise ValueError(f"{uri} is not on a local or shared filesystem")
    return Path(unquote(parts.path))


def read_sessions(spark: Any, sessions: Sequence[Session], columns: Sequence[str]) -> Any:
    """Every part of every session as ONE Spark DataFrame (one scan, read in parallel by
    the executors) of `columns` plus `session`, mapped back from each row's file."""
    F: Any
    if is_connect(spark):  # pyspark.sql.functions would build classic (JVM) columns
        from pyspark.sql.connect import functions as F
    else:
        from pyspark.sql import functions as F

    owner = {p.resolve(): s.name for s in sessions for p in s.parts}
    if not owner:
        raise ValueError("no part to read")
    frame = spark.read.parquet(*(str(p) for p in owner))
    # Spark names each file by a URI of its own making (percent-encoded); the labels are
    # joined on that name, as input_file_name() gives it (the same as inputFiles()).
    labels = []
    for uri in frame.inputFiles():
        path = _local_path(uri).resolve()
        if path not in owner:
            raise ValueError(f"Spark read {uri}, which is no part of the sessions given")
        labels.append((uri, owner[path]))
    mapping = spark.createDataFrame(labels, "_file string, session string")
    return (
        frame.select(*columns, F.input_file_name().alias("_file"))
        .join(F.broadcast(mapping), "_file")
        .drop("_file")
    )
