"""The composition root: the one place that knows every package and puts them together.

    roles      which roles a process runs and the actor each becomes (`role_specs`, `role_deps`)
    process    `serve()`: one process's bus, actors and hosted services, in three typed groups
               (`Workers`, `RoleSetup`, `Hosting`)
    embedded   `embedded_serve()`: the local serve when one runs, else one started here
    tools      the tool servers the agents of this process use (`InProcessTools`, `StdioTools`)
    telemetry  the OpenTelemetry SDK, configured once per process

The command line (`codeloop.cli`) builds what these take from its options and calls them; the
services (`codeloop.services`) and the configuration (`codeloop.config`) know nothing of them.
Nothing is re-exported here, so importing one module (the CLI's `telemetry`) does not load the
others (every agent).
"""
