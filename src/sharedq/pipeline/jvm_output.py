"""What the JVM under a Spark session prints: errors, not Spark's start-up chatter.

A JVM started for a session writes to the terminal it inherited, past Python's
``logging`` and past any ``rich`` console: Spark's choice of log4j profile and log
level, a warning that the host name resolves to a loopback address, one that the
native Hadoop library is missing, the JVM's own note on incubator modules.  None of it
asks anything of a user, and it lands in the middle of the demo's progress display.

So the session starts its JVM here (when the process has none yet):

* with :data:`LOG4J2_CONFIG` (errors only) as its log4j configuration, unless the
  caller's ``spark.driver.extraJavaOptions`` names one;
* with its stderr on a pipe that a thread reads line by line: the lines in
  :data:`NOISE` are dropped, every other line (an error, a stack trace, whatever a
  Python worker the JVM started writes) goes to the Python logger
  ``sharedq.pipeline.jvm``, at ERROR when it looks like one and WARNING otherwise, so
  that it comes out where the application's log goes and in order with it.  With no
  logging configured, Python prints WARNING and above on stderr, as before.

A JVM already running in the process (a session started and stopped, ``spark-submit``)
is used as it is.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger("sharedq.pipeline.jvm")

#: The log4j 2 configuration the session's JVM starts with: errors only, on stderr.
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")

#: Lines of the JVM's stderr that are dropped: start-up notes that ask nothing of a user.
NOISE: tuple[re.Pattern[str], ...] = (
    # The JVM itself, for the --add-modules=jdk.incubator.vector that Spark 4 adds.
    re.compile(r"^WARNING: Using incubator modules: "),
    # Spark, when it configures log4j itself (not with LOG4J2_CONFIG), and for a shell.
    re.compile(r"^Using Spark's default log4j profile: "),
    re.compile(r'^Setting default log level to "'),
    re.compile(r"^To adjust logging level use sc\.setLogLevel\(newLevel\)"),
)
#: A line that reports an error (log4j's level, an exception, a Java error).
_ERROR = re.compile(r"\bERROR\b|Exception|Error\b|^\s+at |^Caused by: ")


def is_noise(line: str) -> bool:
    """Whether a line of the JVM's stderr is start-up chatter (dropped)."""
    return any(pattern.search(line) for pattern in NOISE)


def quiet_java_options(options: str | None) -> str:
    """``spark.driver.extraJavaOptions`` with :data:`LOG4J2_CONFIG` added, unless they
    already name a log4j configuration."""
    options = (options or "").strip()
    if "log4j2.configurationFile" in options or "log4j.configuration" in options:
        return options
    setting = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
    return f"{options} {setting}".strip()


def forward(stream: IO[bytes], emit: Callable[[int, str], None] | None = None) -> None:
    """Read ``stream`` to its end: each line that is not :func:`is_noise` is emitted
    (``emit(level, line)``; by default to the logger ``sharedq.pipeline.jvm``)."""
    send = emit or (lambda level, line: logger.log(level, "%s", line))
    with stream:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line.strip() or is_noise(line):
                continue
            send(logging.ERROR if _ERROR.search(line) else logging.WARNING, line)


def start_context(settings: Mapping[str, str]) -> None:
    """Start the JVM (its stderr read by :func:`forward`) and a SparkContext on it.

    ``settings`` are the session's (``spark.master`` and ``spark.app.name`` among them);
    they go to ``spark-submit``, so that the driver's JVM options and memory apply.
    If the JVM cannot start, what it said is logged before the error is raised.
    """
    from pyspark import SparkConf, SparkContext, java_gateway

    launch: Callable[..., Any] = java_gateway.launch_gateway
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    read_end, write_end = os.pipe()
    reader = threading.Thread(
        target=forward,
        args=(os.fdopen(read_end, "rb"),),
        name="sharedq-jvm-stderr",
        daemon=True,
    )
    reader.start()
    try:
        with os.fdopen(write_end, "wb") as jvm_stderr:  # the JVM holds its own copy
            gateway = launch(conf, popen_kwargs={"stderr": jvm_stderr})
    except BaseException:
        reader.join(timeout=5)  # the JVM has exited: what it said is logged first
        raise
    SparkContext(conf=conf, gateway=gateway)


def jvm_running() -> bool:
    """Whether this process has started (or joined) a JVM for Spark already."""
    from pyspark import SparkContext

    # PySpark keeps the gateway to its one JVM on the class, across stopped contexts.
    return SparkContext._gateway is not None
