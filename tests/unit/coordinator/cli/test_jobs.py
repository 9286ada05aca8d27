"""`myoloctl apply|get jobs|describe job|scale|delete|logs` against served APIs on real ports.

The coordinators are the API's real routes over in-memory jobs components and fleets (a leader and a standby
that redirects writes to it). The agents are fakes that serve a worker's log in chunks as the contract says,
growing between polls; one test reads a log on disk through the agent's own route.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import msgspec
import pytest
import yaml
from aiohttp import web
from rich.console import Console
from typer.testing import CliRunner

from myolo.agent.endpoint.logs import JobLogs
from myolo.agent.trainer.launch import rank_log, run_dir
from myolo.coordinator.cli import render
from myolo.coordinator.cli.main import app
from myolo.coordinator.jobs.answers import JobAnswer, job_answer
from myolo.coordinator.jobs.records import with_spec, with_status
from myolo.events.payloads.worker_logs import WorkerLogChunk
from tests.support.api_auth import OPERATOR, token
from tests.support.coordinator import api_fleet
from tests.support.coordinator.api_fleet import MemoryFleet
from tests.support.coordinator.memory_jobs import MANIFEST, MemoryJobs, app_for, running_job
from tests.support.helpers import refused_port


class Served:
    """An aiohttp app on a real port, run by its own event loop in a thread (myoloctl is synchronous)."""

    def __init__(self, app: web.Application) -> None:
        self.requests: list[str] = []

        async def note(request: web.Request, response: web.StreamResponse) -> None:
            self.requests.append(f"{request.method} {request.path_qs}")

        app.on_response_prepare.append(note)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner = web.AppRunner(app, access_log=None)
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    async def _start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class FakeAgent:
    """An agent's ``GET /v1/jobs/{job_id}/logs``: each rank's log grows by the next of ``pieces`` after every
    answer ("" adds nothing), and is at its end (``eof``) once every piece is out and read."""

    def __init__(self, node_id: str, logs: dict[int, str], pieces: dict[int, list[str]] | None = None) -> None:
        self.node_id = node_id
        self.logs = dict(logs)
        self.pieces = {rank: list(p) for rank, p in (pieces or {}).items()}
        self.asked: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.asked.append(dict(request.query))
        rank, offset = int(request.query["rank"]), int(request.query["offset"])
        if rank not in self.logs:
            return web.json_response({"error": f"no log of rank {rank} here", "field": "rank"}, status=404)
        data = self.logs[rank].encode()
        pending = self.pieces.get(rank, [])
        chunk = WorkerLogChunk(
            job_id=request.match_info["job_id"],
            generation=int(request.query["generation"]),
            rank=rank,
            node_id=self.node_id,
            offset=offset,
            next_offset=len(data),
            size=len(data),
            text=data[offset:].decode(),
            eof=not pending,
        )
        if pending:
            self.logs[rank] += pending.pop(0)
        return web.json_response(msgspec.to_builtins(chunk))

    def app(self) -> web.Application:
        application = web.Application()
        application.add_routes([web.get("/v1/jobs/{job_id}/logs", self.handle)])
        return application


class Cluster:
    """A leading and a standby coordinator (the jobs' and the fleet's real routes), agents, jobs added by tests."""

    def __init__(self) -> None:
        self.leader_jobs = MemoryJobs()
        self.fleet = MemoryFleet("coord-1")
        self.leader = Served(app_for(self.leader_jobs, self.fleet, api_fleet.parts_for(self.fleet)))
        self.standby_jobs = MemoryJobs(leader=False, leader_url=self.leader.url)
        self.standby = Served(
            app_for(self.standby_jobs, MemoryFleet("coord-2", leader=False, leader_url=self.leader.url))
        )
        self.agents: list[Served] = []

    def add_node(self, node_id: str, health_url: str | None) -> None:
        self.fleet.add(api_fleet.node(node_id, self.fleet.now(), health_url=health_url))

    def add_agent(self, agent: FakeAgent) -> Served:
        served = Served(agent.app())
        self.agents.append(served)
        self.add_node(agent.node_id, served.url + "/")
        return served

    def close(self) -> None:
        for served in [*self.agents, self.standby, self.leader]:
            served.close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.close()


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input, env={"MYOLO_API": "", "MYOLO_TOKEN": token(OPERATOR)})


@pytest.fixture
def job_file(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(MANIFEST)
    return path


# -- apply --------------------------------------------------------------------------------------------------
def test_apply_via_the_standby_creates_then_configures_on_the_leader(cluster: Cluster, job_file) -> None:
    first = run("apply", "-f", str(job_file), "--api", cluster.standby.url)
    assert first.exit_code == 0, first.output
    assert first.output.strip() == f"job/tiny-pretrain created via {cluster.leader.url}"
    record = cluster.leader_jobs.job("tiny-pretrain")
    assert record is not None and record.spec.manifest == MANIFEST and record.spec.job.max_replicas == 3
    assert cluster.standby_jobs.records == {}
    job_file.write_text(MANIFEST.replace("maxReplicas: 3", "maxReplicas: 2"))
    again = run("apply", "-f", str(job_file), "--api", cluster.standby.url)
    assert again.exit_code == 0, again.output
    assert again.output.startswith("job/tiny-pretrain configured")
    assert cluster.leader_jobs.job("tiny-pretrain").spec.job.max_replicas == 2
    assert [w[0] for w in cluster.leader_jobs.writes] == ["apply", "apply"]
    assert all(w[2] == f"operator:{OPERATOR}" for w in cluster.leader_jobs.writes)  # the token's name


def test_apply_reads_stdin(cluster: Cluster) -> None:
    result = run("apply", "-f", "-", "--api", cluster.leader.url, input=MANIFEST)
    assert result.exit_code == 0, result.output
    assert "job/tiny-pretrain created" in result.output


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("maxReplicas: 3", "maxReplicas: 0"), "spec.maxReplicas: Expected `int` >= 1"),
        (("minReplicas: 1", "minReplicas: 4"), "spec.maxReplicas: must be >= minReplicas (4)"),
        (("threshold: 10", "threshold: 10%"), "spec.policies[1].threshold: gradient_staleness is not a percentage"),
        (("kind: ElasticJob", "kind: Pod"), "kind: 'Pod' is not supported"),
    ],
)
def test_a_bad_manifest_exits_2_naming_the_field_before_anything_is_sent(
    cluster: Cluster, job_file, change: tuple[str, str], message: str
) -> None:
    job_file.write_text(MANIFEST.replace(*change))
    result = run("apply", "-f", str(job_file), "--api", cluster.leader.url)
    assert result.exit_code == 2, result.output
    assert message in result.output and "nothing was sent" in result.output
    assert cluster.leader.requests == []


def test_apply_names_an_unreadable_file(cluster: Cluster, tmp_path) -> None:
    missing = run("apply", "-f", str(tmp_path / "nope.yaml"), "--api", cluster.leader.url)
    assert missing.exit_code == 2 and "-f " in missing.output and "No such file" in missing.output
    big = tmp_path / "big.yaml"
    big.write_text(MANIFEST + "#" * (256 * 1024))
    over = run("apply", "-f", str(big), "--api", cluster.leader.url)
    assert over.exit_code == 2 and "over 262144 bytes" in over.output
    assert cluster.leader.requests == []


def test_a_change_a_running_job_cannot_take_exits_2_naming_the_field(cluster: Cluster, job_file) -> None:
    cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    job_file.write_text(MANIFEST.replace("{model: {name: tiny}", "{model: {name: small}"))
    result = run("apply", "-f", str(job_file), "--api", cluster.leader.url)
    assert result.exit_code == 2
    assert "spec.trainer.model" in result.output and "delete the job" in result.output


# -- get and describe ---------------------------------------------------------------------------------------
def test_get_jobs_table_when_piped(cluster: Cluster) -> None:
    empty = run("get", "jobs", "--api", cluster.standby.url)
    assert empty.exit_code == 0 and "No jobs yet" in empty.output
    cluster.standby_jobs.add(running_job(time.time()))
    waiting = running_job(time.time(), name="waiting")
    cluster.standby_jobs.add(
        with_status(
            waiting,
            phase="Pending",
            reason="needs 1 GPU, 0 free",
            generation=None,
            progress=type(waiting.status.progress)(),
        )
    )
    result = run("get", "jobs", "--api", cluster.standby.url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "REPLICAS", "GEN", "STEP", "LOSS", "TOKENS/S", "AGE", "REASON"]
    assert lines[1].split()[:8] == ["tiny-pretrain", "Running", "2/1-3", "2", "150/400", "2.3456", "12346", "5m0s"]
    assert lines[1].endswith("training on 2 of 3 replicas (node-b cordoned)")
    assert lines[2].split()[:7] == ["waiting", "Pending", "0/1-3", "-", "0/400", "-", "-"]
    assert lines[2].endswith("needs 1 GPU, 0 free")
    one = run("get", "job", "waiting", "--api", cluster.standby.url)
    assert one.exit_code == 0 and len(one.output.splitlines()) == 2 and "waiting" in one.output


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_get_jobs_as_data_is_the_full_record(cluster: Cluster, fmt: str) -> None:
    record = cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    result = run("get", "jobs", "-o", fmt, "--api", cluster.leader.url)
    assert result.exit_code == 0, result.output
    body = json.loads(result.output) if fmt == "json" else yaml.safe_load(result.output)
    assert [msgspec.convert(j, JobAnswer) for j in body["items"]] == [job_answer(record)]
    one = run("get", "jobs", "tiny-pretrain", "-o", fmt, "--api", cluster.leader.url)
    single = json.loads(one.output) if fmt == "json" else yaml.safe_load(one.output)
    # one job also says what NCCL chose for its generation (the list leaves it out)
    nccl = single.pop("nccl")
    listed = dict(body["items"][0])
    assert listed.pop("nccl") is None and single == listed
    assert (nccl["generation"], nccl["algo"], nccl["ranks_reported"]) == (record.status.generation.number, "auto", 0)


def test_get_jobs_watch_prints_a_snapshot_per_refresh(cluster: Cluster) -> None:
    cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    result = run("get", "jobs", "-o", "json", "-w", "--interval", "0.1", "--count", "2", "--api", cluster.leader.url)
    assert result.exit_code == 0, result.output
    assert [len(json.loads(line)["items"]) for line in result.output.splitlines()] == [1, 1]


def test_get_or_describe_an_unknown_job_exits_2(cluster: Cluster) -> None:
    for args in (("get", "job", "ghost"), ("describe", "job", "ghost")):
        result = run(*args, "--api", cluster.leader.url)
        assert result.exit_code == 2, args
        assert "job 'ghost' is not known (name)" in result.output and "GET /v1/jobs" in result.output


def test_describe_job_shows_generation_members_progress_and_decisions(cluster: Cluster) -> None:
    now = cluster.leader_jobs.clock.now()
    cluster.leader_jobs.add(with_spec(running_job(now), desired_replicas=3))
    result = run("describe", "job", "tiny-pretrain", "--api", cluster.leader.url)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Name:         tiny-pretrain" in out
    assert "Phase:        Running  (training on 2 of 3 replicas (node-b cordoned))" in out
    assert "Replicas:     2 (min 1, max 3; pinned at 3 by scale)" in out
    assert "Restarts:     1 of 10 (failures: node-b 1 in a row)" in out
    assert "Checkpoints:  /srv/myolo/checkpoints/tiny-pretrain; every 20 steps, snapshot every 1" in out
    gen = out.split("Generation 2 (running):")[1]
    assert "Replicas:     2, world size 2 (1 worker(s) per node on 2 node(s))" in gen
    assert "Rendezvous:   10.0.0.1:29411" in gen and "Resumed:      step 120" in gen
    members = [line.split() for line in gen.splitlines() if line.startswith("  node-") or "NODE RANK" in line]
    assert members == [
        ["NODE", "NODE", "RANK", "RANKS", "GPUS"],
        ["node-a", "0", "0", "0"],
        ["node-c", "1", "1", "1"],
    ]
    assert "step 150/400   loss 2.3456   tokens/s 12346   step time 0.125s" in out
    policies = out.split("Policies:")[1].splitlines()
    assert policies[2].split() == ["gpu_util", "75%", "scaleOut", "1m0s", "5m0s"]
    assert policies[3].split() == ["gradient_staleness", "10", "scaleIn", "1m0s", "5m0s"]
    decisions = out.split("Decisions (newest last):")[1].splitlines()
    assert decisions[1].split() == ["TIME", "KIND", "GEN", "REPLICAS", "BY", "REASON", "METRICS"]
    clock = time.strftime("%H:%M:%S", time.localtime(now - 30))
    assert decisions[3].split() == [
        clock,
        "shrink",
        "2",
        "2",
        "auto",
        *["node-b", "cordoned:", "XID", "79", "on", "GPU", "0"],
        "gpu_util=81.5",
    ]  # the newest last
    assert decisions[2].split()[1] == "start"


def test_describe_a_job_that_waits(cluster: Cluster) -> None:
    job = running_job(cluster.leader_jobs.clock.now())
    cluster.leader_jobs.add(with_status(job, phase="Pending", reason="needs 1 GPU", generation=None, decisions=[]))
    result = run("describe", "job", "tiny-pretrain", "--api", cluster.leader.url)
    assert result.exit_code == 0, result.output
    assert "none yet (the job waits for capacity)" in result.output
    assert result.output.rstrip().endswith("none yet")


# -- scale and delete ---------------------------------------------------------------------------------------
def test_scale_via_the_standby_lands_on_the_leader(cluster: Cluster) -> None:
    cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    result = run("scale", "job", "tiny-pretrain", "--replicas", "3", "--api", cluster.standby.url)
    assert result.exit_code == 0, result.output
    assert (
        result.output.strip()
        == f"job/tiny-pretrain scaled to 3 replicas (running 2 now, Running) via {cluster.leader.url}"
    )
    assert cluster.leader_jobs.job("tiny-pretrain").spec.desired_replicas == 3


def test_scale_errors_name_the_bound_or_the_job(cluster: Cluster) -> None:
    cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    over = run("scale", "job", "tiny-pretrain", "--replicas", "8", "--api", cluster.leader.url)
    assert over.exit_code == 2
    assert "outside the job's bounds: minReplicas 1, maxReplicas 3 (replicas)" in over.output
    ghost = run("scale", "job", "ghost", "--replicas", "2", "--api", cluster.leader.url)
    assert ghost.exit_code == 2 and "job 'ghost' is not known" in ghost.output
    missing = run("scale", "job", "tiny-pretrain", "--api", cluster.leader.url)
    assert missing.exit_code == 2 and "--replicas" in missing.output
    assert cluster.leader_jobs.writes == []


def test_delete_via_the_standby(cluster: Cluster) -> None:
    cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    result = run("delete", "job", "tiny-pretrain", "--api", cluster.standby.url)
    assert result.exit_code == 0, result.output
    assert "job/tiny-pretrain deleting: its workers stop with a checkpoint" in result.output
    assert cluster.leader_jobs.job("tiny-pretrain").spec.deleting
    assert [(w[0], w[1]) for w in cluster.leader_jobs.writes] == [("delete", "tiny-pretrain")]
    assert cluster.leader_jobs.writes[0][2] == f"operator:{OPERATOR}"


def test_writes_with_no_coordinator_answering_exit_1() -> None:
    with refused_port() as port:
        result = run("delete", "job", "x", "--api", f"http://127.0.0.1:{port}")
    assert result.exit_code == 1 and "no coordinator API answered" in result.output


# -- logs ---------------------------------------------------------------------------------------------------
def test_logs_of_rank_0_print_what_its_agent_has(cluster: Cluster) -> None:
    cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    agent = FakeAgent("node-a", {0: "step 1 loss 2.5\n"}, {0: ["step 2 loss 2.4\n"]})
    cluster.add_agent(agent)
    result = run("logs", "job", "tiny-pretrain", "--api", cluster.leader.url)
    assert result.exit_code == 0, result.output
    assert result.output == "step 1 loss 2.5\n"  # the log as it was: without --follow, no waiting for more
    assert agent.asked == [{"rank": "0", "generation": "2", "offset": "0"}]


def test_logs_follow_reads_until_the_worker_ends(cluster: Cluster) -> None:
    cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    cluster.add_agent(FakeAgent("node-a", {0: "rank 0\n"}))
    agent = FakeAgent("node-c", {1: "step 1\n"}, {1: ["", "step 2\n", "done\n"]})
    cluster.add_agent(agent)
    result = run("logs", "job", "tiny-pretrain", "--rank", "1", "-f", "--interval", "0.01", "--api", cluster.leader.url)
    assert result.exit_code == 0, result.output
    assert result.output == "step 1\nstep 2\ndone\n"
    assert [(q["rank"], q["offset"]) for q in agent.asked] == [
        ("1", "0"),
        ("1", "7"),
        ("1", "7"),
        ("1", "14"),
    ]


def test_logs_errors_say_what_to_do(cluster: Cluster) -> None:
    now = cluster.leader_jobs.clock.now()
    cluster.leader_jobs.add(running_job(now))
    waiting = running_job(now, name="waiting")
    cluster.leader_jobs.add(with_status(waiting, phase="Pending", reason="needs 1 GPU", generation=None))

    no_gen = run("logs", "job", "waiting", "--api", cluster.leader.url)
    assert no_gen.exit_code == 1 and "has no generation yet (Pending: needs 1 GPU)" in no_gen.output
    out_of_range = run("logs", "job", "tiny-pretrain", "--rank", "2", "--api", cluster.leader.url)
    assert (
        out_of_range.exit_code == 2
        and "--rank 2: generation 2 of job tiny-pretrain has ranks 0..1" in out_of_range.output
    )

    cluster.add_node("node-a", None)  # an agent that does not say where its endpoint is
    no_url = run("logs", "job", "tiny-pretrain", "--api", cluster.leader.url)
    assert no_url.exit_code == 1 and "node node-a (rank 0)" in no_url.output and "no health_url" in no_url.output

    cluster.add_agent(FakeAgent("node-a", {}))
    no_log = run("logs", "job", "tiny-pretrain", "--api", cluster.leader.url)
    assert (
        no_log.exit_code == 1
        and "the agent of node node-a" in no_log.output
        and "no log of rank 0 here" in no_log.output
    )

    with refused_port() as port:
        cluster.add_node("node-a", f"http://127.0.0.1:{port}")
        down = run("logs", "job", "tiny-pretrain", "--api", cluster.leader.url)
    assert down.exit_code == 1 and "does not answer" in down.output


def test_on_a_terminal_the_phase_is_coloured_and_a_deletion_shows() -> None:
    record = with_spec(running_job(time.time()), deleting=True)
    buf = io.StringIO()
    render.print_jobs(
        Console(file=buf, force_terminal=True, color_system="standard", width=160),
        {"items": [msgspec.to_builtins(job_answer(record))]},
    )
    row = next(line for line in buf.getvalue().splitlines() if "tiny-pretrain" in line)
    assert "\x1b[32mRunning\x1b[0m,\x1b[35mDeleting\x1b[0m" in row
    assert "2/1-3" in row and "\x1b[32m" not in row.split("Deleting")[1]  # the colour ends with the phase


def test_logs_from_the_agents_own_route(cluster: Cluster, tmp_path) -> None:
    """The agent's real ``GET /v1/jobs/{job_id}/logs`` over a log on disk whose worker has exited."""
    cluster.leader_jobs.add(running_job(cluster.leader_jobs.clock.now()))
    directory = run_dir(tmp_path, "tiny-pretrain", 2)
    directory.mkdir(parents=True)
    text = "".join(f"step {i} loss {3 - i / 100:.2f} µ\n" for i in range(4000))  # past one 64 KiB answer
    rank_log(directory, 1).write_text(text)
    source = SimpleNamespace(node_id="node-c", workers_dir=tmp_path, workers=list)
    agent = web.Application()
    agent.add_routes(JobLogs(source).routes())
    served = Served(agent)
    cluster.agents.append(served)
    cluster.add_node("node-c", served.url)
    for follow in ([], ["--follow"]):
        result = run("logs", "job", "tiny-pretrain", "--rank", "1", *follow, "--api", cluster.leader.url)
        assert result.exit_code == 0, result.output
        assert result.output == text
    assert len(served.requests) == 4  # two chunks each time


