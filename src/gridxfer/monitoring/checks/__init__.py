"""The ``check_gridxfer_*`` Nagios plugins (entry points named in setup.cfg).

Each submodule has ``build_parser()``, ``build(args) -> nagiosplugin.Check`` and
``main(argv)``; the thin executables in ``checks/`` call these ``*_main`` functions.
"""
from __future__ import annotations


def throughput_main() -> None:
    from gridxfer.monitoring.checks.throughput import main
    main()


def tape_main() -> None:
    from gridxfer.monitoring.checks.tape import main
    main()


def buffer_main() -> None:
    from gridxfer.monitoring.checks.buffer import main
    main()


def tuning_main() -> None:
    from gridxfer.monitoring.checks.tuning import main
    main()


def link_main() -> None:
    from gridxfer.monitoring.checks.link import main
    main()
