"""`codeloop serve`'s options in typed groups, each checked once into what `codeloop.wiring.process`
takes (`Workers`, `Hosting`'s parts): which roles, the hosted tool servers, metrics, health, the
workspace service. A problem is a usage error (exit 2) raised before anything starts.

The configuration, the agents and the services are imported inside the methods: these classes are
built when `codeloop --help` runs, and those modules take seconds to import.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail
from codeloop.cli.option_groups import OptionGroup

if TYPE_CHECKING:
    from agents.workspace.providers import RemoteWorkspaces
    from codeloop.services.hosted_mcp import McpHosting
    from codeloop.services.metrics import MetricsServing
    from codeloop.services.workspace_service import WorkspaceHosting
    from codeloop.wiring.process import Service, Workers


@dataclass(frozen=True)
class RoleOptions(OptionGroup):
    """Which roles this process runs, and how its workers take messages."""

    role: Annotated[
        list[str] | None,
        typer.Option(
            "--role",
            help="Role to run in this process (repeatable): a built-in one or any installed plug-in role "
            "(`codeloop roles` lists them). Default: orchestrator, planner, retriever, coder, verifier, "
            "plus the installed roles --pipeline names (with --pipeline echo: orchestrator, echo). "
            "`swebench`: a SWE-bench worker taking the instances of `codeloop swebench --nats` runs, "
            "one instance at a time per --role swebench given (see --swebench-repos).",
        ),
    ] = None
    pipeline: Annotated[
        str | None,
        typer.Option(
            "--pipeline",
            help="Run every task that names no pipeline of its own through this one: a built-in one (fix, "
            "explain, diagnose, echo) or one codeloop.toml here declares under [pipelines]. Default (auto): "
            "by the task (diagnose without a model, explain in read mode, else fix).",
        ),
    ] = None
    ack_wait: Annotated[
        float | None,
        typer.Option(
            "--ack-wait",
            min=0.5,
            help="Seconds a worker may hold a message without a heartbeat before it goes to another "
            "worker (default 30): shorter recovers faster from a dead worker.",
        ),
    ] = None
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            help="Requests each role's worker in this process handles at once (default 64). Lower it "
            "where a worker has a fixed share of a machine (a pod's CPU limit), so that the work "
            "spreads over more workers instead of queueing inside one.",
        ),
    ] = None

    swebench_repos: Annotated[
        Path | None,
        typer.Option(
            "--swebench-repos",
            help="With --role swebench: this machine's repositories (clones, mirrors or bundles, as for "
            "`codeloop swebench --repos`). Default: none (cloned from GitHub where the network allows).",
        ),
    ] = None

    def workers(self, *, workspace_service_only: bool) -> "Workers":
        """The checked `Workers`; notes and warnings about the installed roles go to stderr.

        Raises:
            typer.Exit: (2) an unknown pipeline or a role that cannot run here.
        """
        from agents.orchestrator.pipeline import PipelineError
        from agents.runtime.plugins import load_roles
        from bus.actor import DeliveryPolicy
        from codeloop.config.pipelines import (
            PipelineConfigError,
            resolve_pipeline,
            role_problems,
            serving_roles,
        )
        from codeloop.swebench import SWEBENCH_ROLE
        from codeloop.wiring.process import Workers
        from codeloop.wiring.roles import SERVED_BY_DEFAULT, unknown_role_problem

        registry = load_roles()
        chosen = None
        if self.pipeline is not None and self.pipeline != "auto":
            try:
                chosen = resolve_pipeline(self.pipeline, Path.cwd())
            except (PipelineError, PipelineConfigError) as exc:
                raise fail(f"--pipeline: {exc}", 2) from None
        if self.role:
            roles = tuple(self.role)
        elif workspace_service_only:
            roles = ()
        elif self.pipeline == "echo":
            roles = ("orchestrator", "echo")
        else:
            roles = serving_roles(SERVED_BY_DEFAULT, chosen, registry)
        # `swebench` is no actor but a service beside them, one slot per occurrence.
        slots = roles.count(SWEBENCH_ROLE)
        roles = tuple(role for role in roles if role != SWEBENCH_ROLE)
        # Checked before anything starts: a bad role or replica count used to surface only after
        # the embedded server was up and its state directory written.
        problem = unknown_role_problem(roles, registry, services=(SWEBENCH_ROLE,))
        if problem is not None:
            raise fail(f"--role: {problem}", 2)
        if chosen is not None and not self.role:
            missing = role_problems(chosen, registry)
            if missing:  # a foreign worker may still join: say so, do not refuse
                typer.echo(f"note: {'; '.join(missing)}; tasks wait for such a worker", err=True)
        for broken in registry.broken:
            typer.echo(
                f"warning: installed role {broken.name!r} ({broken.distribution}) is broken: {broken.reason}",
                err=True,
            )
        given = {"ack_wait_s": self.ack_wait, "concurrency": self.concurrency}
        policy = (
            DeliveryPolicy(**{k: v for k, v in given.items() if v is not None})
            if any(given.values())
            else None
        )
        return Workers(roles=roles, pipeline=chosen, policy=policy, services=self._swebench(slots))

    def _swebench(self, slots: int) -> "tuple[Service, ...]":
        """The SWE-bench workers of `slots` occurrences of `--role swebench` (none for 0).

        Raises:
            typer.Exit: (2) `--swebench-repos` without `--role swebench`, or not a directory.
        """
        if self.swebench_repos is not None:
            if not slots:
                raise fail("--swebench-repos is for SWE-bench workers: add --role swebench", 2)
            if not self.swebench_repos.is_dir():
                raise fail(f"--swebench-repos {self.swebench_repos} is not a directory", 2)
        if not slots:
            return ()
        from codeloop.cli.swebench import this_machine
        from codeloop.swebench.worker import SwebenchWorkers

        repos = self.swebench_repos.resolve() if self.swebench_repos is not None else None
        return (SwebenchWorkers(this_machine(), jobs=slots, repos_dir=repos),)


@dataclass(frozen=True)
class McpOptions(OptionGroup):
    """The tool servers and the tasks server `serve` hosts over HTTP."""

    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp/--no-mcp",
            help="Also host the fs, git, search and exec tool servers and the tasks server over HTTP.",
        ),
    ] = True
    mcp_root: Annotated[
        Path | None,
        typer.Option("--mcp-root", help="Directory the hosted tool servers are confined to. Default: here."),
    ] = None
    mcp_host: Annotated[
        str, typer.Option("--mcp-host", help="Address the tool servers listen on (each on a free port).")
    ] = "127.0.0.1"
    mcp_scopes: Annotated[
        str,
        typer.Option(
            "--mcp-scopes",
            help="Scopes granted to the hosted tool servers and their token, comma-separated. "
            "Default read (look, never change); add write to edit files and commit to codeloop/* "
            "branches, execute to run commands and tests in the sandbox: --mcp-scopes read,write,execute.",
        ),
    ] = "read"

    def hosting(self, *, workspace_service_only: bool) -> "McpHosting | None":
        """The checked `McpHosting`, or None when nothing is hosted (`--no-mcp`, `--workspaces`).

        Raises:
            typer.Exit: (2) a root that is no directory, or scopes that are bad or grant nothing.
        """
        if not self.mcp or workspace_service_only:
            return None
        from codeloop.config.environment import secret_rules
        from codeloop.services.hosted_mcp import McpHosting
        from tool_servers.protocol.scopes import parse_scopes

        root = (self.mcp_root or Path.cwd()).expanduser()
        if not root.is_dir():
            raise fail(f"--mcp-root {root} is not a directory (or pass --no-mcp)", 2)
        try:
            scopes = parse_scopes(self.mcp_scopes)
        except ValueError as exc:
            raise fail(f"--mcp-scopes: {exc}", 2) from None
        if not scopes:
            raise fail("--mcp-scopes grants nothing; give at least read (or pass --no-mcp)", 2)
        return McpHosting(root=root.resolve(), scopes=scopes, host=self.mcp_host, secrets=secret_rules())


@dataclass(frozen=True)
class MetricsOptions(OptionGroup):
    """The Prometheus endpoint."""

    metrics: Annotated[
        bool,
        typer.Option("--metrics/--no-metrics", help="Serve Prometheus metrics at http://HOST:PORT/metrics."),
    ] = True
    metrics_port: Annotated[
        int,
        typer.Option(
            "--metrics-port", min=0, max=65535, help="Port of the metrics endpoint (0: a free one)."
        ),
    ] = 0
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address the metrics endpoint listens on.")
    ] = "127.0.0.1"

    def serving(self) -> "MetricsServing | None":
        """The `MetricsServing` asked for, None with `--no-metrics`."""
        from codeloop.services.metrics import MetricsServing

        return MetricsServing(host=self.metrics_host, port=self.metrics_port) if self.metrics else None


@dataclass(frozen=True)
class HealthOptions(OptionGroup):
    """The health endpoint (off unless a port is given)."""

    health_port: Annotated[
        int,
        typer.Option(
            "--health-port",
            min=0,
            max=65535,
            help="Serve liveness (/healthz) and readiness (/readyz: actors running, NATS connected) "
            "over HTTP on this port, e.g. for Kubernetes probes. Default 0: off.",
        ),
    ] = 0
    health_host: Annotated[
        str, typer.Option("--health-host", help="Address the health endpoint listens on (0.0.0.0 in a pod).")
    ] = "127.0.0.1"


@dataclass(frozen=True)
class WorkspaceOptions(OptionGroup):
    """The workspace service this process runs, or the one its coder and verifier use."""

    workspaces: Annotated[
        bool,
        typer.Option(
            "--workspaces",
            help="Run the workspace service: scratch workspaces of tasks' snapshots whose fs, git, search "
            "and exec tools it serves over HTTP MCP, one bearer token per workspace, to workers started "
            "with --workspace-service. It removes model-provider keys from its own environment first. "
            "No roles run here unless --role names some; the --mcp servers are not hosted.",
        ),
    ] = False
    workspace_host: Annotated[
        str,
        typer.Option("--workspace-host", help="Address the workspace service listens on (0.0.0.0 in a pod)."),
    ] = "127.0.0.1"
    workspace_port: Annotated[
        int,
        typer.Option(
            "--workspace-port", min=0, max=65535, help="Port of the workspace service (0: a free one)."
        ),
    ] = 0
    workspace_url: Annotated[
        str | None,
        typer.Option(
            "--workspace-url",
            help="Base URL workers reach the workspace service at, e.g. http://codeloop-workspaces:8700 "
            "(default: http://HOST:PORT of the listener).",
        ),
    ] = None
    workspace_service: Annotated[
        bool,
        typer.Option(
            "--workspace-service",
            help="Make this process's coder work in workspaces of the workspace service (a "
            "`serve --workspaces` on the same bus), reaching their tools only over HTTP MCP, instead of "
            "in scratch copies here.",
        ),
    ] = False

    def check(self, roles: Sequence[str]) -> None:
        """Refuse options that configure nothing, or a service no role here would use.

        Raises:
            typer.Exit: (2) saying which option and what to do.
        """
        listener_given = (
            self.workspace_url is not None or self.workspace_port or self.workspace_host != "127.0.0.1"
        )
        if not self.workspaces and listener_given:
            raise fail(
                "--workspace-host, --workspace-port and --workspace-url configure --workspaces; add it", 2
            )
        if self.workspace_url is not None and not self.workspace_url.startswith(("http://", "https://")):
            raise fail(f"--workspace-url {self.workspace_url!r} is no http:// or https:// URL", 2)
        if self.workspace_service and "coder" not in roles and "verifier" not in roles:
            raise fail("--workspace-service is for a coder or verifier (--role coder or --role verifier)", 2)

    def hosting(self, stripped: list[str]) -> "WorkspaceHosting | None":
        """The `WorkspaceHosting` of `--workspaces` (None without); `stripped` names the provider
        keys taken out of this process's environment."""
        if not self.workspaces:
            return None
        from codeloop.services.workspace_service import WorkspaceHosting

        return WorkspaceHosting(
            host=self.workspace_host,
            port=self.workspace_port,
            public_url=self.workspace_url,
            stripped_env=tuple(stripped),
        )

    def remote(self) -> "RemoteWorkspaces | None":
        """The coder's workspaces in the workspace service (`--workspace-service`), else None."""
        if not self.workspace_service:
            return None
        from agents.workspace.providers import RemoteWorkspaces

        return RemoteWorkspaces()