# -- train (the seed's one-liner) ---------------------------------------------------------------------------
TRAIN = ("train", "guarded", "--defense", "gradient_compression", "--param", "0.01", "--max-replicas", "2")


def test_train_dry_run_prints_a_manifest_that_apply_accepts(cluster: Cluster, tmp_path) -> None:
    dry = run(*TRAIN, "--watermark", "/etc/myolo/wm.key", "--checkpoint-dir", "/shared/ckpt", "--dry-run")
    assert dry.exit_code == 0, dry.output
    doc = yaml.safe_load(dry.output)
    assert doc["metadata"]["name"] == "guarded" and doc["spec"]["maxReplicas"] == 2
    trainer = doc["spec"]["trainer"]
    assert trainer["defense"] == {"kind": "gradient_compression", "param": 0.01}
    assert trainer["watermark"] == {"keyFile": "/etc/myolo/wm.key"}
    assert cluster.leader.requests == []  # a dry run sends nothing
    path = tmp_path / "guarded.yaml"
    path.write_text(dry.output)
    applied = run("apply", "-f", str(path), "--api", cluster.leader.url)
    assert applied.exit_code == 0, applied.output
    job = cluster.leader_jobs.job("guarded").spec.job
    assert (job.trainer.defense.kind, job.trainer.defense.param, job.trainer.watermark.key_file) == (
        "gradient_compression",
        0.01,
        "/etc/myolo/wm.key",
    )


def test_train_applies_at_once_without_dry_run(cluster: Cluster) -> None:
    done = run(*TRAIN, "--api", cluster.leader.url)
    assert done.exit_code == 0, done.output
    assert done.output.strip() == f"job/guarded created via {cluster.leader.url}"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--param", "2"), "spec.trainer.defense.param: Expected `float` <= 1.0 (set by --param)"),
        (("--defense", "noise"), "spec.trainer.defense.kind"),
        (
            ("--defense-vocab-param", "0"),
            "spec.trainer.defense.vocabParam: Expected `float` > 0.0 (set by --defense-vocab-param)",
        ),
        (("--watermark", "ab" * 32), "never the key"),
        (("--model-arg", "layers"), "model.args (--model-arg): 'layers' must look like name=value"),
    ],
)
def test_train_refuses_bad_flags_naming_the_field_and_the_flag(cluster: Cluster, args, words: str) -> None:
    done = run("train", "bad", *args, "--dry-run")
    assert done.exit_code == 2 and words in done.output, done.output
    assert cluster.leader.requests == []
