"""Every NATS connection option of `serve`, `submit`, `watch` and `status` reaches the bus config."""

import typer
from typer.testing import CliRunner

from codeloop.cli.connection import Connection
from codeloop.cli.option_groups import with_option_groups
from codeloop.config.environment import bus_config


def test_each_connection_option_arrives_as_its_bus_config_keyword(tmp_path) -> None:
    files = {name: tmp_path / name for name in ("c.creds", "ca.pem", "c.pem", "k.pem")}
    for file in files.values():
        file.write_text("")
    seen: list[Connection] = []

    @with_option_groups
    def probe(name: str, connection: Connection = None, loud: bool = False) -> None:  # type: ignore[assignment] - typer fills the option group: the default is never used
        seen.append(connection)
        typer.echo(f"{name} {loud}")

    app = typer.Typer()
    app.command()(probe)
    app.command()(lambda: None)  # two commands, so `probe` is invoked by name as in codeloop
    args = ["probe", "x", "--loud", "--nats", "nats://h:1", "--state-dir", str(tmp_path)]
    args += ["--creds", str(files["c.creds"]), "--user", "u", "--password", "p", "--token", "t"]
    args += ["--tls-ca", str(files["ca.pem"]), "--tls-cert", str(files["c.pem"])]
    args += ["--tls-key", str(files["k.pem"])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "x True"
    (connection,) = seen
    config = bus_config(**connection)  # every key is a bus_config keyword
    assert config.servers == ("nats://h:1",) and (config.user, config.password, config.token) == (
        "u",
        "p",
        "t",
    )
    assert connection.get("state_dir") == tmp_path and connection.get("creds") == files["c.creds"]
    assert (connection.get("tls_ca"), connection.get("tls_cert"), connection.get("tls_key")) == (
        files["ca.pem"],
        files["c.pem"],
        files["k.pem"],
    )


def test_options_left_out_are_none_so_the_environment_decides() -> None:
    seen: list[Connection] = []

    @with_option_groups
    def probe(connection: Connection = None) -> None:  # type: ignore[assignment] - typer fills the option group: the default is never used
        seen.append(connection)

    app = typer.Typer()
    app.command()(probe)
    app.command()(lambda: None)
    assert CliRunner().invoke(app, ["probe"]).exit_code == 0
    assert seen == [dict.fromkeys(seen[0], None)] and len(seen[0]) == 9
