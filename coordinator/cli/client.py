"""``myoloctl``'s typed client of the coordinator API: one method per route it uses, each answer decoded into
the Struct the server encodes it from, and the only place a ``/v1/`` path is written.

The HTTP under it (several coordinators, 307 to the leader, the bearer token, TLS, errors read back into
refusals) is ``transport.py``. A refusal raised here reaches ``main.py``, which turns it into its exit code.
``AgentClient`` reads the node agents' own endpoints (a worker's log, a profile).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlencode

import typer

from myolo.coordinator.api.answers import LeaderAnswer
from myolo.coordinator.cli.transport import Transport
from myolo.coordinator.commands.answers import IntentList
from myolo.coordinator.cordons.answers import CordonAnswer
from myolo.coordinator.drift.answers import RuleReset, StatusList
from myolo.coordinator.drift.interface import DriftView
from myolo.coordinator.drift.records import ReferenceRecord, RuleRecord
from myolo.coordinator.drift.rule import DriftRule
from myolo.coordinator.fleet.answers import IntervalRequest, IntervalSent
from myolo.coordinator.jobs.answers import JobAnswer, JobList
from myolo.coordinator.jobs.profile import ProfileRequest, ProfileStarted
from myolo.coordinator.nodes.answers import NodeKeyAnswer, NodeKeyList
from myolo.coordinator.preflight.records import PreflightReport, PreflightRequest
from myolo.coordinator.quantize.answers import RunList
from myolo.coordinator.quantize.records import QuantizeRequest, QuantizeRun
from myolo.coordinator.registry.answers import (
    AliasAnswer,
    AliasHistory,
    AliasList,
    ModelAnswer,
    ModelList,
    VersionAnswer,
    VersionPage,
)
from myolo.coordinator.registry.interface import NewVersion
from myolo.coordinator.rollouts.answers import RolloutAnswer, RolloutList
from myolo.coordinator.rollouts.config import Plan
from myolo.events.payloads.worker_logs import WorkerLogChunk

ApiOption = Annotated[
    str | None,
    typer.Option(
        "--api",
        envvar="MYOLO_API",
        help="Coordinator API URL, e.g. http://10.0.0.5:8480 (default: the coordinators of `myoloctl local up`). "
        "Several may be given, comma-separated; each is tried in turn.",
        show_default=False,
    ),
]
Json = dict[str, Any]  # the fleet's answers: computed per node, no Struct on the server either


def _path(*parts: str | int) -> str:
    """``/v1/`` and the parts, each quoted (a name with a slash stays one part)."""
    return "/v1/" + "/".join(quote(str(p), safe="") for p in parts)


class ApiClient(Transport):
    """The coordinators' routes, by name."""

    # -- core and fleet -------------------------------------------------------------------------------------
    def leader(self) -> LeaderAnswer:
        return self.call("GET", _path("leader"), LeaderAnswer)

    def nodes(self) -> Json:
        return self.call("GET", _path("nodes"), Json)

    def node(self, node_id: str) -> Json:
        return self.call("GET", _path("nodes", node_id), Json)

    def gpus(self) -> Json:
        return self.call("GET", _path("gpus"), Json)

    def commands(self) -> IntentList:
        return self.call("GET", _path("commands"), IntentList)

    def cordon(self, node_id: str, reason: str | None) -> CordonAnswer:
        return self._cordon("cordon", node_id, reason)

    def uncordon(self, node_id: str, reason: str | None) -> CordonAnswer:
        return self._cordon("uncordon", node_id, reason)

    def _cordon(self, verb: str, node_id: str, reason: str | None) -> CordonAnswer:
        body = {} if reason is None else {"reason": reason}
        return self.call("POST", _path("nodes", node_id, verb), CordonAnswer, body)

    def set_interval(self, node_id: str, interval_s: float) -> IntervalSent:
        """Send the node's agent a signed ``set_interval``; the answer names the command on its way."""
        return self.call(
            "POST", _path("nodes", node_id, "interval"), IntervalSent, IntervalRequest(interval_s=interval_s)
        )

    # -- node keys ------------------------------------------------------------------------------------------
    def enroll(self, node_id: str, public_key: str) -> NodeKeyAnswer:
        return self.call("PUT", _path("nodes", node_id, "key"), NodeKeyAnswer, {"public_key": public_key})

    def revoke_key(self, node_id: str) -> NodeKeyAnswer:
        return self.call("DELETE", _path("nodes", node_id, "key"), NodeKeyAnswer)

    def node_keys(self) -> NodeKeyList:
        return self.call("GET", _path("node-keys"), NodeKeyList)

    # -- jobs -----------------------------------------------------------------------------------------------
    def jobs(self) -> JobList:
        return self.call("GET", _path("jobs"), JobList)

    def job(self, name: str) -> JobAnswer:
        return self.call("GET", _path("jobs", name), JobAnswer)

    def apply(self, manifest: str) -> JobAnswer:
        """Create or update a job (``last_status`` 201: created)."""
        return self.call("POST", _path("jobs"), JobAnswer, {"manifest": manifest})

    def scale(self, name: str, replicas: int) -> JobAnswer:
        return self.call("POST", _path("jobs", name, "scale"), JobAnswer, {"replicas": replicas})

    def delete_job(self, name: str) -> JobAnswer:
        return self.call("DELETE", _path("jobs", name), JobAnswer)

    def profile(self, job: str, request: ProfileRequest) -> ProfileStarted:
        return self.call("POST", _path("jobs", job, "profile"), ProfileStarted, request)

    def preflight(self, request: PreflightRequest) -> PreflightReport:
        return self.call("POST", _path("preflight"), PreflightReport, request)

    # -- registry -------------------------------------------------------------------------------------------
    def models(self) -> ModelList:
        return self.call("GET", _path("models"), ModelList)

    def model(self, model: str) -> ModelAnswer:
        return self.call("GET", _path("models", model), ModelAnswer)

    def put_model(self, model: str, body: Json) -> ModelAnswer:
        """The model as it should be (``last_status`` 201: created); the fields of ``PutModelRequest``."""
        return self.call("PUT", _path("models", model), ModelAnswer, body)

    def versions(self, model: str, limit: int, before: int | None = None) -> VersionPage:
        query = {"limit": limit} if before is None else {"limit": limit, "before": before}
        return self.call("GET", _path("models", model, "versions") + "?" + urlencode(query), VersionPage)

    def version(self, model: str, version: int) -> VersionAnswer:
        return self.call("GET", _path("models", model, "versions", version), VersionAnswer)

    def register(self, model: str, new: NewVersion) -> VersionAnswer:
        """Register a version (``last_status`` 201: new, 200: the same artifact was registered already)."""
        return self.call("POST", _path("models", model, "versions"), VersionAnswer, new)

    def aliases(self, model: str) -> AliasList:
        return self.call("GET", _path("models", model, "aliases"), AliasList)

    def set_alias(self, model: str, alias: str, version: int, reason: str) -> AliasAnswer:
        body = {"version": version, "reason": reason}
        return self.call("PUT", _path("models", model, "aliases", alias), AliasAnswer, body)

    def remove_alias(self, model: str, alias: str, reason: str) -> AliasAnswer:
        return self.call("DELETE", _path("models", model, "aliases", alias), AliasAnswer, {"reason": reason})

    def alias_history(self, model: str, alias: str, at: float | None = None) -> AliasHistory:
        query = "" if at is None else "?" + urlencode({"at": at})
        return self.call("GET", _path("models", model, "aliases", alias, "history") + query, AliasHistory)

    def quantize(self, model: str, version: int, request: QuantizeRequest) -> QuantizeRun:
        """Ask for a quantization (``last_status`` 202: submitted, 200: asked for before)."""
        return self.call("POST", _path("models", model, "versions", version, "quantize"), QuantizeRun, request)

    def quantizations(self) -> RunList:
        return self.call("GET", _path("quantizations"), RunList)

    def quantization(self, name: str) -> QuantizeRun:
        return self.call("GET", _path("quantizations", name), QuantizeRun)

    # -- drift ----------------------------------------------------------------------------------------------
    def drift_summary(self) -> StatusList:
        return self.call("GET", _path("drift"), StatusList)

    def drift(self, model: str) -> DriftView:
        return self.call("GET", _path("drift", model), DriftView)

    def set_reference(self, model: str, feature: str, body: Json) -> ReferenceRecord:
        """One feature's reference; the fields of the route's ``ReferenceBody``."""
        return self.call("PUT", _path("drift", model, "references", feature), ReferenceRecord, body)

    def set_rule(self, model: str, rule: DriftRule) -> RuleRecord:
        return self.call("PUT", _path("drift", model, "rule"), RuleRecord, rule)

    def reset_rule(self, model: str) -> RuleReset:
        return self.call("DELETE", _path("drift", model, "rule"), RuleReset)

    # -- rollouts -------------------------------------------------------------------------------------------
    def rollouts(self) -> RolloutList:
        return self.call("GET", _path("rollouts"), RolloutList)

    def rollout(self, name: str) -> RolloutAnswer:
        return self.call("GET", _path("rollouts", name), RolloutAnswer)

    def start_rollout(
        self, component: str, version: str, artifact: str, sha256: str, plan: Plan | None = None
    ) -> RolloutAnswer:
        body: Json = {"component": component, "version": version, "artifact": artifact, "sha256": sha256}
        if plan is not None:
            body["plan"] = plan
        return self.call("POST", _path("rollouts"), RolloutAnswer, body)

    def act(self, name: str, action: str) -> RolloutAnswer:
        """pause, resume, abort or undo a rollout."""
        return self.call("POST", _path("rollouts", name, action), RolloutAnswer)


class AgentClient(Transport):
    """A node agent's HTTP endpoint (its ``health_url``): a worker's log, a profile."""

    def logs(self, job: str, rank: int, generation: int, offset: int) -> WorkerLogChunk:
        query = urlencode({"rank": rank, "generation": generation, "offset": offset})
        return self.call("GET", _path("jobs", job, "logs") + "?" + query, WorkerLogChunk)

    def profile(self, profile_id: str) -> Json:
        return self.call("GET", _path("profiles", profile_id), Json)

    def folded(self, profile_id: str, max_bytes: int) -> bytes:
        return self.get_bytes(_path("profiles", profile_id, "folded"), max_bytes)
