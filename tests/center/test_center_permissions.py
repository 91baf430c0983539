"""Who may change the center is NATS's decision: a worker's credentials (no publish permission on
the center's subjects) read it but cannot write it, and the push says so (issue acceptance; our
contract: docs/configuration.md, "Who may change it")."""

import json
from pathlib import Path

import anyio
import pytest

from bus.center import center_bucket, history
from bus.config import BusConfig
from bus.connection import open_bus
from tests.center.support import cli, nats

pytestmark = [pytest.mark.anyio]

OPERATOR, WORKER = ("operator", "operator-password-1"), ("worker", "worker-password-1")
CENTER_STREAM = "KV_codeloop-config"


def _auth_config(path: Path) -> Path:
    """Two users as docs/configuration.md has them: an operator with every permission, a worker
    denied every write to the center (its values and its stream)."""
    deny = [
        "$KV.codeloop-config.>",
        *(f"$JS.API.STREAM.{op}.{CENTER_STREAM}" for op in ("UPDATE", "DELETE", "PURGE")),
    ]
    deny.append(f"$JS.API.STREAM.MSG.DELETE.{CENTER_STREAM}")
    path.write_text(
        "authorization {\n  users = [\n"
        f'    {{user: "{OPERATOR[0]}", password: "{OPERATOR[1]}"}}\n'
        f'    {{user: "{WORKER[0]}", password: "{WORKER[1]}", permissions: {{publish: {{deny: {json.dumps(deny)}}}}}}}\n'
        "  ]\n}\n"
    )
    return path


@pytest.mark.slow
async def test_a_workers_credentials_read_the_center_but_cannot_write_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both pushes are audit records in the home's hash chain: who, the outcome, the keys."""
    monkeypatch.setenv("CODELOOP_HOME", str(tmp_path / "home"))
    document = tmp_path / "center.toml"
    document.write_text("[budgets]\nmax_steps = 5\n")
    changed = tmp_path / "changed.toml"
    changed.write_text("[budgets]\nmax_steps = 500\n")
    conf = _auth_config(tmp_path / "auth.conf")
    with anyio.fail_after(120):
        async with nats(tmp_path, "--config", str(conf)) as server:
            url = server.url
            as_operator = ("--nats", url, "--user", OPERATOR[0], "--password", OPERATOR[1])
            as_worker = ("--nats", url, "--user", WORKER[0], "--password", WORKER[1])
            pushed = await cli("config", "push", str(document), *as_operator)
            refused = await cli("config", "push", str(changed), *as_worker, "-m", "raise it")
            shown = await cli("config", "show", "--center", "--json", *as_worker)
            async with open_bus(BusConfig(servers=(url,), user=OPERATOR[0], password=OPERATOR[1])) as bus:
                revisions = await history(await center_bucket(bus))
    assert pushed.code == 0, pushed.stderr
    assert refused.code == 1
    assert "permission denied" in refused.stderr and "operator credentials" in refused.stderr
    assert "nothing was written" in refused.stderr
    assert [e.record.document for e in revisions] == [document.read_text()]
    assert json.loads(shown.stdout)["values"] == {"budgets.max_steps": 5}

    audit = [json.loads(line) for line in (tmp_path / "home" / "audit.jsonl").read_text().splitlines()]
    assert [(r["server"], r["tool"], r["outcome"]) for r in audit] == [
        ("config-center", "push", "ok"),
        ("config-center", "push", "permission_denied"),
    ]
    assert audit[0]["arguments"]["revision"] == 1
    assert audit[1]["arguments"]["keys_changed"] == ["budgets.max_steps"]
    verified = await cli("audit", "verify", str(tmp_path / "home" / "audit.jsonl"))
    assert verified.code == 0, verified.stderr
