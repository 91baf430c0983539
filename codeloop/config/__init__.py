"""codeloop's configuration: the environment, the configuration files, their layers, the named
pipelines, the checks a submission passes and the options a task is submitted with.

The modules depend on each other in one direction, so none of them imports another inside a
function to dodge a circle:

    errors        ConfigError
    environment   the variables (CODELOOP_HOME, CODELOOP_NATS_*, ...) and the NATS options -> BusConfig,
                  the telemetry and tool-server settings, where a root's state lives in the home
    serve_note    what a running `codeloop serve` notes (serve.json) and how a client finds its bus
    files         the configuration files (codeloop.toml, [tool.codeloop], the user's config.toml)
    task_options  TaskOptions: a task's options, each named as flag, configuration key and
                  `submit_task` argument
    settings      the layers (command line > environment > project file > user file > defaults)
                  made one `Settings`
    project_environment   `environment_settings()`: the EnvironmentSettings of a repository's
                  work (`[environment]`, the cache directory, the build variables), for every user
    pipelines     named pipelines, built-in and configured
    checks        `check_submission`: everything a submission names, checked before anything starts

Nothing is re-exported here: the command line imports `task_options` to build its flags before
`--help` prints, and should not wait for the bus and credentials modules the others import.
"""
