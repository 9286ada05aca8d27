"""Find the machine's Java and make sure the broker can run on it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from myolo.coordinator.localstack.broker.errors import BrokerError

MIN_JAVA = 17  # Kafka 4.x brokers require Java 17
_INSTALL_HINT = "install Java 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"


@dataclass(frozen=True)
class Java:
    executable: Path
    major: int
    version: str


def _locate() -> Path:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if not os.access(candidate, os.X_OK):
            raise BrokerError(
                f"JAVA_HOME is {home} but {candidate} is not an executable java",
                hint=f"point JAVA_HOME at a JDK/JRE directory that has bin/java, or unset it; {_INSTALL_HINT}",
            )
        return candidate
    found = shutil.which("java")
    if not found:
        raise BrokerError("Java was not found (no JAVA_HOME, no `java` on PATH)", hint=_INSTALL_HINT)
    return Path(found)


def parse_major(version_output: str) -> tuple[int, str]:
    """Major version from `java -version` text: '"17.0.15"' -> 17, legacy '"1.8.0_392"' -> 8."""
    match = re.search(r'version "([^"]+)"', version_output)
    if not match:
        raise ValueError(f"no version string in: {version_output.strip()[:200]!r}")
    version = match.group(1)
    parts = version.split(".")
    major = int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(re.match(r"\d+", parts[0]).group())
    return major, version


def find_java() -> Java:
    """The java that will run the broker, checked to be new enough."""
    executable = _locate()
    try:
        proc = subprocess.run([str(executable), "-version"], capture_output=True, text=True, timeout=30, check=False)
        major, version = parse_major(proc.stderr + proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise BrokerError(f"{executable} -version failed: {exc}", hint=_INSTALL_HINT) from exc
    if major < MIN_JAVA:
        raise BrokerError(
            f"Java {version} at {executable} is too old: Apache Kafka 4 needs Java {MIN_JAVA} or newer",
            hint=_INSTALL_HINT,
        )
    return Java(executable, major, version)
