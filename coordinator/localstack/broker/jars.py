"""Fetch the broker's jars from Maven Central once, by coordinates, into a cache outside the repo.

The pom next to this file names the coordinates; Maven resolves the transitive runtime closure, which is
exactly the broker's classpath. A marker file written after the copy succeeds makes later calls free and
makes a half-finished download (killed, offline) retry instead of starting a broken broker.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from myolo.coordinator.localstack.broker.errors import BrokerError

DEFAULT_KAFKA_VERSION = "4.1.2"
POM = Path(__file__).with_name("pom.xml")
_MARKER = "complete.json"
_CENTRAL = "https://repo.maven.apache.org/maven2"
# Fully qualified (and pinned) so an offline machine fails with "could not resolve ... Connection refused"
# rather than Maven's misleading "No plugin found for prefix 'dependency'".
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


def kafka_version() -> str:
    """The Kafka version to run: MYOLO_KAFKA_VERSION or the default, checked to be a 4.x release."""
    version = os.environ.get("MYOLO_KAFKA_VERSION", DEFAULT_KAFKA_VERSION).strip()
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if not match or int(match.group(1)) < 4:
        raise BrokerError(
            f"MYOLO_KAFKA_VERSION={version!r} is not an Apache Kafka 4.x release version like 4.1.2",
            hint=f"unset MYOLO_KAFKA_VERSION (default {DEFAULT_KAFKA_VERSION}) or set it to e.g. 4.1.2",
        )
    return version


def cache_root() -> Path:
    """MYOLO_CACHE_DIR, else $XDG_CACHE_HOME/myolo, else ~/.cache/myolo."""
    if os.environ.get("MYOLO_CACHE_DIR"):
        return Path(os.environ["MYOLO_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "myolo"


def _user_lib() -> Path | None:
    """MYOLO_KAFKA_LIB: an existing directory of Kafka jars (e.g. libs/ of a Kafka download), for offline use."""
    raw = os.environ.get("MYOLO_KAFKA_LIB")
    if not raw:
        return None
    lib = Path(raw).expanduser()
    if not any(lib.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"MYOLO_KAFKA_LIB={raw} holds no kafka_2.13-*.jar",
            hint="point MYOLO_KAFKA_LIB at the libs/ folder of an Apache Kafka 4.x download, or unset it",
        )
    return lib


def _last_lines(output: str, count: int) -> str:
    """Maven's last meaningful lines: colour codes and bare `[ERROR]` spacer lines removed."""
    clean = re.sub(r"\x1b\[[0-9;]*m", "", output)
    boilerplate = re.compile(r"^\[ERROR\]\s*$|re-run Maven|more information about the errors|\[Help \d+\] http")
    lines = [line for line in clean.splitlines() if line.strip() and not boilerplate.search(line)]
    return "\n".join(lines[-count:])


def _run_maven(version: str, target: Path) -> None:
    mvn = shutil.which("mvn")
    if not mvn:
        raise BrokerError(
            "Maven (mvn) is not installed; it fetches the Kafka broker's jars from Maven Central",
            hint="install Maven (Debian/Ubuntu: apt-get install maven), or set MYOLO_KAFKA_LIB to the libs/ "
            "folder of an Apache Kafka 4.x download",
        )
    cmd = [
        mvn, "-B", "-q", "-f", str(POM), f"{_DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={target}", f"-Dkafka.version={version}",
        "-Dstyle.color=never",
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        output, failed = proc.stdout + proc.stderr, proc.returncode != 0
    except subprocess.TimeoutExpired as exc:
        output, failed = f"{exc.stdout or ''}{exc.stderr or ''}\n(mvn timed out after 900 s)", True
    if failed or not any(target.glob("kafka_2.13-*.jar")):
        tail = _last_lines(output, 12) or "(mvn printed nothing)"
        raise BrokerError(
            f"Maven could not fetch Apache Kafka {version} jars (org.apache.kafka:kafka_2.13:{version})",
            hint=f"check that this machine reaches {_CENTRAL} (a proxy goes in ~/.m2/settings.xml) and that "
            f"version {version} exists; or set MYOLO_KAFKA_LIB to the libs/ folder of a Kafka download",
            detail=f"last lines of mvn:\n{tail}",
        )


def ensure_jars(version: str | None = None) -> Path:
    """The directory of jars for `version`, fetching it with Maven the first time only.

    Serialised with a file lock so a test session and `myoloctl local up` started together download once.
    """
    user = _user_lib()
    if user:
        return user
    version = version or kafka_version()
    home = cache_root() / f"kafka-{version}"
    lib, marker = home / "lib", home / _MARKER
    if marker.exists() and lib.is_dir():
        return lib
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and lib.is_dir():
            return lib
        shutil.rmtree(lib, ignore_errors=True)
        partial = home / "lib.partial"
        shutil.rmtree(partial, ignore_errors=True)
        _run_maven(version, partial)
        partial.rename(lib)
        jars = sorted(p.name for p in lib.glob("*.jar"))
        marker.write_text(json.dumps({"kafka_version": version, "jars": jars}, indent=1))
    return lib


def cached(version: str | None = None) -> bool:
    """True when starting the broker needs no download (the CLI says so before a long first fetch)."""
    if os.environ.get("MYOLO_KAFKA_LIB"):
        return True
    home = cache_root() / f"kafka-{version or kafka_version()}"
    return (home / _MARKER).exists() and (home / "lib").is_dir()
